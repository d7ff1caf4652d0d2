"""The committed flag table of each vLLM release the registry offers, and checks against it.

A rendered command runs on the release its target installs (``ServeConfig.vllm_version``), not
on the vLLM installed here, so each command is read back from its text (:func:`served_argvs`)
and checked (:func:`check_config`) against ``docs/results/flags/vllm-<version>.json``: every
option string of that release's ``vllm serve`` parser (``python -m tools.flagtables generate
WHEEL``).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from helpers.config.schema import _closest
from helpers.errors import FlagError
from helpers.paths import REPO_ROOT

FLAGS_DIR = REPO_ROOT / "docs" / "results" / "flags"


def table_path(version: str) -> Path:
    """``docs/results/flags/vllm-<version>.json``."""
    return FLAGS_DIR / f"vllm-{version}.json"


def available_versions() -> list[str]:
    """The releases with a committed table."""
    return sorted(p.stem.removeprefix("vllm-") for p in FLAGS_DIR.glob("vllm-*.json"))


def load_table(version: str) -> dict[str, Any]:
    """The flag table of vLLM ``version``.

    Raises:
        FlagError: no table for that release (names the ones there are and how to make one).
    """
    path = table_path(version)
    if not path.exists():
        raise FlagError(
            f"No flag table for vLLM {version} in docs/results/flags/ (there are: "
            f"{', '.join(available_versions()) or 'none'}). Select an offered release "
            "(vllm_version=...), or generate one: pip download --no-deps vllm==VERSION -d /tmp/w && "
            "python -m tools.flagtables generate /tmp/w/vllm-VERSION-*.whl",
            flags=[],
        )
    return json.loads(path.read_text())


#: Flags whose value vLLM looks up by name in a registry, not through argparse ``choices``
#: (the table's ``registries``, :data:`tools.flagtables.REGISTRY_SOURCES`); True: an enum
#: matched by ``value.upper()`` (vllm/config/attention.py, vllm/config/mamba.py in 0.28.0,
#: 0.32.0 and 0.33.0).
REGISTRY_FLAGS = {
    "--reasoning-parser": False,
    "--tool-call-parser": False,
    "--mamba-backend": True,
    "--attention-backend": True,
}
#: ``--speculative-config`` keys whose value is one of a flag's names (the drafter's own
#: kernels: ``SpeculativeConfig.moe_backend`` / ``attention_backend``).
_SPEC_KEY_FLAGS = {"moe_backend": "--moe-backend", "attention_backend": "--attention-backend"}


def _registry_problem(tab: Mapping[str, Any], flag: str, value: Any, version: str) -> str | None:
    """The sentence for a name ``flag`` looks up that release's registry lacks, else None
    (also when the table records no registry for ``flag``: tables before 2026-12-01)."""
    names = (tab.get("registries") or {}).get(flag)
    if not names or value is None or flag not in REGISTRY_FLAGS:
        return None
    text = str(value)
    if (text.upper() if REGISTRY_FLAGS[flag] else text) in names:
        return None
    return f"{flag} {text}: vLLM {version} has no such name (it has {', '.join(names)})"


def check_argv(
    argv: Sequence[str], version: str, *, table: Mapping[str, Any] | None = None
) -> list[str]:
    """Problems of ``[*flags]`` (no program or model) on vLLM ``version``: an option the release
    lacks, a missing or extra value, a value outside its ``choices`` or its registry
    (:data:`REGISTRY_FLAGS`), ``--speculative-config`` keys, ``method``, ``moe_backend`` and
    ``attention_backend`` the release lacks. One sentence per problem ([] when all pass).
    """
    tab = table or load_table(version)
    opts: dict[str, Any] = tab["options"]
    problems: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        item = items[i]
        i += 1
        if not item.startswith("--"):
            continue
        name, eq, inline = item.partition("=")
        base, dot, sub = name.partition(".")
        opt = opts.get(base) or opts.get(base.replace("_", "-"))
        if opt is None:
            # a typo's letters, not another release's flag (--max-num-active-seqs: 0.8)
            problems.append(f"{base} does not exist in vLLM {version}{_closest(base, opts, 0.85)}")
            continue
        value = inline if eq else None
        if (
            opt["takes_value"]
            and value is None
            and i < len(items)
            and not items[i].startswith("--")
        ):
            value = items[i]
            i += 1
        if dot:
            if base == "--speculative-config" and sub not in tab.get(
                "speculative_config_keys", [sub]
            ):
                problems.append(
                    f"{base}.{sub}: vLLM {version}'s SpeculativeConfig has no field {sub!r}"
                )
            continue
        if opt["takes_value"] and value is None and opt.get("nargs") not in ("?", "*"):
            problems.append(f"{base} needs a value on vLLM {version}")
            continue
        choices = opt.get("choices")
        if choices and value is not None and value not in choices:
            problems.append(
                f"{base} {value}: vLLM {version} accepts {', '.join(map(str, choices))}"
            )
        bad_name = _registry_problem(tab, base, value, version)
        if bad_name:
            problems.append(bad_name)
        if base == "--speculative-config" and value:
            try:
                spec = json.loads(value)
            except ValueError:
                problems.append(f"{base} is not JSON: {value[:80]}")
                continue
            keys = tab.get("speculative_config_keys") or []
            bad = [k for k in spec if keys and k not in keys]
            if bad:
                problems.append(
                    f"{base}: vLLM {version}'s SpeculativeConfig has no {', '.join(bad)}"
                )
            methods = tab.get("speculative_methods") or []
            if spec.get("method") and methods and spec["method"] not in methods:
                problems.append(
                    f"{base} method {spec['method']!r} does not exist in vLLM {version}"
                )
            for key, flag in _SPEC_KEY_FLAGS.items():
                if spec.get(key) is None:
                    continue
                known = (opts.get(flag) or {}).get("choices")
                if known and str(spec[key]) not in known:
                    problems.append(
                        f"{base} {key} {spec[key]!r}: vLLM {version} accepts {', '.join(known)}"
                    )
                bad_name = _registry_problem(tab, flag, str(spec[key]), version)
                if bad_name:
                    problems.append(f"{base} {key}: {bad_name}")
    return problems


#: The renderings :func:`served_argvs` reads: the three of
#: :class:`~helpers.config.serveconfig.ServeConfig` (``shell_command``, ``docker_command``,
#: ``truss_config``), then the cluster files of :mod:`lab.fleet.render` (``compose``,
#: ``kserve``, ``production_stack``).
RENDERINGS = ("shell", "docker", "truss", "compose", "kserve", "production-stack")
#: Where a served ``vllm serve`` listens inside a container (each engine's default port).
PORT = 8000


def renderings(cfg: Any) -> dict[str, str]:
    """``{"shell": text, "docker": text, "truss": text}``: the texts of ``cfg``'s own renderings
    (``docker`` and ``truss`` only when the target has a docker image); add the cluster files
    (:func:`lab.fleet.render.renderings`) to check all of :data:`RENDERINGS`."""
    out = {"shell": cfg.shell_command()}
    if cfg.docker_image:
        out.update(docker=cfg.docker_command(), truss=cfg.truss_config())
    return out


def _split(text: str) -> list[str]:
    """Shell words of a multi-line command (``\\`` line continuations)."""
    return shlex.split(text.replace("\\\n", " "))


def served_argvs(rendering: str, text: str) -> list[list[str]]:
    """The ``vllm serve`` argv (the model, then the flags) each server of a rendering runs, read
    back from the rendered text as its engine builds it, so what is checked is what a user copies.

    ``shell``: after the ``export`` lines; ``docker``: after the image; ``truss``:
    ``docker_server.start_command``; ``compose``: each service's ``command`` but the router's;
    ``kserve``: KServe's ``kserve-config-llm-template`` preset (``vllm serve /mnt/models
    --served-model-name NAME --port 8000``) + the container's ``args``; ``production-stack``: the
    chart's template (``vllm serve MODEL_URL --host 0.0.0.0 --port 8000``, the prefix-caching
    switch, ``vllmConfig.extraArgs``, ``--revision``). The renderers: :mod:`lab.fleet.render`.

    Args:
        rendering: one of :data:`RENDERINGS`.
        text: that rendering's text.

    Raises:
        FlagError: an unknown rendering (names the valid ones).
    """
    if rendering == "shell":
        lines = [ln for ln in text.splitlines() if not ln.startswith("export ")]
        return [_split("\n".join(lines))[2:]]
    if rendering == "docker":
        argv, i = _split(text), 2  # after "docker run"
        while argv[i].startswith("-"):
            i += 1 if "=" in argv[i] else 2
        return [argv[i + 1 :]]
    doc = yaml.safe_load(text)
    if rendering == "truss":
        return [shlex.split(doc["docker_server"]["start_command"])[2:]]
    if rendering == "compose":
        svcs = doc["services"]
        return [[str(a) for a in s["command"]] for n, s in svcs.items() if n != "router"]
    if rendering == "kserve":
        spec = doc["spec"]
        argv = ["/mnt/models", "--served-model-name", spec["model"]["name"], "--port", str(PORT)]
        return [argv + list(spec["template"]["containers"][0]["args"])]
    if rendering == "production-stack":
        out = []
        for m in doc["servingEngineSpec"]["modelSpec"]:
            vc = m.get("vllmConfig", {})
            argv = [m["modelURL"], "--host", "0.0.0.0", "--port", str(PORT)]
            argv.append("--enable-prefix-caching" if vc.get("enablePrefixCaching") else "--no-enable-prefix-caching")  # fmt: skip
            argv += [str(a) for a in vc.get("extraArgs", [])]
            if m.get("modelRevision"):
                argv += ["--revision", m["modelRevision"]]
            out.append(argv)
        return out
    raise FlagError(f"Unknown rendering {rendering!r}: one of {', '.join(RENDERINGS)}.", flags=[])


def check_config(
    cfg: Any, texts: Mapping[str, str] | None = None, *, quiet: bool = False
) -> dict[str, list[list[str]]]:
    """Read every rendering of ``cfg`` back (:func:`served_argvs`) and check each argv against
    the flag table of ``cfg.vllm_version`` (the release the target installs), not the installed
    vLLM. A nightly has no table: its argvs are returned unchecked (the installed parser checks
    them at launch, :meth:`helpers.config.serveconfig.ServeConfig.validate`).

    Args:
        cfg: the :class:`~helpers.config.serveconfig.ServeConfig` rendered.
        texts: ``{rendering: text}`` (keys of :data:`RENDERINGS`); None: :func:`renderings`.
        quiet: no "flags checked" line.

    Returns:
        ``{rendering: [argv, ...]}`` as :func:`served_argvs` read them.

    Raises:
        FlagError: a rendering uses a flag (or value) the release does not have (``.flags``);
            the message names each problem, the renderings that have it, and the fix.
    """
    version = str(cfg.vllm_version)
    texts = renderings(cfg) if texts is None else texts
    found = {r: served_argvs(r, t) for r, t in texts.items()}
    if version == "nightly":
        if not quiet:
            print("flag table: none for a nightly; vLLM's own parser checks them at launch")
        return found
    table = load_table(version)
    where: dict[str, list[str]] = {}
    for r, argvs in found.items():
        problems = [p for argv in argvs for p in check_argv(argv[1:], version, table=table)]
        for p in dict.fromkeys(problems):
            where.setdefault(p, []).append(r)
    if where:
        flags = sorted({p.split()[0].split(".")[0].split(":")[0] for p in where})
        raise FlagError(
            f"The {cfg.target} command does not run on vLLM {version} (its flag table, "
            f"docs/results/flags/vllm-{version}.json): "
            + "; ".join(f"{p} ({', '.join(rs)})" for p, rs in sorted(where.items()))
            + ". Select a release that has them (vllm_version=...), or change the flag in "
            "cookbook/recipe.yaml, or a notebook's extra_args / moe_backend parameter.",
            flags=flags,
        )
    if not quiet:
        print(f"flags checked against vLLM {version}'s own parser table: {', '.join(found)} ok")
    return found
