"""Flag checks before launch: numbers vLLM would refuse, and vLLM's own ``vllm serve`` parser.

:data:`VALUE_BOUNDS` and :func:`derived_max_model_len` are pure; :func:`validate_argv` and
:func:`speculative_methods` import the installed vLLM.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from helpers.config.versions import installed_vllm_version
from helpers.errors import FlagError

# --------------------------------------------------------------------------------------
# Numbers vLLM would refuse at start-up
# --------------------------------------------------------------------------------------

#: ``flag: (lowest, highest, words)`` from the field constraints of vLLM 0.32.0's config
#: classes: ``ModelConfig.max_model_len`` Field(ge=-1), -1 = auto-fit (config/model.py);
#: ``SchedulerConfig.max_num_seqs`` / ``max_num_batched_tokens`` Field(ge=1)
#: (config/scheduler.py); ``CacheConfig.gpu_memory_utilization`` Field(gt=0, le=1)
#: (config/cache.py); ``ParallelConfig.tensor_parallel_size`` / ``data_parallel_size``
#: Field(ge=1) (config/parallel.py).
VALUE_BOUNDS: dict[str, tuple[float | None, float | None, str]] = {
    "--max-model-len": (1, None, "a positive number of tokens, or -1 / auto (fit to memory)"),
    "--max-num-seqs": (1, None, "at least 1 (sequences in one batch)"),
    "--max-num-batched-tokens": (1, None, "at least 1 (tokens per scheduler step)"),
    "--gpu-memory-utilization": (1e-9, 1.0, "a fraction above 0 and at most 1"),
    "--tensor-parallel-size": (1, None, "at least 1 (GPUs)"),
    "--data-parallel-size": (1, None, "at least 1 (replicas)"),
}
#: vLLM's suffixes: lowercase decimal, uppercase binary (``human_readable_int``).
_SUFFIX = {u: 1000 ** (i + 1) for i, u in enumerate("kmgt")}
_SUFFIX.update({u: 1024 ** (i + 1) for i, u in enumerate("KMGT")})


def _number(value: Any) -> float | None:
    """A flag value as a number, reading vLLM's human-readable ints ("32k", "1K",
    vllm/utils/argparse_utils.py human_readable_int); None when it is not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    text = str(value).strip()
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?)([kKmMgGtT])?", text)
    if not m:
        return None
    number = float(m.group(1)) * _SUFFIX.get(m.group(2) or "", 1)
    return int(number) if number.is_integer() else number


def derived_max_model_len(model: str | Path | None) -> tuple[int, str] | None:
    """The longest ``--max-model-len`` vLLM accepts for a local checkpoint, and its source.

    Follows vLLM 0.32.0 (transformers_utils/model_arch_config_convertor.py
    ``derive_max_model_len_and_key``; config/model.py ``_get_and_verify_max_len``): the smallest
    of ``keys`` below in ``config.json`` (``model_max_length`` wins when set), capped by
    ``tokenizer_config.json``'s ``model_max_length``.

    Returns:
        ``(tokens, "key in <folder>/config.json")``, or None when the model is not a local
        folder, its config cannot be read, or RoPE scaling changes the maximum (then vLLM's
        own check at start-up is the judge).
    """
    if not model:
        return None
    folder = Path(model).expanduser()
    try:
        cfg = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    cfg = cfg.get("text_config") or cfg if isinstance(cfg, dict) else {}
    if cfg.get("rope_scaling") or cfg.get("rope_parameters"):
        rope = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
        if isinstance(rope, dict) and rope.get("factor") not in (None, 1, 1.0):
            return None
    keys = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
            "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")  # fmt: skip
    found = [
        (cfg[k], k)
        for k in keys
        if isinstance(cfg.get(k), (int, float)) and not isinstance(cfg.get(k), bool)
    ]
    if not found:
        return None
    best, key = min(found)
    if isinstance(cfg.get("model_max_length"), (int, float)):
        best, key = cfg["model_max_length"], "model_max_length"
    where = f"{key} in {folder / 'config.json'}"
    try:
        tok = json.loads((folder / "tokenizer_config.json").read_text()).get("model_max_length")
    except (OSError, ValueError, AttributeError):
        tok = None
    if isinstance(tok, (int, float)) and tok < best:
        best, where = tok, f"model_max_length in {folder / 'tokenizer_config.json'}"
    return int(best), where


