"""What a LoRA adapter may target on Nemotron-H, and a user's adapter checked before the launch.

Read in vLLM 0.32.0's code (``vllm/model_executor/models/nemotron_h.py``,
``vllm/model_executor/layers/mamba/mamba_mixer2.py``, ``vllm/lora/utils.py``,
``vllm/lora/lora_model.py``, ``vllm/lora/peft_helper.py``, ``vllm/lora/layers/base_linear.py``):

- ``NemotronHForCausalLM`` declares ``SupportsLoRA``; ``lora_skip_prefixes = ["mtp."]``: the
  MTP drafter's layers are never adapted. ``packed_modules_mapping`` packs ``q_proj``,
  ``k_proj``, ``v_proj`` into ``qkv_proj``; ``embedding_modules`` names ``embed_tokens`` and
  ``lm_head``.
- The modules an adapter may name are ``get_supported_lora_modules`` (``lora/utils.py``):
  the last name of every ``LinearBase`` / ``MoERunner`` module, plus the embedding modules.
  Anything else is refused at load: "While loading ..., expected target modules in {...} but
  received [...]" (``lora/lora_model.py``).
- ``peft_helper.validate_legal``: "LoRA rank R is greater than max_lora_rank M."
- ``set_lora`` copies each tensor into the corner of a buffer sized for this model
  (``lora/layers/base_linear.py``): an adapter of a *narrower* base loads without a word and
  answers nonsense; a *wider* one fails with torch's "The size of tensor a ... must match".
  Only a check of the shapes before the launch tells the two apart from a good adapter.
- ``LoRAModelManager._create_lora_modules`` (``lora/model_manager.py``) skips ``mixer.gate``
  of a non-gated MoE (``NemotronHForCausalLM.is_non_gated_moe = True``): the router takes no
  LoRA though its name is accepted.
- The routed experts' LoRA runs through ``add_lora_fused_moe``, which
  ``lora/punica_wrapper/punica_gpu.py`` (and ``punica_xpu.py``) implement and ``punica_cpu.py``
  does not (``punica_base.py`` raises NotImplementedError): a MoE adapter is a GPU matter (the
  stand-in has no MoE layer anyway).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.errors import AdapterError

#: Where LoRA lands in a Nemotron-H model in vLLM 0.32.0: module name -> (layer it belongs
#: to, vLLM's layer class, what its LoRA does). Source: the files this module's docstring names.
NEMOTRON_H_TARGETS: dict[str, tuple[str, str, str]] = {
    "q_proj": ("attention", "QKVParallelLinear (packed as qkv_proj)", "served"),
    "k_proj": ("attention", "QKVParallelLinear (packed as qkv_proj)", "served"),
    "v_proj": ("attention", "QKVParallelLinear (packed as qkv_proj)", "served"),
    "o_proj": ("attention", "RowParallelLinear", "served"),
    "in_proj": ("Mamba-2", "MergedColumnParallelLinear", "served"),
    "out_proj": (
        "Mamba-2",
        "RowParallelLinear",
        "served (peft 0.21 refuses to train it on Mamba models)",
    ),
    "conv1d": (
        "Mamba-2",
        "ColumnParallelLinear",
        "accepted by name, never applied: the mixer reads conv1d.weight into its conv kernel and never calls the layer",
    ),
    "up_proj": ("MLP, MoE shared experts", "ColumnParallelLinear", "served"),
    "down_proj": ("MLP, MoE shared experts", "RowParallelLinear", "served"),
    "experts": (
        "MoE routed experts",
        "FusedMoE (FusedMoEWithLoRA)",
        "served on GPU (punica_gpu.py add_lora_fused_moe) by a MoE kernel that takes LoRA (Marlin, Triton; not the Hopper recipe's Humming: moe_lora_flags); the CPU build's punica_cpu.py has no MoE LoRA",
    ),
    "gate": (
        "MoE router",
        "GateLinear (a ReplicatedLinear)",
        "accepted by name, never applied: vLLM skips the router of a non-gated MoE such as this one (lora/model_manager.py)",
    ),
    "fc1_latent_proj": ("latent MoE", "ReplicatedLinear", "served when moe_latent_size is set"),
    "fc2_latent_proj": ("latent MoE", "ReplicatedLinear", "served when moe_latent_size is set"),
    "embed_tokens": ("embedding", "VocabParallelEmbedding", "served (embedding_modules)"),
    "lm_head": ("output head", "ParallelLMHead", "served (embedding_modules)"),
}

#: Modules named but never applied (see :data:`NEMOTRON_H_TARGETS`): refused by the check.
NEVER_APPLIED = ("conv1d", "gate")

#: ``--max-lora-rank`` values vLLM 0.32.0 accepts (``vllm/config/lora.py`` ``MaxLoRARanks``).
MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)

_BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
_BLOCK_NAMES = {"linear_attention": "mamba", "mamba": "mamba", "full_attention": "attention",
                "attention": "attention", "mlp": "mlp", "moe": "moe"}  # fmt: skip
_KEY = re.compile(r"(?:^|\.)(?:model|backbone)\.layers\.(\d+)\.mixer\.(.+)\.lora_([AB])\.weight$")


@dataclass(frozen=True)
class AdapterReport:
    """What :func:`check_adapter` read: ``name``, ``rank`` (largest of ``r`` and
    ``rank_pattern``), ``target_modules``, ``base`` (``base_model_name_or_path``), ``tensors``,
    and whether the modules and shapes were checked against a base config."""

    name: str
    rank: int
    target_modules: tuple[str, ...]
    base: str
    tensors: int
    shapes_checked: bool = True

    def line(self) -> str:
        """One line: the adapter's rank, targets and tensor count; ``OK``, or what was not
        checked (no base config here: the modules and shapes)."""
        verdict = (
            "OK"
            if self.shapes_checked
            else ("config OK; modules and shapes not checked (no base config.json on this machine)")
        )
        return (
            f"{self.name}: rank {self.rank}, {self.tensors} tensors on "
            f"{', '.join(self.target_modules)} (trained on {self.base or 'an unnamed base'}): {verdict}"
        )


def _block_types(config: dict[str, Any]) -> list[str]:
    pattern = config.get("hybrid_override_pattern")
    if pattern:
        return [_BLOCKS.get(c, c) for c in pattern]
    return [_BLOCK_NAMES.get(b, b) for b in config.get("layers_block_type") or []]


def expected_shape(config: dict[str, Any], layer: int, module: str) -> tuple[int, int] | None:
    """``(in_features, out_features)`` of ``module`` (the name after ``mixer.``, e.g.
    ``q_proj``, ``shared_experts.up_proj``, ``experts.3.down_proj``) in layer ``layer`` of the
    Nemotron-H described by ``config`` (``config.json`` as a dict), or None for a module whose
    LoRA shape the check does not model (``conv1d``, ``gate``).

    Source: the layer definitions of vLLM 0.32.0 ``nemotron_h.py`` and ``mamba_mixer2.py``
    (Mamba ``in_proj`` out = 2 x d_inner + 2 x n_groups x ssm_state_size + mamba heads).
    """
    h = config["hidden_size"]
    kind = _block_types(config)[layer] if layer < len(_block_types(config)) else None
    leaf = module.rsplit(".", 1)[-1]
    if kind == "attention":
        hd = config.get("head_dim") or h // config["num_attention_heads"]
        q, kv = config["num_attention_heads"] * hd, config["num_key_value_heads"] * hd
        return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h)}.get(leaf)
    if kind == "mamba":
        heads = config["mamba_num_heads"]
        inner = heads * config["mamba_head_dim"]
        proj = 2 * inner + 2 * config["n_groups"] * config["ssm_state_size"] + heads
        return {"in_proj": (h, proj), "out_proj": (inner, h)}.get(leaf)
    if kind == "mlp":
        width = config["intermediate_size"]
    elif kind == "moe" and module.startswith("shared_experts."):
        width = config["moe_shared_expert_intermediate_size"] * (
            config.get("n_shared_experts") or 1
        )
    elif kind == "moe" and module.startswith("experts."):
        h = config.get("moe_latent_size") or h
        width = config["moe_intermediate_size"]
    else:
        return None
    return {"up_proj": (h, width), "down_proj": (width, h)}.get(leaf)


_KIND_MODULES = {
    "attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "mamba": ("in_proj", "out_proj", "conv1d"),
    "mlp": ("up_proj", "down_proj"),
    "moe": ("experts", "gate", "up_proj", "down_proj"),
}


def modules_of(config: dict[str, Any]) -> list[str]:
    """The module names vLLM 0.32.0 accepts in an adapter for the Nemotron-H of ``config``
    (``get_supported_lora_modules``: the Linear layers its blocks have, the latent MoE
    projections when ``moe_latent_size`` is set, ``embed_tokens`` and ``lm_head``)."""
    kinds = set(_block_types(config))
    names = [m for k, ms in _KIND_MODULES.items() if k in kinds for m in ms]
    if "moe" in kinds and config.get("moe_latent_size"):
        names += ["fc1_latent_proj", "fc2_latent_proj"]
    return sorted({*names, "embed_tokens", "lm_head"})


def _fail(name: str, what: str, fix: str) -> AdapterError:
    return AdapterError(f"adapter {name!r}: {what}; fix: {fix}.")


#: peft features vLLM 0.32.0 refuses at load (``vllm/lora/peft_helper.py``
#: ``PEFTHelper._validate_features`` and ``validate_legal``): adapter_config.json key ->
#: (is it set, vLLM's words, the fix). ``modules_to_save`` may hold only "classifier" / "score".
_INITS = ("gaussian", "eva", "orthogonal", "mica", "lora_ga")
UNSUPPORTED: dict[str, tuple[Any, str, str]] = {
    "use_dora": (bool, "vLLM does not yet support DoRA.",
                 "retrain with LoraConfig(use_dora=False), or merge the adapter into the base "
                 "(peft's merge_and_unload) and serve the merged model"),
    "modules_to_save": (lambda v: bool(v) and any(m not in ("classifier", "score") for m in v),
                        'vLLM only supports modules_to_save being either None or ["classifier", '
                        '"score"] for classification models.',
                        "retrain with modules_to_save=None (to adapt lm_head or embed_tokens, "
                        "put them in target_modules: vLLM serves a LoRA on both), or merge the "
                        "adapter into the base and serve the merged model"),
    "lora_bias": (bool, "vLLM does not support LoRA bias (lora_bias).",
                  "retrain with LoraConfig(lora_bias=False)"),
    "bias": (lambda v: v not in (None, "none"), "Adapter bias is not supported.",
             "retrain with LoraConfig(bias='none')"),
    "init_lora_weights": (lambda v: isinstance(v, str) and v.lower() not in _INITS,
                          "vLLM does not support init_lora_weights=...",
                          "convert it to a plain LoRA with peft's "
                          "path_initial_model_for_weight_conversion"),
    "alora_invocation_tokens": (bool, "vLLM does not support Activated LoRA (aLoRA).",
                                "retrain as a plain LoRA"),
    "layer_replication": (bool, "vLLM does not support layer_replication.",
                          "retrain without layer_replication"),
    "use_bdlora": (bool, "vLLM does not support block-diagonal LoRA (BD-LoRA).",
                   "retrain as a plain LoRA"),
    "use_qalora": (bool, "vLLM does not support QALoRA.", "retrain as a plain LoRA"),
}  # fmt: skip


def _base_config(base: str | Path | dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    if base is None or isinstance(base, dict):
        return base
    try:
        return json.loads((Path(base) / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise _fail(name, f"the base {str(base)!r} has no readable config.json on this machine "
                    f"({type(e).__name__}: {e})", "pass the base's local folder (the one holding "
                    "config.json), its config.json as a dict, or base=None to skip the module and "
                    "shape checks") from e  # fmt: skip


def _module_paths(config: dict[str, Any]) -> list[str]:
    """Every module path of the Nemotron-H of ``config`` an adapter's regex may match, under
    both of the names Hugging Face gives the layers (``model.layers.N.mixer.X``,
    ``backbone.layers.N.mixer.X``), plus the embedding and the head."""
    paths = ["model.embed_tokens", "backbone.embeddings", "lm_head"]
    for layer, kind in enumerate(_block_types(config)):
        for leaf in _KIND_MODULES.get(kind, ()):
            for root in ("model", "backbone"):
                paths.append(f"{root}.layers.{layer}.mixer.{leaf}")
    return paths


def _read_tensors(folder: Path, name: str) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape, from ``adapter_model.safetensors`` (its header only), else from
    ``adapter_model.bin`` / ``.pt`` (vLLM 0.32.0 ``lora_model.py`` loads the three)."""
    from safetensors import SafetensorError, safe_open

    st = folder / "adapter_model.safetensors"
    if st.is_file():
        try:
            with safe_open(st, framework="numpy") as f:
                return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
        except (OSError, SafetensorError) as e:
            raise _fail(name, f"adapter_model.safetensors in {folder} does not open ({e})",
                        "save the adapter again with peft's save_pretrained") from e  # fmt: skip
    for file in ("adapter_model.bin", "adapter_model.pt"):
        if (folder / file).is_file():
            import torch

            try:
                tensors = torch.load(folder / file, map_location="cpu", weights_only=True)
            except Exception as e:  # noqa: BLE001 - torch's unpickling errors have no one type
                raise _fail(name, f"{file} in {folder} does not load with torch.load("
                            f"weights_only=True), as vLLM 0.32.0 loads it ({e})",
                            "save the adapter again with peft's save_pretrained "
                            "(safe_serialization=True writes adapter_model.safetensors)") from e  # fmt: skip
            return {k: tuple(v.shape) for k, v in tensors.items()}
    raise _fail(name, f"{folder} holds no adapter_model.safetensors (nor .bin / .pt): vLLM 0.32.0 "
                "refuses it ('... doesn't contain tensors')",
                "save the adapter with peft's save_pretrained into that folder")  # fmt: skip


