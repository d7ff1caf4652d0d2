"""The tuning step's inputs: candidate configurations (:func:`candidate`, :func:`make_candidates`,
:func:`default_candidates`) and workloads (:func:`workloads`), re-exported by :mod:`lab.tune.tune`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

from helpers.bench.point import _safe
from helpers.config.resolve import standin_config
from helpers.config.run import serves_standin
from helpers.errors import BenchError, RecipeError
from helpers.memory.planner import DRAFTERS
from helpers.weights.prepare import served_config
from lab.bench.scenarios import Scenario, _from_entry
from lab.bench.scenarios import scenario as named_scenario
from lab.synthetic_acceptance import with_synthetic_acceptance
from lab.tune.saved import RECIPE

#: Spec keys :func:`candidate` takes (a candidate given as a mapping).
SPEC_KEYS = (
    "name", "variant", "speculative", "speculative_tokens", "moe_backend", "vllm_version",
    "extra_args", "standin_args", "env", "note",
)  # fmt: skip

# --------------------------------------------------------------------------- candidates


@dataclasses.dataclass
class Candidate:
    """One configuration to measure.

    Attributes:
        name: short, unique within a run; names its folder and its line in the plots.
        config: the target's command for it (what :meth:`TuneResult.recommended` renders).
        extra_args: the flags the spec added (re-applied to the stand-in, see :meth:`served`).
        standin_args: the flags the CPU stand-in plays this candidate with instead of
            ``extra_args`` (``{}``: none; a GPU-only flag such as ``--moe-backend`` means nothing
            on the CPU build).
        note: one line for the tables (why this candidate).
        recipe: True for the target's own command.
        spec: the registry choices and flags it was drawn with (``variant``, ``moe_backend``,
            ``vllm_version``, ``extra_args``...): the target notebook's parameters that serve it.
    """

    name: str
    config: Any
    extra_args: dict[str, Any] = dataclasses.field(default_factory=dict)
    standin_args: dict[str, Any] | None = None
    note: str = ""
    recipe: bool = False
    spec: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def standin_drafting(self) -> str | None:
        """``"ngram (for mtp)"`` for a drafting candidate: what the CPU stand-in drafts with in
        its place (:func:`helpers.config.resolve.standin_config`), ``"ngram"`` for n-gram, else
        None."""
        mode = getattr(self.config, "speculative", None)
        if mode in (None, "none"):
            return None
        return "ngram" if mode == "ngram" else f"ngram (for {mode})"

    def served(self, mode: str) -> Any:
        """The config launched for this candidate in ``mode`` (:data:`helpers.weights.prepare.MODES`);
        on the stand-in with ``standin_args`` when given, else ``extra_args``, drafting with
        n-gram in place of MTP, DFlash or DSpark (:attr:`standin_drafting`); weightless, a
        drafting candidate drafts at the registry's synthetic acceptance for its number of draft
        tokens (:func:`lab.synthetic_acceptance.with_synthetic_acceptance`)."""
        cfg = served_config(self.config, mode)
        if mode == "weightless":
            cfg = with_synthetic_acceptance(cfg)
        if mode == "stand_in":
            if self.standin_drafting:  # n-gram for MTP, DFlash, DSpark: the CPU build's one drafter
                cfg = standin_config(self.config, cfg.model, drafting=True)
            args = self.extra_args if self.standin_args is None else self.standin_args
            if args:
                cfg = cfg.with_args(dict(args))
        return cfg


def _base_extras(base: Any) -> dict[str, Any]:
    """The flags ``base`` got from its caller's ``extra_args`` (kept when a candidate is
    resolved again with other registry choices)."""
    return {f: base.args[f] for f in getattr(base, "extra_flags", ()) if f in base.args}


def candidate(
    base: Any,
    name: str,
    *,
    variant: str | None = None,
    speculative: str | None = None,
    speculative_tokens: int | None = None,
    moe_backend: str | None = None,
    vllm_version: str | None = None,
    extra_args: Mapping[str, Any] | None = None,
    standin_args: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    note: str = "",
) -> Candidate:
    """A candidate drawn from the registry around ``base`` (the target's resolved config).

    With ``variant``, ``speculative``, ``moe_backend`` or ``vllm_version`` the target is
    resolved again with them (:func:`helpers.config.resolve.resolve`, the same features, the flags
    ``base`` got from ``extra_args`` kept); otherwise ``base.with_args(extra_args)``.

    Args:
        base: the target's :class:`~helpers.config.serveconfig.ServeConfig`.
        name: the candidate's name (letters, digits, ``.``, ``-``, ``_``, ``+``).
        variant, speculative, moe_backend, vllm_version: registry choices (as ``resolve``).
        speculative_tokens: draft tokens per step ``K`` (``num_speculative_tokens`` of the
            drafting mode's ``--speculative-config``); None keeps the registry's.
        extra_args: flags on top (``{"--max-num-seqs": 64}``; None removes a flag).
        standin_args: flags for the CPU stand-in instead of ``extra_args`` (see :class:`Candidate`).
        env: environment variables the server starts with, on top of the target's (e.g. vLLM's
            uniform routing simulation for weightless MoE timing); its command exports them. A
            GPU setting: the CPU stand-in plays its own config with ``standin_args`` only.
        note: one line on why.

    Raises:
        BenchError: a name that is empty or not a plain word; ``extra_args`` or
            ``standin_args`` not a dict; ``extra_args`` drafting with MTP, DFlash or DSpark
            through ``--speculative-config`` (``speculative=`` is the way).
        RecipeError: what ``resolve`` refuses (an unknown variant, a rule broken), by name.
    """
    if not isinstance(name, str) or not name or _safe(name) != name:
        raise BenchError(
            f"candidate name {name!r}: use a short plain name (letters, digits, '.', '-', '_', "
            f"'+'), e.g. 'max-num-seqs-64'; it names the candidate's folder."
        )
    for what, given in (("extra_args", extra_args), ("standin_args", standin_args)):
        if given is not None and not isinstance(given, Mapping):
            raise BenchError(
                f"candidate {name!r}: {what} {given!r:.80} is a {type(given).__name__}; it takes a "
                'dict of flag to value, e.g. {"--max-num-seqs": 64} (None as a value removes a flag).'
            )
    extra = dict(extra_args or {})
    drafter = _drafter_in(extra.get("--speculative-config"))
    if drafter in DRAFTERS:  # the registry's mode, not a bare flag: see the error
        raise BenchError(
            f"candidate {name!r}: extra_args sets --speculative-config with method {drafter!r}; pass "
            f"speculative={drafter!r} (and speculative_tokens=K) instead: the registry's mode carries "
            "its GPU overrides, a weightless run's synthetic acceptance and the CPU stand-in's "
            "n-gram in its place (a bare flag would launch the drafter on the stand-in, which "
            "cannot run it)."
        )
    if any(v is not None for v in (variant, speculative, moe_backend, vllm_version)):
        from helpers.config.resolve import resolve

        cfg = resolve(
            base.target, variant or base.variant, speculative or base.speculative,
            features=base.features, extra_args={**_base_extras(base), **extra},
            vllm_version=vllm_version or base.vllm_version, moe_backend=moe_backend,
        )  # fmt: skip
    else:
        cfg = base.with_args(extra) if extra else base
    if speculative_tokens is not None:
        if not cfg.speculative_config:
            raise BenchError(
                f"candidate {name!r}: speculative_tokens={speculative_tokens} needs a drafting "
                "mode: add speculative='mtp' (or dflash / dspark)."
            )
        spec = {**cfg.speculative_config, "num_speculative_tokens": int(speculative_tokens)}
        cfg = cfg.with_args({"--speculative-config": spec})
    if env:
        cfg = cfg.with_args({}, **{str(k): str(v) for k, v in env.items()})
    chosen = {"variant": variant, "speculative": speculative, "moe_backend": moe_backend,
              "speculative_tokens": speculative_tokens, "vllm_version": vllm_version,
              "extra_args": extra or None, "env": dict(env or {}) or None}  # fmt: skip
    standin = dict(standin_args) if standin_args is not None else None
    spec = {k: v for k, v in chosen.items() if v is not None}
    return Candidate(name, cfg, extra, standin, note, spec=spec)


def _drafter_in(spec: Any) -> str | None:
    """The ``method`` of a ``--speculative-config`` value (a dict or its JSON), else None."""
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except ValueError:
            return None
    return spec.get("method") if isinstance(spec, Mapping) else None


def make_candidates(
    base: Any, specs: Iterable[Candidate | Mapping[str, Any]] | None, *, include_recipe: bool = True
) -> list[Candidate]:
    """The candidates of a run (:func:`tune`'s ``candidates``): ``"recipe"`` (``base`` itself) first, then ``specs`` (each a
    :class:`Candidate` or a mapping of :data:`SPEC_KEYS` for :func:`candidate`).

    Raises:
        BenchError: an unknown spec key, a spec without a name, or two candidates of one name.
    """
    recipe = Candidate(RECIPE, base, note="the target's command", recipe=True)
    out = [recipe] if include_recipe else []
    for spec in specs or ():
        if isinstance(spec, Candidate):
            out.append(spec)
            continue
        if not isinstance(spec, Mapping) or "name" not in spec:
            raise BenchError(
                f"candidate {spec!r}: pass a mapping with a 'name' and any of "
                f"{', '.join(SPEC_KEYS[1:])}, e.g. {{'name': 'marlin', 'moe_backend': 'marlin'}}."
            )
        unknown = sorted(set(spec) - set(SPEC_KEYS))
        if unknown:
            raise BenchError(
                f"candidate {spec.get('name')!r}: unknown key(s) {unknown}; a candidate takes "
                f"{', '.join(SPEC_KEYS)}."
            )
        kwargs = {k: v for k, v in spec.items() if k != "name"}
        out.append(candidate(base, spec["name"], **kwargs))
    names = [c.name for c in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise BenchError(
            f"two candidates are named {dupes}: names must be unique (the recipe's command is "
            f"{RECIPE!r}; pass include_recipe=False to name another one so)."
        )
    return out


def check_candidates(cands: Iterable[Candidate]) -> None:
    """Read every candidate's command back against the flag table of its own release
    (:func:`helpers.config.flagtable.check_config`), all before the first launch: a typo in the
    last candidate's ``extra_args`` is named in step 1, not after the others' sweeps.

    Raises:
        BenchError: the first candidate with a flag or value its release does not have,
            naming the candidate and the flag table's problem and fix.
    """
    from helpers.config.flagtable import check_config
    from helpers.errors import FlagError

    for cand in cands:
        try:
            check_config(cand.config, quiet=True)
        except FlagError as exc:
            raise BenchError(f"candidate {cand.name!r}: {exc}") from None


def default_candidates(base: Any, *, run: Any = None) -> list[dict[str, Any]]:
    """A small default grid of specs around ``base`` for ``run`` (a
    :class:`helpers.config.run.Run` or a server; None: a GPU): on a GPU Marlin MoE, BF16 and
    ``--max-num-seqs 64`` where they apply; on the stand-in ``--max-num-seqs 2`` and the target
    on another offered vLLM release (skipped by :func:`tune` where not installed).
    """
    from helpers.config.load import shared_registry

    reg = shared_registry()
    if serves_standin(run):
        specs: list[dict[str, Any]] = [
            {"name": "max-num-seqs-2", "extra_args": {"--max-num-seqs": 2},
             "note": "half the batch of the stand-in's recipe (4)"},
        ]  # fmt: skip
        other = [v for v in reg.model.offered_vllm_versions if str(v) != base.vllm_version]
        if other:
            specs.append(
                {"name": f"vllm-{other[0]}", "vllm_version": str(other[0]),
                 "note": f"the same command on vLLM {other[0]}"}
            )  # fmt: skip
        return specs
    specs = []
    if base.variant == "nvfp4" and base.args.get("--moe-backend") not in (None, "marlin"):
        specs.append({"name": "marlin", "moe_backend": "marlin", "note": "Marlin MoE kernel"})
    if "bf16" in reg.target_variants(base.target) and base.variant != "bf16":
        try:
            candidate(base, "bf16", variant="bf16")
            specs.append({"name": "bf16", "variant": "bf16", "note": "BF16 checkpoint"})
        except RecipeError:  # its weights do not fit this GPU (resolve's rule)
            pass
    if int(base.args.get("--max-num-seqs") or 256) > 64:
        specs.append(
            {"name": "max-num-seqs-64", "extra_args": {"--max-num-seqs": 64},
             "note": "a smaller batch: less queueing, lower TTFT at high load"}
        )  # fmt: skip
    return specs


# --------------------------------------------------------------------------- workloads

#: The keys a workload mapping takes (:func:`workloads`): a misspelled one is refused, not ignored.
WORKLOAD_KEYS = (
    "name", "input_len", "output_len", "prefix_len", "concurrencies", "num_prompts", "rounds",
    "label", "description", "source", "agent",
)  # fmt: skip


def workloads(workload: Any, *, run: Any = None) -> list[Scenario]:
    """``workload`` as a list of :class:`~lab.bench.scenarios.Scenario`.

    Args:
        workload: a scenario name of ``cookbook/scenarios.yaml`` (scaled for the stand-in when
            ``run``, a :class:`helpers.config.run.Run` or a server, serves it), a Scenario, a mapping (``input_len``, ``output_len``, optional
            ``prefix_len``, ``concurrencies``, ``num_prompts``, ``rounds``, ``name``; token
            counts as given, never scaled), or a list of these (names unique).

    Raises:
        BenchError: an unknown name, an incomplete mapping, or two workloads of one name.
    """
    items = workload if isinstance(workload, (list, tuple)) else [workload]
    out: list[Scenario] = []
    for item in items:
        try:
            if isinstance(item, Scenario):
                out.append(item)
            elif isinstance(item, str):
                out.append(named_scenario(item, run))
            elif isinstance(item, Mapping):
                fields = dict(item)
                unknown = sorted(set(fields) - set(WORKLOAD_KEYS))
                if unknown:
                    raise RecipeError(
                        f"workload {fields.get('name', item)!r}: unknown key(s) {unknown}; a "
                        f"workload mapping takes {', '.join(WORKLOAD_KEYS)}."
                    )
                shape = f"{fields.get('input_len')}in-{fields.get('output_len')}out"
                name = str(fields.pop("name", None) or shape)
                if _safe(name) != name:
                    raise RecipeError(f"workload name {name!r}: use a plain name such as 'chat-1k'")
                fields.setdefault("source", "caller")
                out.append(_from_entry(name, fields))
            else:
                raise RecipeError(f"workload {item!r} ({type(item).__name__}) is not a workload")
        except RecipeError as exc:
            raise BenchError(
                f"{exc} Pass a scenario name of cookbook/scenarios.yaml (e.g. 'tune-1k'), a "
                "Scenario, or {'input_len': 1024, 'output_len': 256, 'concurrencies': [1, 16]}."
            ) from None
    names = [w.name for w in out]
    if not out or len(set(names)) != len(names):
        raise BenchError(f"workloads {names}: give at least one, each with a name of its own.")
    return out
