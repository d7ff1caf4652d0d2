"""The behaviour half of the drift check (``tools/drift_behaviour.py``, sections 6-9).

No network, no wheels: the offered releases' committed behaviour tables
(``docs/results/flags/behaviour-vllm-X.json``, made from their wheels by ``python -m
tools.flagtables behaviour WHEEL``), copies of them with a name taken out, and small hand-made
``vllm/``, ``helpers/`` and ``lab/`` trees.
"""

from __future__ import annotations

import copy
import json
import textwrap
from pathlib import Path

import pytest

from helpers.config import load
from tools import drift, drift_behaviour, drift_reads

OLD, NEW = "0.32.0", "0.33.0"
OFFERED = [str(v) for v in load.load_registry().model.offered_vllm_versions]


@pytest.fixture(scope="module")
def tables():
    return {v: drift_behaviour.load_behaviour(v) for v in OFFERED}


@pytest.fixture(scope="module")
def helpers_read():
    reads, strays = drift_reads.helper_reads()
    return reads, strays, drift_reads.helper_metrics()


# ------------------------------------------------------------- what the helpers read, per release


def test_every_field_and_metric_the_helpers_read_is_in_every_offered_release(tables, helpers_read):
    reads, strays, metrics = helpers_read
    assert set(OFFERED) == {"0.28.0", "0.32.0", "0.33.0", "0.34.0"}
    assert (
        strays == []
    )  # every _get(x, "field") in helpers/ and lab/ is in a REPLY_READERS function
    assert drift_reads.missing_reads(tables, reads, metrics) == {v: [] for v in OFFERED}
    for v, t in tables.items():
        assert t["vllm_version"] == v
        assert t["generated"]["by"] == "python -m tools.flagtables behaviour WHEEL"


def test_the_check_fails_when_a_name_the_helpers_read_is_taken_out_of_a_table(tables, helpers_read):
    reads, _, metrics = helpers_read
    cut = copy.deepcopy(tables[NEW])
    for model in cut["protocol"]["chat completions"]["models"].values():
        model["fields"].pop("reasoning", None)  # reasoning_content is no fallback: gone too
    for model in cut["protocol"]["messages"]["models"].values():
        if "type" in model["fields"]:
            model["fields"]["type"] = [v for v in model["fields"]["type"] if v != "thinking"]
    del cut["metrics"]["names"]["vllm:prompt_tokens"]
    missing = drift_reads.missing_reads({OLD: tables[OLD], NEW: cut}, reads, metrics)
    assert missing[OLD] == []
    said = " | ".join(missing[NEW])
    assert "chat completions field `reasoning` (helpers/chat/types.py:" in said
    assert "messages `type` value `thinking` (lab/agents/apis.py:" in said
    assert "metric `vllm:prompt_tokens_total`" in said
    assert len(missing[NEW]) == 4  # reasoning, reasoning_content (its fallback), thinking, metric
    diff = drift_reads.compare(OLD, NEW, tables[OLD], cut)
    assert any("vllm:prompt_tokens_total" in b for b in diff.breaking)
    assert "| chat completions | `reasoning` (or `reasoning_content`) |" in "\n".join(
        diff.markdown()
    )


def test_the_helpers_reads_come_from_their_code(helpers_read):
    reads, _, metrics = helpers_read
    by = {(r.api, r.field): r for r in reads}
    assert by[("chat completions", "reasoning")].alternatives == ["reasoning_content"]
    assert by[("chat completions", "tool_calls")].where[0].startswith("helpers/chat/")
    assert {"thinking", "text", "tool_use"} <= set(by[("messages", "type")].values)
    assert "end_turn" in by[("messages", "stop_reason")].values  # the keys of apis._STOP
    assert by[("responses", "status")].values == ["incomplete"]
    assert ("models", "max_model_len") in by
    assert "vllm:prompt_tokens_total" in metrics and "vllm:spec_decode_num_drafts" in metrics
    assert metrics["vllm:spec_decode_num_drafts"] == [
        "helpers/chat/drafting.py"
    ]  # a module constant


def test_a_reader_outside_reply_readers_is_named_and_fallbacks_and_values_are_read(tmp_path):
    chat = tmp_path / "helpers" / "chat"
    chat.mkdir(parents=True)
    (chat / "types.py").write_text(
        textwrap.dedent(
            """
            REPLY_READERS = {"messages": ("helpers.chat.types.read",)}
            KINDS = {"text": 1, "tool_use": 2}

            def _get(obj, name):
                return obj.get(name)

            def read(block):
                kind = _get(block, "type")
                if kind == "thinking" or kind in ("text",):
                    return _get(block, "thinking") or _get(block, "text")
                return KINDS.get(kind)
            """
        )
    )
    (chat / "other.py").write_text(
        "from helpers.chat.types import _get\nM = 'vllm:num_requests_running'\n"
        "def stray(x):\n    return _get(x, 'usage')\n"
    )
    reads, strays = drift_reads.helper_reads(tmp_path)
    by = {r.field: r for r in reads}
    assert by["type"].values == ["text", "thinking", "tool_use"]
    assert by["thinking"].alternatives == ["text"] and by["text"].alternatives == ["thinking"]
    assert strays == ["helpers/chat/other.py::stray"]
    assert drift_reads.helper_metrics(tmp_path) == {
        "vllm:num_requests_running": ["helpers/chat/other.py"]
    }