def _check_config(cfg: dict[str, Any], name: str, max_lora_rank: int | None) -> int:
    """The adapter_config.json checks vLLM 0.32.0 makes at load; returns the largest rank."""
    peft_type = str(cfg.get("peft_type", "LORA")).upper()
    missing = sorted({"r", "lora_alpha", "target_modules"} - set(cfg))
    if peft_type != "LORA" or missing:
        raise _fail(name, f"peft_type {cfg.get('peft_type')!r} is not LoRA: vLLM serves LoRA "
                    "adapters only (vllm/lora/peft_helper.py reads r, lora_alpha and "
                    "target_modules; without them it refuses the load: 'Missing required "
                    f"configuration fields: {set(missing) or '...'}')",
                    "retrain it as a LoRA (peft's LoraConfig), or merge it into the base "
                    "(peft's merge_and_unload) and serve the merged model")  # fmt: skip
    said = [(key, words, fix) for key, (bad, words, fix) in UNSUPPORTED.items()
            if cfg.get(key) is not None and bad(cfg[key])]  # fmt: skip
    if said:
        raise _fail(name, "; ".join(f"{key}={cfg[key]!r}: vLLM 0.32.0 refuses it ('{words}', "
                                    "vllm/lora/peft_helper.py)" for key, words, _ in said),
                    "; ".join(fix for _, _, fix in said))  # fmt: skip
    ranks = [cfg["r"], *(cfg.get("rank_pattern") or {}).values()]
    if any(not isinstance(r, int) or isinstance(r, bool) or r <= 0 for r in ranks):
        raise _fail(name, f"r {cfg['r']!r} / rank_pattern {cfg.get('rank_pattern')!r}: vLLM "
                    "0.32.0 needs each a positive whole number ('LoRA rank `r` must be a "
                    "positive integer')", "save the adapter again with peft's save_pretrained")  # fmt: skip
    rank = max(ranks)
    if max_lora_rank is not None and rank > max_lora_rank:
        bigger = next((r for r in MAX_LORA_RANKS if r >= rank), None)
        serve = (f'serve with a larger --max-lora-rank: extra_args={{"--max-lora-rank": {bigger}}} '
                 "(the notebook's parameter, or lab.adapters.spec.lora_config(cfg, extra_args="
                 "...)), or " if bigger else "")  # fmt: skip
        raise _fail(name, f"rank {rank} is above the server's --max-lora-rank {max_lora_rank} "
                    f"(vLLM 0.32.0 refuses it: 'LoRA rank {rank} is greater than max_lora_rank "
                    f"{max_lora_rank}.')", f"{serve}retrain with r <= {max_lora_rank}")  # fmt: skip
    return rank


