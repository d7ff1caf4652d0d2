"""How a known start-up failure is declared and what it says: :class:`Diagnosis`, and
:func:`failure` / :func:`fixed_failure`, which declare each kind once, above its builder (in
:mod:`helpers.server.failures_engine`, :mod:`helpers.server.failures_setup`), with its place
in the try-order and its log wording; then the helpers the builders share.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.server import vllm_log


@dataclass(frozen=True)
class Diagnosis:
    """A known failure found in a server log.

    Attributes:
        name: catalogue key, e.g. ``"mamba_cache_blocks"``.
        cause: what went wrong, in the log's own numbers.
        fix: what to change, naming the flag / command / variable.
        evidence: the log line that matched (for the reader who wants to check).
        level: ``"error"`` (failed) or ``"warning"`` (runs, but wrong or wasted).
        checked_releases: the releases whose source the wording was read in.
    """

    name: str
    cause: str
    fix: str
    evidence: str = ""
    level: str = "error"
    checked_releases: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        """One sentence: the cause, then the fix."""
        return f"{self.cause}: {self.fix}."

    def __str__(self) -> str:
        return self.message

    @property
    def checked(self) -> str:
        """Where the wording was checked, e.g. ``"wording checked in vllm 0.26.0, 0.28.0"``."""
        return (
            "wording checked in " + ", ".join(self.checked_releases)
            if self.checked_releases
            else ""
        )

    def report(self) -> str:
        """The sentence, the matched log line and the releases checked, one per line."""
        lines = [f"{self.level.upper()}: {self.message}"]
        if self.evidence:
            lines.append(f"  log: {self.evidence}")
        if self.checked_releases:
            lines.append(f"  {self.checked}")
        return "\n".join(lines)


#: ``build(match, log_text, config) -> Diagnosis | None``: the sentence of one known failure.
Builder = Callable[["re.Match[str]", str, Any], "Diagnosis | None"]


@dataclass(frozen=True)
class FailureKind:
    """One known start-up failure, as :func:`failure` declares it: the :attr:`Diagnosis.name`
    it produces, its ``order`` among the kinds (lower first: specific before broad, e.g. the
    Mamba cache-block check before the generic out-of-memory one), its log ``wording`` and its
    :data:`Builder` (None from it: the match does not count, the next pattern is tried)."""

    name: str
    order: int
    wording: vllm_log.Wording
    build: Builder

    @property
    def checked_releases(self) -> tuple[str, ...]:
        """Releases whose source was read for the wording (a test keeps every kind filled)."""
        return self.wording.checked


#: Every declared kind by name (:func:`failure` adds them; :mod:`helpers.server.diagnose`
#: tries them by ``order``).
KINDS: dict[str, FailureKind] = {}


def failure(name: str, order: int, wording: vllm_log.Wording) -> Callable[[Builder], Builder]:
    """Declare the builder below as the known failure ``name``, tried at ``order``, on
    ``wording``.

    Raises:
        ValueError: a second kind of that name or that order (the try-order must be total).
    """

    def register(build: Builder) -> Builder:
        if name in KINDS or any(k.order == order for k in KINDS.values()):
            raise ValueError(f"failure {name!r} (order {order}): the name or order is taken")
        KINDS[name] = FailureKind(name, order, wording, build)
        return build

    return register


def fixed_failure(name: str, order: int, wording: vllm_log.Wording, cause: str, fix: str) -> None:
    """Declare the known failure ``name`` whose sentence needs nothing but the match:
    ``cause`` and ``fix`` are :meth:`str.format` templates over its groups (``{0}`` the first,
    ``{want}`` a named one); the evidence is the matched line.

    Raises:
        ValueError: as :func:`failure`.
    """

    def build(m: re.Match[str], text: str, config: Any) -> Diagnosis:
        groups, named = m.groups(), m.groupdict()
        said = cause.format(*groups, **named), fix.format(*groups, **named)
        return Diagnosis(name, *said, _line_of(m, text))

    failure(name, order, wording)(build)


# ---- helpers for the builders ---------------------------------------------------------


def _line_of(match: re.Match[str], text: str) -> str:
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start : end if end != -1 else len(text)].strip()[:400]


def _flag_value(config: Any, flag: str) -> str | None:
    """The value of ``flag`` in ``config.cli_flags()`` (None when absent or no config)."""
    if config is None or not hasattr(config, "cli_flags"):
        return None
    try:
        argv = list(config.cli_flags())
    except Exception:  # noqa: BLE001 - a diagnosis never fails on a strange config
        return None
    for i, item in enumerate(argv):
        if item == flag and i + 1 < len(argv):
            return argv[i + 1]
        if item.startswith(flag + "="):
            return item.split("=", 1)[1]
    return None


def _installed_vllm() -> str | None:
    from helpers.config.versions import detect_vllm

    return detect_vllm().version


def _target_bits(config: Any) -> tuple[str | None, str | None]:
    if config is None:
        return None, None
    return getattr(config, "target", None), getattr(config, "vllm_version", None)


def _api_port(text: str, config: Any) -> int | None:
    port = getattr(config, "port", None) if config is not None else None
    if port:
        return int(port)
    # vLLM's api_utils logs "non-default args: {... 'port': 8001, ...}" before binding.
    m = re.search(vllm_log.NON_DEFAULT_PORT, text)
    return int(m.group(1)) if m else None


def _port_owner(port: int | None) -> str:
    """Words naming who holds ``port``: one of our recorded servers, or a process."""
    try:
        from helpers.server.processes import describe_port

        return describe_port(port)
    except Exception:  # noqa: BLE001 - the diagnosis still stands without the owner
        return ""


def _non_default_args(text: str) -> dict[str, Any]:
    """The ``non-default args: {...}`` dict vLLM logs at start-up (``api_utils.py``), or {}."""
    found = list(re.finditer(vllm_log.NON_DEFAULT_ARGS, text, flags=re.MULTILINE))
    m = found[-1] if found else None  # the last start-up in the log
    if m is None:
        return {}
    try:
        value = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):
        return {}
    return value if isinstance(value, dict) else {}


def _spec_settings(
    text: str, config: Any
) -> tuple[int | None, int | None, str | None, int | None, str | None]:
    """(max_num_batched_tokens, max_num_seqs, method, K, vllm version) from the config or the log."""
    mnbt = _flag_value(config, "--max-num-batched-tokens")
    seqs = _flag_value(config, "--max-num-seqs")
    spec = dict(getattr(config, "speculative_config", None) or {}) if config is not None else {}
    args = _non_default_args(text)
    mnbt = mnbt or args.get("max_num_batched_tokens")
    seqs = seqs or args.get("max_num_seqs")
    if not spec and isinstance(args.get("speculative_config"), dict):
        spec = args["speculative_config"]
    version = getattr(config, "vllm_version", None) if config is not None else None
    v = re.search(vllm_log.ENGINE_VERSION[0], text) or re.search(vllm_log.ENGINE_VERSION[1], text)
    if v:
        version = v.group(1)
    k = spec.get("num_speculative_tokens")
    return (
        int(mnbt) if mnbt else None,
        int(seqs) if seqs else None,
        spec.get("method"),
        int(k) if k else None,
        version,
    )


def _is_standin(model: Any) -> bool:
    try:
        return (Path(str(model)) / "standin.json").is_file()
    except OSError:
        return False