def test_the_labs_reply_readers_and_metrics_are_read_beside_the_cores(tmp_path):
    chat, agents = tmp_path / "helpers" / "chat", tmp_path / "lab" / "agents"
    for folder in (chat, agents):
        folder.mkdir(parents=True)
    (chat / "types.py").write_text(
        'REPLY_READERS = {"models": ("helpers.chat.types.size",)}\n'
        "def _get(obj, name):\n    return obj.get(name)\n"
        "def size(model):\n    return _get(model, 'max_model_len')\n"
    )
    (agents / "apis.py").write_text(
        "from helpers.chat.types import _get\n"
        'REPLY_READERS = {"messages": ("lab.agents.apis.read",)}\n'
        "M = 'vllm:num_requests_running'\n"
        "def read(block):\n    return _get(block, 'stop_reason')\n"
        "def stray(x):\n    return _get(x, 'usage')\n"
    )
    reads, strays = drift_reads.helper_reads(tmp_path)
    assert [(r.api, r.field, r.where) for r in reads] == [
        ("messages", "stop_reason", ["lab/agents/apis.py::read"]),
        ("models", "max_model_len", ["helpers/chat/types.py::size"]),
    ]
    assert strays == ["lab/agents/apis.py::stray"]
    assert drift_reads.helper_metrics(tmp_path) == {
        "vllm:num_requests_running": ["lab/agents/apis.py"]
    }


# ------------------------------------------------------------- 0.32.0 -> 0.33.0, committed tables


@pytest.fixture(scope="module")
def diff_032_033(tables):
    return drift_reads.compare(OLD, NEW, tables[OLD], tables[NEW])


def test_033_drops_mamba_prefix_caching_from_nemotron_h_and_its_drafter_shares_weights(
    diff_032_033,
):
    text = "\n".join(diff_032_033._interfaces())
    assert (
        "**drops `SupportsMambaPrefixCaching`**; flags lost: `supports_mamba_prefix_caching`"
        in text
    )
    assert "Hybrid models get the same methods from `IsHybrid`" in text  # 0.33.0's own words
    assert "a check for it now says False" in text
    for attr, built in (("embed_tokens", "VocabParallelEmbedding"), ("lm_head", "ParallelLMHead")):
        assert f"`NemotronHMTP`, `{attr}`: **0.32.0 own → 0.33.0 target's**" in text
        assert f"builds its own (`{built}`)" in text
        assert f"`has_own_{attr} = False` on the class" in text


def test_033_responses_gains_prompt_cache_options_and_the_incomplete_event(diff_032_033):
    text = "\n".join(diff_032_033._protocol())
    for field in ("prompt_cache_options", "prompt_cache_retention"):
        assert f"`ResponsesRequest.{field}`" in text
    assert "added `response.incomplete` (vllm/entrypoints/openai/responses/serving.py)" in text
    assert "| responses | `arguments` |" in text and "not in vLLM's source" in text


def test_fly_is_new_in_033_and_lossy_in_the_codes_own_words(diff_032_033, tables):
    rows = {
        line.split("|")[1].strip(): line
        for line in diff_032_033._rejection()
        if line.startswith("| `")
    }
    assert "| **no** | yes (new) | **lossy** |" in rows["`fly`"]
    assert "FLy verification is a lossy speculative decoding method" in rows["`fly`"]
    assert "| lossless |" in rows["`standard` (default)"] and "| lossless |" in rows["`block`"]
    assert tables["0.28.0"]["rejection"]["methods"].keys() == {"standard", "synthetic", "block"}


def test_metrics_section_names_what_the_helpers_scrape(diff_032_033):
    text = "\n".join(diff_032_033._metrics())
    assert "| `vllm:prompt_tokens_total` | helpers/server/stall.py" in text
    assert "yes (`vllm:prompt_tokens`)" in text
    assert "removed (0) none" in text and diff_032_033.breaking == []


def test_the_command_takes_old_and_new_and_prints_sections_6_to_9(capsys):
    assert drift.main([OLD, NEW, "--tables"]) == 0
    out = capsys.readouterr().out
    assert "Generated by `python -m tools.drift 0.32.0 0.33.0 --tables`" in out
    for head in ("## 6. Model interfaces", "## 7. API fields", "## 8. Speculative", "## 9. Pro"):
        assert head in out
    assert drift.main(["0.28.0", OLD, NEW, "--tables"]) == 2
    assert "pass NEW, OLD NEW" in capsys.readouterr().err


# ------------------------------------------------------------- the readers, on a made-up vllm/