def _module_rank(cfg: dict[str, Any], module: str) -> int:
    """The rank peft gives ``module`` (a path without ``base_model.model.``): the first
    ``rank_pattern`` key matching its end, else ``r`` (vLLM 0.32.0 ``PEFTHelper._match_pattern``)."""
    for key, rank in (cfg.get("rank_pattern") or {}).items():
        if re.match(rf"(.*\.)?({key})$", module):
            return int(rank)
    return int(cfg["r"])


def servable_modules(config: dict[str, Any]) -> list[str]:
    """The module names an adapter of the Nemotron-H of ``config`` may target and vLLM 0.32.0
    applies: :func:`modules_of` minus :data:`NEVER_APPLIED`, sorted."""
    return sorted(set(modules_of(config)) - set(NEVER_APPLIED))


def _refuse_module(name: str, module: str, what: str, servable: list[str]) -> None:
    """Raise for ``module`` (``what`` names where it was found: ``target module 'x'``) when it
    is accepted by name but never applied, or not a module vLLM can adapt here."""
    if module in NEVER_APPLIED:
        raise _fail(name, f"{what}: {NEMOTRON_H_TARGETS[module][2]}",
                    f"retrain without it (target_modules from {servable})")  # fmt: skip
    if module not in servable:
        raise _fail(name, f"{what} is not a module vLLM 0.32.0 can adapt in this Nemotron-H (it "
                    "refuses the load: 'expected target modules in {...} but received [...]')",
                    f"retrain with target_modules from {servable}")  # fmt: skip


