"""What a notebook quotes from docs/results, and the weightless mode's noise tolerance."""

from __future__ import annotations

import json

import pytest

from helpers import results, weightless
from helpers.errors import ResponseError
from helpers.paths import REPO_ROOT

NB = REPO_ROOT / "notebooks"


def _text(name: str) -> str:
    return "".join(
        "".join(c["source"]) for c in json.loads((NB / f"{name}.ipynb").read_text())["cells"]
    )


def test_the_measured_reference_is_only_in_the_notebook_of_its_target():
    assert "Measured reference" in _text("h200")
    for other in (
        "h100",
        "h100_bf16",
        "h100_baseten_throughput",
        "h100x8_bf16",
        "b200",
        "quickstart_cpu_standin",
    ):
        assert "Measured reference" not in _text(other), other


def test_the_reference_paragraph_is_rendered_from_the_summary_json():
    text = _text("h200")
    for variant in ("nvfp4", "bf16"):
        summary = json.loads(
            (REPO_ROOT / "docs" / "results" / "h200" / f"summary-{variant}.json").read_text()
        )
        tok = " / ".join(
            f"{r['output_tok_s']:,.0f}"
            for r in sorted(summary["table"], key=lambda r: r["concurrency"])
        )
        assert tok in text
        assert f"vLLM {summary['versions']['vllm']}" in text
        for a in summary["adaptations"]:  # every flag the run adapted is listed
            assert f"`{a['flag']} {a['value']}`" in text
    assert results.measured_reference("h100") is None


def test_noise_tolerant_reports_in_weightless_mode_and_raises_otherwise(capsys):
    with weightless.noise_tolerant(True, "tool loop"):
        raise ResponseError("The model called tool 'x!y', which is not in tools")
    out = capsys.readouterr().out
    assert "weightless mode: the tool loop did not complete because the text is noise" in out
    assert "ResponseError" in out
    with pytest.raises(ResponseError), weightless.noise_tolerant(False, "tool loop"):
        raise ResponseError("real weights: an error")
    with pytest.raises(KeyboardInterrupt), weightless.noise_tolerant(True, "tool loop"):
        raise KeyboardInterrupt


def test_gpu_notebook_parameters_for_the_gpu_path():
    """The parameters the H200 runs set exist with safe defaults."""
    import papermill

    params = papermill.inspect_notebook(str(NB / "h200.ipynb"))
    for name, default in (
        ("stand_in", "False"),
        ("weightless", "False"),
        ("variant", "None"),
        ("vllm_version", "None"),
        ("install_vllm", "False"),
        ("moe_backend", "None"),
        ("extra_args", "None"),
        ("server_url", "None"),
        ("max_tokens", "None"),
        ("temperature", "None"),
        ("top_p", "None"),
    ):
        assert params[name]["default"] == default, name
    assert "0.32.0" in params["vllm_version"]["help"] and "0.28.0" in params["vllm_version"]["help"]
