"""Adapters on the real vLLM CPU server: the stand-in with ``--enable-lora`` serving the two
trained adapters (``lora_server``, one start for this file and the notebook), and the session's
``standin_server`` (no LoRA flags, no runtime updates) for the failures of a server without LoRA.

Every reply checked here is vLLM 0.32.0's own; the adapters' answers are the trained ones.
"""

from __future__ import annotations

import json
import re
import time

import openai
import pytest

from helpers.errors import AdapterError
from helpers.paths import REPO_ROOT
from lab.adapters.check import check_adapter, modules_of
from lab.adapters.faults import faulty_adapter
from lab.adapters.serving import (
    check_served,
    explain_error,
    load_adapter,
    served,
    unload_adapter,
)
from lab.adapters.spec import load_adapters, trained_answer
from tests.support.notebook_checks import assert_clean_outputs, real_out_notebooks
from tools import notebook_run

pytestmark = pytest.mark.server


def _answer(server, model: str, prompt: str) -> str:
    reply = server.client().chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}], max_tokens=64, temperature=0
    )
    return (reply.choices[0].message.content or "").strip()


def test_each_adapter_answers_as_trained_and_the_base_does_not(lora_server):
    """The acceptance test of the adapters: each adapter's answer to its own prompt is the
    trained one, and the base's answer to that prompt differs from it."""
    for adapter in load_adapters().standin:
        for example in adapter.examples:
            assert _answer(lora_server, adapter.name, example.prompt) == example.answer
            assert _answer(lora_server, lora_server.model_name, example.prompt) != example.answer


def test_models_lists_the_base_and_each_adapter_with_its_parent(lora_server, lora_adapters):
    cards = {c["id"]: c for c in served(lora_server)}
    assert cards[lora_server.model_name]["parent"] is None
    for name, folder in lora_adapters.items():
        assert cards[name]["parent"] == lora_server.model_name
        assert cards[name]["root"] == str(folder)
    check_served(lora_server, "terse")


def test_an_adapter_not_loaded_gets_vllms_404_quoted_with_the_fix(lora_server):
    with pytest.raises(openai.NotFoundError) as err:
        _answer(lora_server, "no-such-adapter", "What is the capital of Japan?")
    said = explain_error(err.value)
    assert "The model `no-such-adapter` does not exist. Valid aliases:" in said
    assert "-> adapter not loaded: " in said and "--lora-modules NAME=PATH" in said
    # vLLM's "Valid aliases" name the base alone; /v1/models, asked, names the adapters loaded
    with_served = explain_error(err.value, lora_server, "no-such-adapter")
    assert (
        with_served.startswith(said)
        and "/v1/models: adapter 'no-such-adapter' is not loaded" in with_served
    )
    assert "terse" in with_served.removeprefix(said)
    with pytest.raises(AdapterError, match=r"'no-such-adapter' is not loaded \(served: .*terse"):
        check_served(lora_server, "no-such-adapter")
    with pytest.raises(AdapterError, match="adapter not loaded.*cannot be found"):
        unload_adapter(lora_server, "no-such-adapter")


def test_unloading_and_loading_back_at_run_time(lora_server, lora_adapters, standin_model):
    prompt = load_adapters().adapter("glossary").examples[0].prompt
    assert "removed successfully" in unload_adapter(lora_server, "glossary")
    try:
        assert "glossary" not in {c["id"] for c in served(lora_server)}
        with pytest.raises(openai.NotFoundError):
            _answer(lora_server, "glossary", prompt)
    finally:
        said = load_adapter(
            lora_server, "glossary", lora_adapters["glossary"], base=standin_model, max_lora_rank=8
        )
    assert said == "Success: LoRA adapter 'glossary' added successfully."
    assert _answer(lora_server, "glossary", prompt) == trained_answer("glossary", prompt)


@pytest.mark.parametrize(
    ("kind", "named", "vllm_said"),
    [
        ("rank", "rank above --max-lora-rank", "LoRA rank 16 is greater than max_lora_rank 8."),
        ("target", "target module vLLM cannot serve", "expected target modules in"),
        ("base", "tensor shapes the server cannot take", "The size of tensor a (128) must match"),
        ("dora", "LoRA feature vLLM does not serve", "vLLM does not yet support DoRA."),
        ("head-saved", "LoRA feature vLLM does not serve", "modules_to_save being either None"),
    ],
)
def test_vllm_refuses_a_broken_adapter_and_its_reply_is_named(
    lora_server, lora_adapters, tmp_path, kind, named, vllm_said
):
    """Sent unchecked: vLLM's own refusal (HTTP 500), its kind and fix; the server lives on."""
    broken = faulty_adapter(lora_adapters["terse"], kind, tmp_path / kind)
    with pytest.raises(AdapterError) as err:
        load_adapter(lora_server, f"broken-{kind}", broken)
    assert f": {named} (HTTP 500 " in str(err.value) and vllm_said in str(err.value)
    assert f"broken-{kind}" not in {c["id"] for c in served(lora_server)}
    assert lora_server.healthy()