def _check_targets(cfg: dict[str, Any], name: str, base_cfg: dict[str, Any]) -> None:
    """``target_modules`` as peft saved it: a list of names, ``"all-linear"``, or a regex that
    peft matched in full against module paths (``re.fullmatch``). vLLM 0.32.0 reads the tensors'
    names, not this field (``lora_model.py`` ``check_unexpected_modules``); a list naming a
    module vLLM cannot adapt, or a regex matching nothing in this base, is still refused here."""
    servable = servable_modules(base_cfg)
    targets = cfg.get("target_modules") or []
    if isinstance(targets, str):
        if targets == "all-linear":
            return
        try:
            hits = [p for p in _module_paths(base_cfg) if re.fullmatch(targets, p)]
        except re.error as e:
            raise _fail(name, f"target_modules {targets!r} is not a regular expression ({e})",
                        f"retrain with target_modules a list from {servable}") from e  # fmt: skip
        if not hits:
            raise _fail(name, f"target_modules {targets!r} (a regular expression, matched in "
                        "full as peft does) matches no module of this base, e.g. "
                        f"{_module_paths(base_cfg)[3]!r}: it was trained on another model",
                        f"retrain on this base, with target_modules from {servable}")  # fmt: skip
        return
    for module in sorted(set(targets)):
        _refuse_module(name, module, f"target module {module!r}", servable)


