"""The committed flag table of each vLLM release the registry offers, and checks against it.

A rendered command (shell, docker, truss) runs on the release its target installs
(``ServeConfig.vllm_version``), not on the vLLM installed where the notebook runs, so each
command is checked against ``docs/results/flags/vllm-<version>.json``: every option string
of that release's ``vllm serve`` parser, read from its own wheel (``python -m
tools.flagtables generate WHEEL``). A misspelled or removed flag fails by name here.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

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
    """Problems of ``[*flags]`` (``--flag value`` items, no program or model) on vLLM ``version``.

    Checks: the option exists in the release; a value is given exactly when it takes one;
    the value is one of its ``choices`` (when it has them) or of its registry
    (:data:`REGISTRY_FLAGS`: reasoning and tool parsers, Mamba and attention backends);
    ``--speculative-config`` keys, ``method``, ``moe_backend`` and ``attention_backend``
    (JSON value, or ``--speculative-config.key value``) exist in the release.

    Returns:
        One sentence per problem ([] when the release accepts every flag).
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
            problems.append(f"{base} does not exist in vLLM {version}")
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


def _after_model(argv: Sequence[str], model: str) -> list[str]:
    argv = list(argv)
    return argv[argv.index(model) + 1 :] if model in argv else argv


def rendered_commands(cfg: Any) -> dict[str, list[str]]:
    """The flags of each rendering of ``cfg``, as argv after the model: ``shell``
    (:meth:`~helpers.config.serveconfig.ServeConfig.shell_command`), ``docker``
    (:meth:`~helpers.config.serveconfig.ServeConfig.docker_command`) and ``truss`` (the
    ``start_command`` of :meth:`~helpers.config.serveconfig.ServeConfig.truss_config`); the last
    two only when the target has a docker image. Each is parsed back from its text, so what is
    checked is what a user copies."""
    out: dict[str, list[str]] = {}
    model = cfg.model or "<model>"
    shell = [ln for ln in cfg.shell_command().splitlines() if not ln.startswith("export ")]
    out["shell"] = _after_model(shlex.split("\n".join(shell).replace("\\\n", " ")), model)
    if cfg.docker_image:
        out["docker"] = _after_model(shlex.split(cfg.docker_command().replace("\\\n", " ")), model)
        start = yaml.safe_load(cfg.truss_config())["docker_server"]["start_command"]
        argv = shlex.split(start)
        out["truss"] = argv[3:] if argv[:2] == ["vllm", "serve"] else argv
    return out


def check_config(cfg: Any, *, quiet: bool = False) -> dict[str, list[str]]:
    """Check every rendering of ``cfg`` against the flag table of ``cfg.vllm_version`` (the
    release the target installs or the notebook selected), not the installed vLLM.

    A nightly has no table: it is reported and skipped (its flags are checked at launch by
    the installed parser, :meth:`helpers.config.serveconfig.ServeConfig.validate`).

    Returns:
        ``{rendering: []}`` when every flag exists in that release.

    Raises:
        FlagError: a rendering uses a flag (or value) the release does not have; ``.flags``
            names them; the message names the release and the fix.
    """
    version = str(cfg.vllm_version)
    if version == "nightly":
        if not quiet:
            print(
                "flag table: none for a nightly; the installed vLLM's parser checks the flags at launch"
            )
        return {}
    table = load_table(version)
    found = {
        name: check_argv(argv, version, table=table)
        for name, argv in rendered_commands(cfg).items()
    }
    bad = {p for probs in found.values() for p in probs}
    if bad:
        flags = sorted({p.split()[0].split(".")[0].split(":")[0] for p in bad})
        raise FlagError(
            f"The {cfg.target} command does not run on vLLM {version} (its flag table, "
            f"docs/results/flags/vllm-{version}.json): "
            + "; ".join(sorted(bad))
            + ". Select a release that has them (vllm_version=...), or change the flag in "
            "cookbook/recipe.yaml / extra_args.",
            flags=flags,
        )
    if not quiet:
        print(f"flags checked against vLLM {version}'s own parser table: {', '.join(found)} ok")
    return found