def test_the_modules_vllm_accepts_for_the_stand_in_are_the_checks(
    lora_server, lora_adapters, standin_model, tmp_path
):
    """The check's module list for this base (lab.adapters.check.modules_of, read in vLLM
    0.32.0's code) is the set vLLM itself names in its refusal."""
    broken = faulty_adapter(lora_adapters["terse"], "target", tmp_path / "target")
    with pytest.raises(AdapterError) as err:
        load_adapter(lora_server, "broken-target", broken)
    expected = re.search(r"expected target modules in \{([^}]*)\}", str(err.value)).group(1)
    vllm_set = {m.strip().strip("'") for m in expected.split(",")}
    assert vllm_set == set(modules_of(json.loads((standin_model / "config.json").read_text())))


def test_a_narrower_base_loads_silently_in_vllm_and_only_the_check_stops_it(
    lora_server, lora_adapters, standin_model, tmp_path
):
    """vLLM 0.32.0 copies each tensor into the corner of its buffer (lora/layers/base_linear.py
    set_lora): an adapter of a narrower base loads with HTTP 200. load_adapter with the base
    refuses it before vLLM sees it."""
    broken = faulty_adapter(lora_adapters["terse"], "base-narrow", tmp_path / "narrow")
    with pytest.raises(AdapterError, match="trained for another base"):
        load_adapter(lora_server, "narrow", broken, base=standin_model, max_lora_rank=8)
    assert "narrow" not in {c["id"] for c in served(lora_server)}
    try:
        assert "added successfully" in load_adapter(lora_server, "narrow", broken)  # unchecked
    finally:
        unload_adapter(lora_server, "narrow")
    with pytest.raises(AdapterError):
        check_adapter(broken, standin_model)


def test_a_server_without_lora_is_named_from_its_own_replies(standin_server):
    """The session's server has neither --enable-lora nor VLLM_ALLOW_RUNTIME_LORA_UPDATING:
    the load route is FastAPI's 404 (runtime updates disabled), a request for an adapter is
    vLLM's 404, and /v1/models lists no adapter (started without LoRA)."""
    with pytest.raises(AdapterError) as err:
        load_adapter(standin_server, "terse", "/nowhere")
    assert 'runtime updates disabled (HTTP 404 {"detail":"Not Found"})' in str(err.value)
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True" in str(err.value)
    with pytest.raises(openai.NotFoundError):
        _answer(standin_server, "terse", "What is the capital of Japan?")
    with pytest.raises(
        AdapterError, match="serves no adapter at all .* started without LoRA.*--enable-lora"
    ):
        check_served(standin_server, "terse")


@pytest.mark.notebook
def test_the_adapters_notebook_on_the_standin(lora_server):
    """Every section against the LoRA server (attached, left as it was): the module table, the
    adapters checked, the listing, each adapter as trained and the base otherwise, unload and
    load, each failure named."""
    book = REPO_ROOT / "notebooks" / "adapters.ipynb"
    started = time.time()
    executed = notebook_run.run_notebook(
        book, {"install": False, "server_url": lora_server.url},
        output=real_out_notebooks() / book.name, progress=False,
    )  # fmt: skip
    print(f"\nadapters notebook: {time.time() - started:.0f} s")
    text = executed.read_text()
    assert "Traceback" not in text and '"output_type": "error"' not in text
    cells = json.loads(text)["cells"]
    text = "\n".join(  # what the cells showed, not their source
        "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
        for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])
    )  # fmt: skip
    assert "never applied" in text  # the module table
    assert text.count("(trained on standin-") == 3 and text.count("): OK") == 3  # step 2, step 6
    assert (
        "terse: as trained on 'What is the capital of Japan?'; the base answers otherwise" in text
    )
    assert (
        "glossary: as trained on 'Which city is our server in?'; the base answers otherwise" in text
    )
    assert "NOT as trained" not in text and "says the same" not in text
    assert (
        "-> adapter not loaded: " in text and "glossary again: 'The server is in Berlin.'" in text
    )
    for kind in ("rank", "target", "base", "base-narrow", "dora", "head-saved"):
        assert f"adapter 'broken-{kind}':" in text  # refused by the check
    assert text.count("vLLM's reply: ") == 5 and "loaded without a word" in text
    assert "LoRA feature vLLM does not serve (HTTP 500" in text
    assert "--enable-lora missing (the cookbook's check of a command, no server started): " in text
    assert "runtime updates disabled (simulated: FastAPI's 404 body, not a request): " in text
    assert "POST /v1/load_lora_adapter {'lora_name': 'glossary', 'lora_path': " in text
    assert "adapter name already loaded (HTTP 400" in text
    assert "with load_inplace=True: Success: LoRA adapter 'glossary' added successfully." in text
    assert "--max-lora-rank 8" in text  # the served one, from the registry's stand-in flags
    assert "LoRA slots (--max-loras 2 --max-lora-rank 8): " in text  # counted before the launch
    assert "(no answer, stop; reasoning: " in text  # the base's blank answer shown by its reasoning
    assert "nemotron-3.5-lightning  " in text and "—" in text  # the base, no parent
    assert {c["id"] for c in served(lora_server)} >= {"terse", "glossary"}  # left as it was
    assert lora_server.is_running()
    assert_clean_outputs(executed, stand_in=True, benchmarks=False)