def _tensor_module(key: str) -> str:
    """The module of a LoRA tensor's key, after ``mixer.``: ``q_proj``, ``up_proj`` (of
    ``shared_experts.up_proj`` too), ``experts``."""
    path = key.split(".lora_")[0].rsplit("mixer.", 1)[-1]
    return "experts" if path.startswith("experts.") else path.rsplit(".", 1)[-1]


def _check_deployed(name: str, modules: set[str], wanted: Any, base_cfg: dict | None) -> None:
    """Refuse ``--lora-target-modules`` (``wanted``) naming a module this base lacks, or
    leaving none of the adapter's ``modules`` adapted (vLLM 0.32.0 ``is_in_target_modules``:
    a runtime module passes by its suffix; the packed ``qkv_proj`` passes when it or one of
    ``q_proj`` / ``k_proj`` / ``v_proj`` is named)."""
    wanted = {wanted} if isinstance(wanted, str) else set(wanted)
    known = set(servable_modules(base_cfg)) | {"qkv_proj"} if base_cfg is not None else None
    if known is not None and wanted - known:
        raise _fail(name, f"--lora-target-modules names {sorted(wanted - known)}, which this "
                    "Nemotron-H has no module of (vLLM matches module suffixes)",
                    f"name modules from {sorted(known)}, or drop the flag")  # fmt: skip
    qkv = {"q_proj", "k_proj", "v_proj"}
    kept = {m for m in modules if m in wanted or (m in qkv and wanted & (qkv | {"qkv_proj"}))}
    if modules and not kept:
        raise _fail(name, f"its modules {sorted(modules)} are all outside --lora-target-modules "
                    f"{sorted(wanted)}: vLLM loads it and applies none of it, so it changes "
                    "nothing", "add its modules to --lora-target-modules, or drop the flag")  # fmt: skip