# --------------------------------------------------------------------------------------
# Validation with vLLM's own parser
# --------------------------------------------------------------------------------------


class _ParseFailure(Exception):
    pass


#: Where ``make_arg_parser`` (the ``vllm serve`` parser) lives, newest release first, each
#: read in that release's wheel (``vllm/entrypoints/cli/serve.py`` imports it from there):
#: ``vllm/entrypoints/common/cli_args.py`` in 0.33.0-0.34.0, ``.../launchers/cli_args.py``
#: in 0.32.0, ``vllm/entrypoints/openai/cli_args.py`` in 0.28.0 and older.
SERVE_PARSER_MODULES = (
    "vllm.entrypoints.common.cli_args",
    "vllm.entrypoints.launchers.cli_args",
    "vllm.entrypoints.openai.cli_args",
)


def serve_parser_factory():
    """The installed vLLM's ``make_arg_parser``, from the first of :data:`SERVE_PARSER_MODULES`
    that has it.

    Raises:
        FlagError: vLLM is not installed, or none of those modules defines it (a release
            that moved it again: the message names the modules tried and the drift check).
    """
    import importlib

    tried = []
    for name in SERVE_PARSER_MODULES:
        try:
            return importlib.import_module(name).make_arg_parser
        except ModuleNotFoundError as exc:
            if exc.name == "vllm":
                raise FlagError(
                    "vLLM is not installed, so flags cannot be checked: install it (see "
                    "helpers.machine.install)."
                ) from exc
            tried.append(name)
        except AttributeError:
            tried.append(name)
    raise FlagError(
        f"The installed vLLM {installed_vllm_version()} has no `vllm serve` parser where this "
        f"cookbook looks ({', '.join(tried)}): it is newer than the cookbook knows. Install an "
        "offered release (helpers.machine.install), or run `python -m tools.drift VERSION` in "
        "the cookbook's checkout to see what moved."
    )


@functools.lru_cache(maxsize=1)
def _serve_parser():
    make_arg_parser = serve_parser_factory()  # FlagError when vLLM is not installed
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError as exc:  # a release that moved it: a FlagError still, naming the check
        raise FlagError(
            f"The installed vLLM {installed_vllm_version()} has no FlexibleArgumentParser in "
            "vllm.utils.argparse_utils: run `python -m tools.drift VERSION` to see what moved."
        ) from exc

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))

    def _error(message):
        raise _ParseFailure(message)

    parser.error = _error
    return parser


def _close_flag(name: str, known: Iterable[str]) -> str | None:
    """The release's flag closest to a rejected ``name`` (difflib), e.g. --max-model-len."""
    close = difflib.get_close_matches(
        name, sorted(k for k in known if k.startswith("--")), n=1, cutoff=0.75
    )
    return close[0] if close else None