_TREE = {
    "model_executor/models/registry.py": (
        "_M = {'NemotronHForCausalLM': ('nemotron_h', 'NemotronHForCausalLM'),\n"
        "      'NemotronHMTPModel': ('nemotron_h_mtp', 'NemotronHMTP')}\n"
    ),
    "model_executor/models/interfaces.py": """
        from typing import ClassVar, Literal, Protocol
        class IsHybrid(Protocol):
            '''Hybrid models.'''
            is_hybrid: ClassVar[Literal[True]] = True
        class SupportsPrefix(Protocol):
            '''Prefix caching.'''
            supports_prefix: ClassVar[Literal[True]] = True
        def supports_prefix(model):
            return getattr(model, "supports_prefix", False)
        """,
    "model_executor/models/nemotron_h.py": """
        from torch import nn
        from .interfaces import IsHybrid, SupportsPrefix
        class Layer(nn.Module):
            pass
        class NemotronHForCausalLM(nn.Module, IsHybrid, SupportsPrefix):
            pass
        """,
    "model_executor/models/nemotron_h_mtp.py": """
        from torch import nn
        class NemotronHMTP(nn.Module):
            has_own_lm_head = False
            def __init__(self):
                self.embed_tokens = VocabParallelEmbedding(1, 2)
                self.lm_head = None
        """,
    "config/speculative.py": """
        from typing import Literal
        Method = Literal["exact", "loose"]
        class SpeculativeConfig:
            rejection_sample_method: Method = "exact"
            '''How drafts are checked. 'exact' uses rejection sampling. 'loose' is quick.'''
            def check(self):
                if self.rejection_sample_method == "loose":
                    warn("Loose checks are lossy and may degrade outputs.")
        """,
    "entrypoints/openai/protocol.py": """
        from typing import Literal
        from pydantic import BaseModel
        from openai.types.responses import ResponseOutputItem
        class Usage(BaseModel):
            input_tokens: int
        class ResponsesRequest(BaseModel):
            input: str
        class ResponsesResponse(BaseModel):
            output: list[ResponseOutputItem]
            status: Literal["completed", "incomplete"]
            usage: "Usage | None" = None
        def send():
            return Event(type="response.incomplete")
        """,
    "v1/metrics/loggers.py": "NAMES = ['vllm:prompt_tokens', 'vllm:not a name']\n",
    "benchmarks/serve.py": "READ = 'vllm:client_side_only'\n",
}


def _tree(root: Path) -> Path:
    for rel, text in _TREE.items():
        path = root / "vllm" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_each_reader_on_a_made_up_release(tmp_path):
    b = drift_behaviour.read_behaviour(_tree(tmp_path))
    mi = b["model_interfaces"]
    assert mi["classes"]["NemotronHForCausalLM"]["flags"] == ["is_hybrid", "supports_prefix"]
    assert "Layer" not in mi["classes"]
    assert mi["flag_checks"] == {"supports_prefix": "supports_prefix"}
    mtp = mi["drafters"]["NemotronHMTP"]
    assert mtp["embed_tokens"]["builds"] == ["VocabParallelEmbedding"]
    assert mtp["lm_head"] == {
        "builds": [],
        "set_to_none": True,
        "has_own_lm_head": False,
        "has_own_lm_head_set_to": [],
    }
    responses = b["protocol"]["responses"]
    assert responses["models"]["ResponsesResponse"]["fields"]["status"] == [
        "completed",
        "incomplete",
    ]
    assert responses["models"]["Usage"]["fields"] == {"input_tokens": []}  # a string annotation
    assert responses["models"]["ResponsesRequest"]["sides"] == ["request"]
    assert responses["models"]["Usage"]["sides"] == ["reply"]
    reply = drift_reads.api_fields(b, "responses")  # what a reply reader may find
    assert "status" in reply and "input_tokens" in reply and "input" not in reply
    assert responses["sdk_types"] == ["openai.types.responses.ResponseOutputItem"]
    assert b["protocol"]["messages"]["roots"]["AnthropicMessagesRequest"] is None
    assert b["responses_events"] == {"response.incomplete": "vllm/entrypoints/openai/protocol.py"}
    methods = b["rejection"]["methods"]
    assert b["rejection"]["field"] == "rejection_sample_method"
    assert methods["exact"]["verdict"] == "lossless" and methods["loose"]["verdict"] == "lossy"
    assert b["metrics"]["names"] == {"vllm:prompt_tokens": "vllm/v1/metrics/loggers.py"}


def test_a_table_is_written_from_a_wheel_and_a_missing_one_is_named(tmp_path):
    import zipfile

    wheel = tmp_path / "vllm-9.9.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    src = _tree(tmp_path / "src")
    with zipfile.ZipFile(wheel, "w") as z:
        for path in (src / "vllm").rglob("*.py"):
            z.write(path, path.relative_to(src).as_posix())
    out = drift_behaviour.generate(wheel, out=tmp_path / "b.json")
    t = json.loads(out.read_text())
    assert t["vllm_version"] == "9.9.0" and t["generated"]["from"] == wheel.name
    assert t["metrics"]["names"] == {"vllm:prompt_tokens": "vllm/v1/metrics/loggers.py"}
    with pytest.raises(drift_behaviour.BehaviourError, match="no behaviour table|No behaviour"):
        drift_behaviour.load_behaviour("0.0.1")