def check_adapter(
    folder: str | Path,
    base: str | Path | dict[str, Any] | None,
    *,
    max_lora_rank: int | None = None,
    name: str | None = None,
    base_name: str | None = None,
    lora_target_modules: Any = None,
) -> AdapterReport:
    """Check a peft LoRA folder against the base model and the server's ``--max-lora-rank``
    before it is served (``--lora-modules``) or loaded (``/v1/load_lora_adapter``).

    Checks, in order, what vLLM 0.32.0 checks at load (``vllm/lora/peft_helper.py``,
    ``vllm/lora/lora_model.py``) and what it does not: ``adapter_config.json`` is there and
    readable; it is a LoRA (``peft_type``; ``r``, ``lora_alpha``, ``target_modules``); no peft
    feature vLLM refuses (:data:`UNSUPPORTED`: DoRA, ``modules_to_save`` other than a
    classifier's, bias, ...); ``r`` (and ``rank_pattern``) <= ``max_lora_rank``; then, with a
    base: ``target_modules`` (a list, ``"all-linear"`` or a regex) names modules this base has;
    the tensors (``adapter_model.safetensors``, its header only, or ``.bin`` / ``.pt``) are on
    modules vLLM applies to Nemotron-H (:data:`NEMOTRON_H_TARGETS` minus
    :data:`NEVER_APPLIED`); each ``lora_A`` is ``(rank, in_features)`` and each ``lora_B``
    ``(out_features, rank)``, with ``rank`` the config's for that module (``r`` or
    ``rank_pattern``) and the widths the base's (:func:`expected_shape`).

    Args:
        folder: the adapter folder.
        base: the base's folder (its ``config.json``), that config as a dict, or None: the
            module and shape checks are skipped (the report says so), e.g. for an attached
            server whose base is a Hugging Face id or a path on another machine.
        max_lora_rank: the server's ``--max-lora-rank`` (None: not checked).
        name: the name it is served under (default: the folder's name).
        base_name: the base's ``--served-model-name``: an adapter of that name is refused
            (vLLM 0.32.0: "conflicts with a served base model",
            ``entrypoints/openai/models/serving.py``; under ``--lora-modules`` the start fails).
        lora_target_modules: the server's ``--lora-target-modules`` (module suffixes, a list or
            one name; None: every module): each must be a module of this base, and the
            adapter must have one inside it, else vLLM loads it and applies none of it
            (``lora/utils.py`` ``is_in_target_modules``, ``q_proj`` / ``k_proj`` / ``v_proj``
            packed as ``qkv_proj``).
    Returns:
        An :class:`AdapterReport`.
    Raises:
        AdapterError: the first problem, with what vLLM 0.32.0 would do and the fix; a ``base``
            path without a readable ``config.json``.
    """
    folder = Path(folder)
    name = name or folder.name
    if base_name is not None and name == base_name:
        raise _fail(name, "the name is the base model's served name: vLLM 0.32.0 refuses it ('The "
                    "lora adapter ... conflicts with a served base model'; under --lora-modules "
                    "the server stops at start-up)", "serve the adapter under another name")  # fmt: skip
    try:
        cfg = json.loads((folder / "adapter_config.json").read_text())
    except (OSError, ValueError) as e:
        where = (
            ""
            if folder.is_absolute()
            else f" (a relative path, read from {Path.cwd()}: a notebook's is notebooks/)"
        )
        raise _fail(name, f"no readable adapter_config.json in {folder}{where} ({e})",
                    "point at the folder peft's save_pretrained wrote, best by its absolute path") from e  # fmt: skip
    base_cfg = _base_config(base, name)
    rank = _check_config(cfg, name, max_lora_rank)
    targets = cfg.get("target_modules")
    targets = (targets,) if isinstance(targets, str) else tuple(targets or ())
    shapes = _read_tensors(folder, name)
    report = AdapterReport(name, rank, targets, str(cfg.get("base_model_name_or_path") or ""),
                           len(shapes), shapes_checked=base_cfg is not None)  # fmt: skip
    modules = {_tensor_module(key) for key in shapes}
    if lora_target_modules is not None:
        _check_deployed(name, modules, lora_target_modules, base_cfg)
    if base_cfg is None:
        return report
    _check_targets(cfg, name, base_cfg)
    servable = servable_modules(base_cfg)
    for key in sorted(shapes):
        module = _tensor_module(key)
        _refuse_module(name, module, f"tensor {key}'s module {module!r}", servable)
    for key, shape in sorted(shapes.items()):
        m = _KEY.search(key)
        if not m:
            continue
        module_path = key.split(".lora_")[0].removeprefix("base_model.model.")
        r = _module_rank(cfg, module_path)
        got = shape[0] if m.group(3) == "A" else shape[-1]
        other = shapes.get(
            key.replace(f"lora_{m.group(3)}", "lora_B" if m.group(3) == "A" else "lora_A")
        )
        if other is not None and m.group(3) == "A" and other[-1] != got:
            raise _fail(name, f"{key} has rank {got} but its lora_B has rank {other[-1]}: the "
                        "pair does not multiply (vLLM 0.32.0 loads it without a word and the "
                        "layer's LoRA is garbage)", "save the adapter again with peft's "
                        "save_pretrained from the trained model")  # fmt: skip
        if got != r:
            raise _fail(name, f"{key} has rank {got} but adapter_config.json says r {r} for "
                        f"this module: vLLM 0.32.0 sizes the LoRA by the config (a larger tensor "
                        "fails: 'The size of tensor a ... must match'; a smaller one loads with "
                        "the wrong scaling alpha / r)", "save the adapter again with peft's "
                        "save_pretrained, or set r (rank_pattern) to the tensors' rank")  # fmt: skip
        want = expected_shape(base_cfg, int(m.group(1)), m.group(2))
        if want is None:
            continue
        expect = (r, want[0]) if m.group(3) == "A" else (want[1], r)
        if tuple(shape) != expect:
            raise _fail(name, f"{key} is {tuple(shape)}, this base's layer {m.group(1)} needs "
                        f"{expect}: the adapter was trained for another base "
                        f"({cfg.get('base_model_name_or_path') or 'unnamed'}); vLLM 0.32.0 loads "
                        "a narrower one without a word and answers nonsense, and refuses a wider "
                        "one ('The size of tensor a ... must match')",
                        "train the adapter on this base model (or serve the base it was trained on)")  # fmt: skip
    return report