def validate_argv(
    argv: list[str], *, target_version: str | None = None, extra_flags: Iterable[str] = ()
) -> None:
    """Parse ``[MODEL, *flags]`` with the installed ``vllm serve`` parser, and check
    ``--speculative-config`` keys against ``SpeculativeConfig`` and its ``method`` against
    :func:`speculative_methods`.

    Raises:
        FlagError: ``.flags`` the rejected flag names; the message gives the installed vLLM and
            ``target_version`` (a flag newer than the install is then clear).
    """
    parser = _serve_parser()
    import argparse

    known = {s for a in parser._actions for s in a.option_strings}
    rejected: list[str] = []
    reasons: list[str] = []
    for item in argv:
        if item.startswith("--"):
            name = item.split("=", 1)[0]
            base = name.split(".", 1)[0]
            if base not in known and base.replace("_", "-") not in known:
                rejected.append(name)
    if not rejected:
        try:
            ns, unknown = parser.parse_known_args(argv, namespace=argparse.Namespace())
        except _ParseFailure as exc:
            msg = str(exc)
            reasons.append(msg)
            named = re.search(r"argument (--[\w.-]+)", msg) or re.search(r"(--[\w.-]+)", msg)
            rejected.append(named.group(1) if named else msg)
        else:
            rejected += [u for u in unknown if u.startswith("-")]
            spec = getattr(ns, "speculative_config", None)
            if spec:
                bad = _unknown_spec_keys(spec)
                if bad:
                    rejected.append("--speculative-config")
                    reasons.append(f"unknown speculative-config keys: {', '.join(bad)}")
                method = spec.get("method") if isinstance(spec, Mapping) else None
                valid_methods = speculative_methods()
                if method is not None and valid_methods and method not in valid_methods:
                    rejected.append("--speculative-config")
                    reasons.append(
                        f"unknown speculative-config method {method!r}; "
                        f"valid methods: {', '.join(valid_methods)}"
                    )
    if rejected:
        installed = installed_vllm_version()
        names = list(dict.fromkeys(rejected))
        extra = set(extra_flags)
        described = []
        for name in names:
            origin = "from extra_args" if name in extra else "from cookbook/recipe.yaml"
            close = _close_flag(name, known) if name not in known else None
            described.append(f"{name} ({origin}{f'; did you mean {close}?' if close else ''})")
        detail = f" ({'; '.join(reasons)})" if reasons else ""
        where = (
            "the extra_args you passed"
            if all(n in extra for n in names)
            else "cookbook/recipe.yaml"
            if not any(n in extra for n in names)
            else "extra_args / cookbook/recipe.yaml"
        )
        fix = f"fix the flag's spelling in {where}"
        if target_version and installed and str(target_version) != str(installed):
            fix += (
                f", or install the target's vLLM {target_version} (helpers.machine.install), which may "
                "know the flag"
            )
        raise FlagError(
            f"vLLM {installed} rejects {', '.join(described)}{detail}: {fix}.",
            flags=names,
        )


def _unknown_spec_keys(spec: Any) -> list[str]:
    if not isinstance(spec, Mapping):
        return []
    try:
        from vllm.config import SpeculativeConfig
    except ImportError:  # pragma: no cover
        return []
    fields = getattr(SpeculativeConfig, "__dataclass_fields__", None) or getattr(
        SpeculativeConfig, "model_fields", {}
    )
    return [k for k in spec if k not in fields]


def _literal_strings(annotation: Any):
    """The string values of a ``Literal`` annotation, looking through ``Optional``/``Union``
    and nested ``Literal``s."""
    import typing

    for arg in typing.get_args(annotation):
        if isinstance(arg, str):
            yield arg
        else:
            yield from _literal_strings(arg)


@functools.lru_cache(maxsize=1)
def speculative_methods() -> tuple[str, ...]:
    """The ``method`` names the installed vLLM's ``SpeculativeConfig`` accepts, in its order.

    Read from the annotation of ``SpeculativeConfig.method`` (the ``SpeculativeMethod``
    Literal in ``vllm/config/speculative.py``), so the list follows the installed vLLM.

    Returns:
        The names, or an empty tuple when vLLM is not installed or the annotation is not a
        Literal (then methods are not checked).
    """
    import typing

    try:
        from vllm.config import SpeculativeConfig
    except ImportError:  # pragma: no cover
        return ()
    try:
        annotation = typing.get_type_hints(SpeculativeConfig)["method"]
    except Exception:  # pragma: no cover - unresolvable forward references
        field = (getattr(SpeculativeConfig, "__dataclass_fields__", None) or {}).get("method")
        annotation = getattr(field, "type", None)
    return tuple(dict.fromkeys(_literal_strings(annotation)))