def _copy(good, dest, **config):
    import shutil

    shutil.copytree(good, dest)
    cfg = json.loads((dest / "adapter_config.json").read_text())
    for key, value in config.items():
        cfg.pop(key) if value is None else cfg.__setitem__(key, value)
    (dest / "adapter_config.json").write_text(json.dumps(cfg))
    return dest


def test_vllms_other_refusals_are_named_with_their_fix(lora_server, lora_adapters, tmp_path):
    """vLLM 0.32.0's replies that had no name: a non-LoRA peft adapter (IA3), a folder without
    tensors, a config rank other than the tensors', a name already loaded (400, and
    load_inplace=True then replaces it)."""
    good = lora_adapters["terse"]
    ia3 = _copy(good, tmp_path / "ia3", peft_type="IA3", r=None, lora_alpha=None)
    with pytest.raises(
        AdapterError,
        match=r"not a LoRA adapter \(HTTP 500 .*Missing required configuration fields.*serves LoRA adapters only",
    ):
        load_adapter(lora_server, "ia3", ia3)
    empty = _copy(good, tmp_path / "empty")
    (empty / "adapter_model.safetensors").unlink()
    with pytest.raises(AdapterError, match="adapter folder without tensors .*save_pretrained"):
        load_adapter(lora_server, "empty", empty)
    from tests.lab.adapters.test_check import _edit, _rank16

    r16 = _edit(good, tmp_path / "r16", {"r": 8}, _rank16)
    with pytest.raises(
        AdapterError, match="tensor shapes the server cannot take .*a rank other than"
    ):
        load_adapter(lora_server, "r16", r16)
    with pytest.raises(AdapterError) as err:
        load_adapter(lora_server, "terse", good)
    assert "adapter name already loaded (HTTP 400 " in str(err.value)
    assert "load_inplace=True" in str(err.value)
    assert "added successfully" in load_adapter(lora_server, "terse", good, load_inplace=True)
    assert _answer(lora_server, "terse", "What is the capital of Japan?") == "Tokyo."
    assert {c["id"] for c in served(lora_server)} >= {"terse", "glossary"}


@pytest.mark.parametrize(
    "edit",
    ["regex", "all-linear", "bin"],
)
def test_adapters_vllm_serves_pass_the_check_and_load(
    lora_server, lora_adapters, standin_model, tmp_path, edit
):
    """target_modules as a regex or "all-linear", and a folder with adapter_model.bin only:
    vLLM 0.32.0 serves each (the adapter answers as trained) and the check lets them through."""
    import torch
    from safetensors.torch import load_file

    good = lora_adapters["terse"]
    targets = {"regex": r".*\.(q_proj|k_proj|v_proj|o_proj|in_proj|up_proj|down_proj)",
               "all-linear": "all-linear"}.get(edit)  # fmt: skip
    folder = _copy(good, tmp_path / edit, **({"target_modules": targets} if targets else {}))
    if edit == "bin":
        torch.save(load_file(folder / "adapter_model.safetensors"), folder / "adapter_model.bin")
        (folder / "adapter_model.safetensors").unlink()
    name = f"terse-{edit}"
    said = load_adapter(lora_server, name, folder, base=standin_model, max_lora_rank=8)
    try:
        assert "added successfully" in said
        assert _answer(lora_server, name, "What is the capital of Japan?") == "Tokyo."
    finally:
        unload_adapter(lora_server, name)
