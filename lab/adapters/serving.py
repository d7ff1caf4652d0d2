"""Adapters on a running server: what it serves (``/v1/models``), loading and unloading at run
time (``/v1/load_lora_adapter``, ``/v1/unload_lora_adapter``), and vLLM's refusals named.

Every reply is vLLM 0.32.0's own; :data:`REPLIES` words each kind with its fix, read in:
``vllm/entrypoints/openai/models/serving.py`` (load / unload and their errors),
``vllm/entrypoints/serve/lora/api_router.py`` (the routes exist only with
``VLLM_ALLOW_RUNTIME_LORA_UPDATING``: otherwise FastAPI's ``{"detail":"Not Found"}``),
``vllm/entrypoints/serve/engine/serving.py`` (a request for a model not served: "The model
`X` does not exist. Valid aliases: ..."), ``vllm/v1/worker/lora_model_runner_mixin.py``
("LoRA is not enabled. Use --enable-lora to enable LoRA."), ``vllm/lora/peft_helper.py`` and
``vllm/lora/lora_model.py`` (rank and target modules).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.errors import AdapterError
from helpers.server import httpio


@dataclass(frozen=True)
class Reply:
    """One kind of vLLM reply about adapters: ``name``, a regex over the reply's text, the fix,
    and ``source``: the file of vLLM 0.32.0 (under ``vllm/``; ``torch/`` for torch's own
    message) and the words in it that the regex matches (a test checks they are there)."""

    name: str
    pattern: str
    fix: str
    source: tuple[str, str] = ("", "")


#: vLLM 0.32.0's replies about adapters, tried in order (files: this module's docstring).
REPLIES = (
    Reply("runtime updates disabled", r'^\{"detail":"Not Found"\}$',
          "the server was started without VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, so it has no "
          "/v1/load_lora_adapter or /v1/unload_lora_adapter route: restart it with that variable "
          "(lab.adapters.spec.lora_config(..., runtime_updates=True)), or list the adapter in "
          "--lora-modules NAME=PATH at start-up",
          source=('entrypoints/serve/lora/api_router.py', 'if not envs.VLLM_ALLOW_RUNTIME_LORA_UPDATING')),
    Reply("--enable-lora missing", r"LoRA is not enabled",
          "the server was started without --enable-lora: restart it with the LoRA flags "
          "(lab.adapters.spec.lora_config adds --enable-lora --max-loras --max-lora-rank)",
          source=('v1/worker/lora_model_runner_mixin.py', 'LoRA is not enabled. Use --enable-lora to enable LoRA.')),
    Reply("rank above --max-lora-rank", r"LoRA rank (\d+) is greater than max_lora_rank (\d+)",
          "restart with a --max-lora-rank at least the adapter's rank (extra_args="
          "{\"--max-lora-rank\": N}, N one of 8, 16, 32, 64, 128, 256, 320, 512), or retrain the "
          "adapter at a lower r",
          source=('lora/peft_helper.py', 'is greater than max_lora_rank')),
    Reply("target module vLLM cannot serve", r"expected target modules in .* but received",
          "retrain without the modules named after 'received' (the ones this model has are "
          "listed after 'expected'; lab.adapters.check.NEMOTRON_H_TARGETS says what each does)",
          source=('lora/lora_model.py', 'f" target modules in {expected_lora_modules}"')),
    Reply("tensor shapes the server cannot take", r"The size of tensor a \(\d+\) must match",
          "the adapter's tensors do not fit the buffers vLLM sized for them: another base's "
          "widths, or a rank other than adapter_config.json's r (lab.adapters.check."
          "check_adapter names the first tensor that differs and which it is): train it on this "
          "base, or save it again with peft's save_pretrained",
          source=('lora/layers/base_linear.py', '.copy_(')),
    Reply("LoRA feature vLLM does not serve",
          r"vLLM (does not yet support DoRA|does not support|only supports modules_to_save)"
          r"|Adapter bias is not supported",
          "the adapter uses a peft feature vLLM 0.32.0 refuses (named in its reply): retrain it "
          "as a plain LoRA (use_dora=False, modules_to_save=None, bias='none', lora_bias=False; "
          "lm_head goes in target_modules, not modules_to_save), or merge it into the base "
          "(peft's merge_and_unload) and serve the merged model; lab.adapters.check."
          "check_adapter names it before the launch",
          source=('lora/peft_helper.py', 'vLLM does not yet support DoRA.')),
    Reply("not a LoRA adapter", r"Missing required configuration fields",
          "vLLM serves LoRA adapters only (adapter_config.json needs r, lora_alpha and "
          "target_modules): an IA3, prompt-tuning or other peft adapter cannot be served; "
          "retrain it as a LoRA (peft's LoraConfig), or merge it into the base (peft's "
          "merge_and_unload) and serve the merged model",
          source=('lora/peft_helper.py', 'Missing required configuration fields')),
    Reply("adapter folder without tensors", r"doesn't contain tensors",
          "the folder has adapter_config.json but no adapter_model.safetensors (nor .bin / .pt): "
          "save the adapter there with peft's save_pretrained",
          source=('lora/lora_model.py', "doesn't contain tensors")),
    Reply("adapter name already loaded", r"has already been loaded",
          "the name is taken: reload it in place with lab.adapters.serving.load_adapter(..., "
          "load_inplace=True) (the request's load_inplace: true, vLLM 0.32.0 "
          "LoadLoRAAdapterRequest), unload it first (POST /v1/unload_lora_adapter), or load the "
          "new one under another name",
          source=('entrypoints/openai/models/serving.py', "has already been ")),
    Reply("adapter folder not found", r"No adapter found for",
          "lora_path must be a folder on the server's machine holding adapter_config.json and "
          "adapter_model.safetensors",
          source=('exceptions.py', 'failed: No adapter found for')),
    Reply("adapter not loaded", r"The model `[^`]+` does not exist|The lora adapter '[^']+' cannot be found",
          "the name is not served: load it (POST /v1/load_lora_adapter, lab.adapters.serving."
          "load_adapter) or start the server with --lora-modules NAME=PATH; /v1/models lists "
          "what is served",
          source=('entrypoints/serve/engine/serving.py', 'f"Valid aliases: {served_names}."')),
)  # fmt: skip


def explain(body: str) -> Reply | None:
    """The :data:`REPLIES` kind vLLM's reply ``body`` (text, or JSON with ``error.message``)
    is, or None when none matches."""
    text = body
    try:
        data = json.loads(body)
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            text = str(data["error"].get("message", body))
    except ValueError:
        pass
    for reply in REPLIES:
        if re.search(reply.pattern, text) or re.search(reply.pattern, body):
            return reply
    return None


def refusal(what: str, status: int, body: str) -> AdapterError:
    """An :class:`AdapterError` for a refused call: ``what`` was asked, vLLM's reply quoted, its
    kind and fix (:func:`explain`), or the reply alone when vLLM said something not known."""
    reply = explain(body)
    said = body.strip()[:600]
    if reply is None:
        return AdapterError(
            f"{what}: HTTP {status} {said}; fix: read the server's log for the cause."
        )
    return AdapterError(f"{what}: {reply.name} (HTTP {status} {said}); fix: {reply.fix}.")


def _root(server: Any) -> str:
    url = server if isinstance(server, str) else server.base_url
    return url.rstrip("/").removesuffix("/v1")


def served(server: Any) -> list[dict[str, Any]]:
    """What ``server`` (a VLLMServer or its URL) serves: ``/v1/models``' cards as
    ``{"id", "parent", "root"}``; an adapter's ``parent`` is the base's name, the base's None.

    Raises:
        AdapterError: the server did not answer 200 (its reply quoted).
    """
    status, body = httpio.get(_root(server) + "/v1/models", timeout=30)
    if status != 200:
        raise refusal("GET /v1/models", status, body)
    return [{k: card.get(k) for k in ("id", "parent", "root")} for card in json.loads(body)["data"]]


def load_adapter(
    server: Any,
    name: str,
    path: str | Path,
    *,
    base: str | Path | dict[str, Any] | None = None,
    max_lora_rank: int | None = None,
    load_inplace: bool = False,
) -> str:
    """Load the adapter at ``path`` as ``name`` into a running server (``POST
    /v1/load_lora_adapter``, vLLM 0.32.0), after :func:`lab.adapters.check.check_adapter`
    when ``base`` is given (the base's folder or config: a wrong adapter is refused here,
    before vLLM loads a narrower one silently). The request's body is
    ``{"lora_name": name, "lora_path": path}``, plus ``"load_inplace": true`` when asked.

    Args:
        server: a VLLMServer or its URL.
        name: the served name (``model=name`` in a request).
        path: the adapter folder, on the server's machine.
        base, max_lora_rank: for :func:`lab.adapters.check.check_adapter` (None: no check).
        load_inplace: replace an adapter already loaded under ``name`` (vLLM 0.32.0
            ``LoadLoRAAdapterRequest.load_inplace``, ``entrypoints/serve/lora/protocol.py``);
            without it vLLM refuses a taken name with HTTP 400.
    Returns:
        vLLM's reply, e.g. "Success: LoRA adapter 'terse' added successfully."
    Raises:
        AdapterError: the check failed, or vLLM refused (:data:`REPLIES` names why and the fix).
    """
    if base is not None:
        from lab.adapters.check import check_adapter

        check_adapter(path, base, max_lora_rank=max_lora_rank, name=name)
    body = {
        "lora_name": name,
        "lora_path": str(path),
        **({"load_inplace": True} if load_inplace else {}),
    }
    status, text = httpio.request(
        "POST", _root(server) + "/v1/load_lora_adapter", timeout=120, json_body=body
    )
    if status != 200:
        raise refusal(f"loading adapter {name!r} from {path}", status, text)
    return text


def unload_adapter(server: Any, name: str) -> str:
    """Unload adapter ``name`` (``POST /v1/unload_lora_adapter``); returns vLLM's reply.

    Raises:
        AdapterError: vLLM refused (not loaded, or runtime updates off), with the fix.
    """
    status, text = httpio.request(
        "POST", _root(server) + "/v1/unload_lora_adapter", timeout=60, json_body={"lora_name": name}
    )
    if status != 200:
        raise refusal(f"unloading adapter {name!r}", status, text)
    return text


def explain_error(err: BaseException, server: Any = None, name: str | None = None) -> str:
    """Lines for an exception an SDK call raised (``openai.NotFoundError`` for an adapter
    that is not loaded, ...): vLLM's words, then the kind and the fix when :func:`explain`
    knows them; with ``server`` and the requested ``name``, what ``/v1/models`` says of it
    (:func:`check_served`: vLLM 0.32.0's 404 "Valid aliases" name the base alone)."""
    message = str(getattr(err, "message", None) or err)
    reply = explain(message)
    head = f"{type(err).__name__}: {message}"
    said = head if reply is None else f"{head}\n  -> {reply.name}: {reply.fix}"
    if server is not None and name is not None:
        try:
            check_served(server, name)
        except AdapterError as served_now:
            said += f"\n  /v1/models: {served_now}"
    return said


def check_served(server: Any, name: str) -> None:
    """Before a request for ``model=name``: is ``name`` served (``/v1/models``)?

    Raises:
        AdapterError: ``name`` is not served; when the server serves no adapter at all, the
            message says it was started without LoRA (``--enable-lora`` and ``--lora-modules``,
            or runtime loading); else it lists what is served and how to load ``name``.
    """
    cards = served(server)
    ids = [c["id"] for c in cards]
    if name in ids:
        return
    if not any(c["parent"] for c in cards):
        raise AdapterError(
            f"model {name!r} is not served and this server serves no adapter at all (only "
            f"{', '.join(ids)}): it was started without LoRA; fix: restart it with "
            "lab.adapters.spec.lora_config(cfg, {NAME: PATH}) (--enable-lora --max-loras "
            "--max-lora-rank --lora-modules NAME=PATH)."
        )
    raise AdapterError(
        f"adapter {name!r} is not loaded (served: {', '.join(ids)}); fix: load it "
        "(lab.adapters.serving.load_adapter, POST /v1/load_lora_adapter) or start the server "
        f"with --lora-modules {name}=PATH."
    )
