"""``python -m tools.flagtables extras``: a release's ``Requires-Dist`` split into what every
install gets and what each extra adds, from a wheel, a METADATA file or pip's --report JSON."""

from __future__ import annotations

import json
import zipfile

from tools.flagtables import read_extras

# the lines of vLLM 0.32.0's METADATA (vllm-0.32.0.dist-info/METADATA) this reading depends on
METADATA = """Metadata-Version: 2.4
Name: vllm
Version: 0.32.0
Requires-Dist: fastsafetensors>=0.3.3
Requires-Dist: tokenspeed-mla==0.2.15; platform_system == "Linux"
Provides-Extra: instanttensor
Requires-Dist: instanttensor>=0.2.2; extra == "instanttensor"
Provides-Extra: runai
Requires-Dist: runai-model-streamer[azure,gcs,s3]>=0.15.7; extra == "runai"
"""


def test_a_wheel_a_metadata_file_and_a_pip_report_read_the_same(tmp_path):
    wheel = tmp_path / "vllm-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("vllm-0.32.0.dist-info/METADATA", METADATA)
    meta = tmp_path / "METADATA"
    meta.write_text(METADATA)
    reqs = [line.split(": ", 1)[1] for line in METADATA.splitlines() if "Requires-Dist" in line]
    report = tmp_path / "report.json"
    report.write_text(
        json.dumps(
            {
                "install": [
                    {"metadata": {"name": "vllm", "version": "0.32.0", "requires_dist": reqs}}
                ]
            }
        )
    )
    want = (
        "0.32.0",
        {
            "requires": [
                "fastsafetensors>=0.3.3",
                'tokenspeed-mla==0.2.15; platform_system == "Linux"',
            ],
            "extras": {
                "instanttensor": ["instanttensor>=0.2.2"],
                "runai": ["runai-model-streamer[azure,gcs,s3]>=0.15.7"],
            },
        },
    )
    assert read_extras(wheel) == want
    assert read_extras(meta) == want
    assert read_extras(report) == want