@dataclass(frozen=True)
class LoraBuffers:
    """The GPU memory a vLLM 0.32.0 server with ``--enable-lora`` sets aside for adapter slots,
    whatever adapters it loads: ``bytes_by_part`` (bytes per part of the model), for
    ``max_loras`` slots of rank ``max_lora_rank`` in the model's dtype (``dtype_bytes``), at
    tensor parallel 1. It is taken before vLLM sizes the KV cache, so the KV cache shrinks by it."""

    max_loras: int
    max_lora_rank: int
    dtype_bytes: int
    bytes_by_part: dict[str, int]

    @property
    def gib(self) -> float:
        """The total, GiB."""
        return sum(self.bytes_by_part.values()) / 2**30

    def line(self) -> str:
        """``LoRA slots (--max-loras 4 --max-lora-rank 32): 6.71 GiB of memory set aside at
        start-up, before the KV cache (routed experts 6.38 GiB, ...)``."""

        def size(n: float) -> str:
            return f"{n / 2**30:.2f} GiB" if n >= 2**30 / 10 else f"{n / 2**20:.1f} MiB"

        parts = ", ".join(f"{k} {size(v)}" for k, v in
                          sorted(self.bytes_by_part.items(), key=lambda kv: -kv[1]) if v)  # fmt: skip
        return (f"LoRA slots (--max-loras {self.max_loras} --max-lora-rank {self.max_lora_rank}): "
                f"{size(self.gib * 2**30)} of memory set aside at start-up, before the KV cache ({parts})")  # fmt: skip


#: ``--moe-backend`` values that serve this NVFP4 checkpoint's experts with LoRA on, in vLLM
#: 0.32.0-0.34.0. With ``--enable-lora`` every MoE layer is built with ``is_lora_enabled``
#: (``model_executor/layers/fused_moe/layer.py``), kernel selection drops a kernel whose experts
#: lack ``LoRAExpertsMixin`` (``modular_kernel.py`` ``is_supported_config``: "LoRA"), and an
#: explicit one is refused at start ("NvFp4 MoE backend 'HUMMING' does not support the deployment
#: configuration since kernel does not support LoRA", ``oracle/nvfp4.py``). Of the NVFP4
#: kernels only Marlin's ``MarlinExperts`` has the mixin, and auto (None) picks it; BF16 needs
#: nothing (``oracle/unquantized.py`` picks Triton or TRT-LLM's LoRA experts itself).
NVFP4_LORA_BACKENDS = (None, "auto", "marlin")


def moe_lora_flags(args: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The flags a LoRA server of this MoE model needs beside ``args`` (the command's flags,
    ``{flag: value}``) so that it starts, and why: ``--moe-backend marlin`` when the command
    serves the NVFP4 checkpoint (``--quantization modelopt_fp4``) with a MoE kernel outside
    :data:`NVFP4_LORA_BACKENDS` (the Hopper recipe's Humming); nothing otherwise.

    Returns:
        ``(flags, reason)``; ``({}, None)`` when nothing is needed.
    """
    backend = args.get("--moe-backend")
    if args.get("--quantization") != "modelopt_fp4" or backend in NVFP4_LORA_BACKENDS:
        return {}, None
    return {"--moe-backend": "marlin"}, (
        f"with --enable-lora, vLLM 0.32.0-0.34.0 serve this NVFP4 checkpoint's experts only with "
        f"a MoE kernel that takes LoRA, and --moe-backend {backend} does not (the start would stop: "
        f"\"NvFp4 MoE backend '{str(backend).upper()}' does not support the deployment configuration "
        'since kernel does not support LoRA"), so the MoE kernel is Marlin (the same weights; '
        "the tuning step times both kernels: docs/results/h200/tune/)"
    )


def lora_buffers(
    config: dict[str, Any] | str | Path,
    max_loras: int,
    max_lora_rank: int,
    *,
    dtype_bytes: int = 2,
    target_modules: list[str] | tuple[str, ...] | None = None,
) -> LoraBuffers:
    """What vLLM 0.32.0 allocates for LoRA in the Nemotron-H of ``config`` (``config.json`` as a
    dict), per GPU at tensor parallel 1: every module it can adapt gets ``max_loras`` zeroed
    slots of rank ``max_lora_rank`` at start-up, used or not (``LoRAConfig.target_modules``
    unset, the default).

    Read in vLLM 0.32.0: ``lora/layers/base_linear.py`` and ``column_parallel_linear.py``
    (``lora_a`` ``(slots, 1, rank, in)`` per output slice, ``lora_b`` ``(slots, 1, out, rank)``;
    the fused ``qkv_proj`` has 3 slices, the Mamba ``in_proj`` 5), ``lora/layers/fused_moe.py``
    (``FusedMoEWithLoRA``, one w13 slice for a non-gated MoE: ``(slots, experts, rank, hidden)``
    and ``(slots, experts, intermediate, rank)`` for w13, the same transposed for w2),
    ``vocab_parallel_embedding.py`` and ``logits_processor.py`` (``embed_tokens``, ``lm_head``);
    ``lora/model_manager.py`` skips the non-gated router and the ``mtp.`` layers; the dtype is the
    model's (``LoRAConfig.lora_dtype`` "auto": BF16 for this model, 2 bytes). Not counted: the
    punica wrapper's index buffers (a few MiB) and ``--max-cpu-loras`` (host memory). Checked
    on one H100 (``docs/results/h100/lora-2026-12-06/``, vLLM's own "Model loading took"):
    1.73 GiB at 4 x rank 8 against 1.68 here, 6.74 at 4 x rank 32 against 6.71.

    Args:
        config: the base's ``config.json`` as a dict, or the folder holding it.
        max_loras, max_lora_rank: ``--max-loras`` (slots), ``--max-lora-rank`` (tokens of rank).
        dtype_bytes: bytes per LoRA weight (2: BF16 / FP16).
        target_modules: ``--lora-target-modules`` (module suffixes; None: every module): a
            part none of whose modules it names gets no slots; one it names in part counts
            whole (an upper bound).

    Returns:
        A :class:`LoraBuffers`.

    Raises:
        AdapterError: a folder without a readable ``config.json`` (names what to pass).
    """
    config = _base_config(config, "lora_buffers")
    h, r = int(config["hidden_size"]), int(max_lora_rank)
    kinds = _block_types(config)
    count = {k: kinds.count(k) for k in ("attention", "mamba", "mlp", "moe")}

    def linear(shape: tuple[int, int] | None, slices: int = 1) -> int:  # a + b elements, one slot
        return 0 if shape is None else r * (slices * shape[0] + shape[1])

    def first(kind: str) -> int:
        return kinds.index(kind) if kind in kinds else 0

    at, mb, ml, me = first("attention"), first("mamba"), first("mlp"), first("moe")
    q, k = expected_shape(config, at, "q_proj"), expected_shape(config, at, "k_proj")
    parts = {
        "attention": count["attention"]
        * (
            (r * (3 * h + q[1] + 2 * k[1]) if q else 0)
            + linear(expected_shape(config, at, "o_proj"))
        ),
        "Mamba": count["mamba"]
        * (
            linear(expected_shape(config, mb, "in_proj"), slices=5)
            + linear(expected_shape(config, mb, "out_proj"))
        ),
        "MLP": count["mlp"]
        * (
            linear(expected_shape(config, ml, "up_proj"))
            + linear(expected_shape(config, ml, "down_proj"))
        ),  # fmt: skip
        "shared experts": count["moe"]
        * (
            linear(expected_shape(config, me, "shared_experts.up_proj"))
            + linear(expected_shape(config, me, "shared_experts.down_proj"))
        ),
        "routed experts": count["moe"]
        * int(config.get("n_routed_experts") or 0)
        * 2
        * r
        * (sum(expected_shape(config, me, "experts.0.up_proj") or (0, 0))),
        "embed_tokens and lm_head": 2 * r * (int(config["vocab_size"]) + h),
    }
    if target_modules is not None:  # the parts whose module suffixes the list names
        named = set(target_modules) | (
            {"qkv_proj"} if {"q_proj", "k_proj", "v_proj"} & set(target_modules) else set()
        )
        suffixes = {"attention": {"qkv_proj", "o_proj"}, "Mamba": {"in_proj", "out_proj"},
                    "MLP": {"up_proj", "down_proj"}, "shared experts": {"up_proj", "down_proj"},
                    "routed experts": {"experts"}, "embed_tokens and lm_head": {"embed_tokens", "lm_head"}}  # fmt: skip
        parts = {k: v if suffixes[k] & named else 0 for k, v in parts.items()}
    scale = int(max_loras) * int(dtype_bytes)
    return LoraBuffers(
        int(max_loras), r, int(dtype_bytes), {k: v * scale for k, v in parts.items()}
    )
