"""Every target's command rendered for compose, KServe and production-stack, checked without a
cluster: against each engine's published schema at a pinned version from PyPI
(``requirements-schemas.txt``, installed without dependencies and read, never imported), the
engine flags byte for byte, and every argv against the release's flag table.

- compose: the Compose Specification's JSON schema as docker-compose 1.29.2 ships it
  (``compose/config/compose_spec.json``, draft 2019-09), through ``jsonschema``.
- KServe: the generated OpenAPI models of kserve 0.21.0 (``kserve/models/v1alpha2_*.py``) and
  of the Kubernetes types they reference (kubernetes 37.0.2, ``kubernetes/client/models/``),
  walked key by key: each class's ``openapi_types`` / ``attribute_map`` read with ``ast``.
  kserve 0.21.0 names ``V1alpha2LLMInferenceServiceSpec`` but ships no model for it, so the
  spec's own keys come from :data:`LLMISVC_SPEC` (KServe's Go types), and what they hold
  (``template``: ``V1PodSpec``, ...) from the Kubernetes models again.
- production-stack: NOT a published schema. The chart's ``values.schema.json`` is published on
  GitHub only; CI reaches PyPI alone and copies of GitHub content are not committed. The
  values are checked against :data:`PRODUCTION_STACK_KEYS`, the keys the chart documents.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import json
import re

import jsonschema
import pytest
import yaml

from helpers.config import flagtable, load
from helpers.config import resolve as recipes
from helpers.errors import FlagError, RecipeError
from lab.fleet import render

REG = load.load_registry()
GPU_TARGETS = [n for n, t in REG.targets.items() if not t.stand_in]


# ---- the engines' published schemas, read from the installed distributions ---------------
def _dist_file(dist: str, path: str):
    """A file of an installed distribution, without importing it."""
    try:
        found = importlib.metadata.distribution(dist).locate_file(path)
    except importlib.metadata.PackageNotFoundError:
        found = None
    if found is None or not found.is_file():
        pytest.fail(f"{dist}: {path} missing; run `make setup` (requirements-schemas.txt)")
    return found


@functools.lru_cache(maxsize=1)
def compose_validator() -> jsonschema.Draft201909Validator:
    schema = json.loads(
        _dist_file("docker-compose", "compose/config/compose_spec.json").read_text()
    )
    return jsonschema.Draft201909Validator(schema)


def _module(cls: str) -> str:
    """openapi-generator's file name for a model class (V1alpha2LLMInferenceService ->
    v1alpha2_llm_inference_service)."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", cls)
    return re.sub(r"([a-z\d])([A-Z])", r"\1_\2", s).lower()


#: Where each distribution keeps its generated models.
MODEL_DIRS = {"kserve": "kserve/models", "kubernetes": "kubernetes/client/models"}


@functools.cache
def openapi_model(cls: str) -> dict[str, str] | None:
    """``{json key: openapi type}`` of a generated model class, from its module's source
    (``openapi_types`` and ``attribute_map``), or None when no installed package ships it."""
    for dist, folder in MODEL_DIRS.items():
        try:
            path = importlib.metadata.distribution(dist).locate_file(f"{folder}/{_module(cls)}.py")
        except importlib.metadata.PackageNotFoundError:
            continue
        if not path.is_file():
            continue
        tables = {}
        for node in ast.walk(ast.parse(path.read_text())):  # kserve: Assign; kubernetes: AnnAssign
            name = getattr(node, "target", None) or (getattr(node, "targets", None) or [None])[0]
            if isinstance(name, ast.Name) and name.id in ("openapi_types", "attribute_map"):
                tables[name.id] = ast.literal_eval(node.value)
        return {tables["attribute_map"][k]: t for k, t in tables["openapi_types"].items()}
    return None


#: ``LLMInferenceServiceSpec`` (serving.kserve.io/v1alpha2) as KServe's Go types define it
#: (``pkg/apis/serving/v1alpha2/llm_inference_service_types.go``, main branch of August 2026,
#: before v0.21.0: the spec, its inline ``WorkloadSpec``, ``LLMModelSpec``, ``ParallelismSpec``,
#: ``RouterSpec``); Kubernetes types by their model class. Objects this cookbook does not write
#: are ``object``.
LLMISVC_SPEC: dict = {
    "model": {"uri": "str", "name": "str", "lora": "object"},
    "storageInitializer": {"enabled": "bool"},
    "replicas": "int",
    "scaling": "object",
    "parallelism": {k: "int" for k in ("tensor", "pipeline", "data", "dataLocal", "dataRPCPort")}
    | {"expert": "bool"},
    "labels": "dict(str, str)",
    "annotations": "dict(str, str)",
    "template": "V1PodSpec",
    "worker": "V1PodSpec",
    "kvCacheOffloading": "object",
    "router": {k: "object" for k in ("route", "gateway", "ingress", "scheduler")},
    "prefill": "object",
    "baseRefs": "list[V1LocalObjectReference]",
}

#: The generators' primitive type names (kserve: openapi-generator 4; kubernetes 37: 7).
_PRIMITIVES = {
    "str": str,
    "int": int,
    "bool": bool,
    "float": (int, float),
    "datetime": str,
    "bytes": str,
}


def walk(value, typ, path: str = "") -> list[str]:
    """Problems of ``value`` against ``typ`` (an openapi type name or a key table), recursively:
    an unknown key names the allowed ones; a wrong type names both."""
    if isinstance(typ, str) and typ in TABLES:
        typ = TABLES[typ]
    if typ == "object":
        return []
    if isinstance(typ, str) and (m := re.fullmatch(r"[lL]ist\[(.+)\]", typ)):
        if not isinstance(value, list):
            return [f"{path}: expected a list ({typ}), got {type(value).__name__}"]
        return [p for i, v in enumerate(value) for p in walk(v, m.group(1), f"{path}[{i}]")]
    if isinstance(typ, str) and (m := re.fullmatch(r"dict\(str, (.+)\)|Dict\[str, (.+)\]", typ)):
        if not isinstance(value, dict):
            return [f"{path}: expected a mapping ({typ}), got {type(value).__name__}"]
        inner = m.group(1) or m.group(2)
        return [p for k, v in value.items() for p in walk(v, inner, f"{path}.{k}")]
    if isinstance(typ, str) and typ in _PRIMITIVES:
        ok = isinstance(value, _PRIMITIVES[typ]) and (typ == "bool" or not isinstance(value, bool))
        return [] if ok else [f"{path}: expected {typ}, got {type(value).__name__} {value!r}"]
    table = typ if isinstance(typ, dict) else openapi_model(typ)
    if table is None:
        return [f"{path}: no installed package ships the model {typ}"]
    if not isinstance(value, dict):
        return [f"{path}: expected an object ({typ if isinstance(typ, str) else 'keys'}), got {type(value).__name__}"]  # fmt: skip
    out = []
    for k, v in value.items():
        if k not in table:
            out.append(f"{path}.{k}: unknown key; allowed: {', '.join(sorted(table))}")
        else:
            out += walk(v, table[k], f"{path}.{k}")
    return out


def kserve_problems(doc) -> list[str]:
    return walk(doc, "V1alpha2LLMInferenceService", "LLMInferenceService")


#: The production-stack keys this cookbook writes, typed as the chart ``vllm-stack`` 0.1.12
#: documents them (``helm/README.md``, ``helm/values.yaml``). Not the chart's published schema.
PRODUCTION_STACK_KEYS: dict = {
    "servingEngineSpec": {
        "modelSpec": "list[ProductionStackModelSpec]",
    }
}
_MODEL_SPEC = {
    "name": "str", "repository": "str", "tag": "str", "modelURL": "str", "modelRevision": "str",
    "replicaCount": "int", "requestCPU": "int", "requestMemory": "str", "requestGPU": "int",
    "hf_token": {"secretName": "str", "secretKey": "str"},
    "env": "list[V1EnvVar]",
    "vllmConfig": {"enablePrefixCaching": "bool", "extraArgs": "list[str]"},
}  # fmt: skip
#: Key tables of the types no installed package ships a model for: kserve 0.21.0 names
#: ``V1alpha2LLMInferenceServiceSpec`` but does not ship it; production-stack is not on PyPI.
TABLES = {"V1alpha2LLMInferenceServiceSpec": LLMISVC_SPEC, "ProductionStackModelSpec": _MODEL_SPEC}


def production_stack_problems(doc) -> list[str]:
    return walk(doc, PRODUCTION_STACK_KEYS, "values")


def compose_problems(doc) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in compose_validator().iter_errors(doc)]  # fmt: skip


# ---- every target, every engine --------------------------------------------------------
def _contains(seq: list[str], sub: list[str]) -> bool:
    return any(seq[i : i + len(sub)] == sub for i in range(len(seq) - len(sub) + 1))


@pytest.mark.parametrize("target", GPU_TARGETS)
def test_every_target_renders_valid_files_with_the_same_engine_flags(target):
    cfg = recipes.resolve(target)
    texts = {
        "compose": render.compose(cfg, 2),
        "kserve": render.kserve(cfg, 2),
        "production-stack": render.production_stack(cfg, 2),
    }
    docs = {e: yaml.safe_load(t) for e, t in texts.items()}
    assert compose_problems(docs["compose"]) == []
    assert kserve_problems(docs["kserve"]) == []
    assert production_stack_problems(docs["production-stack"]) == []

    flags = cfg.cli_flags(weights=False)
    argvs = flagtable.check_config(cfg, render.renderings(cfg, 2), quiet=True)  # or FlagError
    assert tuple(argvs) == flagtable.RENDERINGS and len(argvs["compose"]) == 2
    assert argvs["shell"] == argvs["compose"][:1] == argvs["compose"][1:]
    for engine, runs in argvs.items():
        # truss serves its mounted weights and drafter (tests/config/test_recipes.py)
        if engine == "truss":
            continue
        for argv in runs:
            assert _contains(argv, flags), engine  # byte for byte, in order
            assert argv.count("--served-model-name") == 1, engine
            for d in cfg.drafters:  # the speculative drafter, pinned, inside --speculative-config
                spec = json.loads(argv[argv.index("--speculative-config") + 1])
                assert (spec["model"], spec.get("revision")) == (d.repo, d.revision), engine
    compose_cmd = argvs["compose"][0]
    assert compose_cmd == [cfg.model, *cfg.cli_flags(), "--host", "0.0.0.0", "--port", "8000"]
    assert argvs["compose"][0] == argvs["compose"][1]  # every replica the same command

    gpus, rev = cfg.gpu_count, cfg.revision
    svc = docs["compose"]["services"]["vllm-1"]["deploy"]["resources"]["reservations"]
    assert len(svc["devices"][0]["device_ids"]) == gpus and svc["memory"].endswith("g")
    spec = docs["kserve"]["spec"]
    res = spec["template"]["containers"][0]["resources"]
    assert res["limits"]["nvidia.com/gpu"] == str(gpus) and spec["replicas"] == 2
    assert spec["model"]["uri"] == f"hf://{cfg.model}" + (f":{rev}" if rev else "")
    ps = docs["production-stack"]["servingEngineSpec"]["modelSpec"][0]
    assert (ps["requestGPU"], ps["modelURL"], ps.get("modelRevision")) == (gpus, cfg.model, rev)
    assert ps["requestMemory"] == res["requests"]["memory"]
    if rev:
        assert ("--revision", rev) == tuple(argvs["production-stack"][0][-2:])
        assert compose_cmd[compose_cmd.index("--revision") + 1] == rev


def test_a_corrupt_flag_fails_the_check_naming_it_in_every_engine():
    cfg = recipes.resolve("h200", extra_args={"--max-num-seq": 64})
    with pytest.raises(FlagError) as err:
        flagtable.check_config(cfg, render.renderings(cfg))
    assert err.value.flags == ["--max-num-seq"]
    every = ", ".join(flagtable.RENDERINGS)
    said = "--max-num-seq does not exist in vLLM 0.32.0 (did you mean '--max-num-seqs'?)"
    assert f"{said} ({every})" in str(err.value)
    # what is checked is what the file says: corrupt one rendered text itself
    ok = recipes.resolve("h200")
    for engine, text in render.renderings(ok).items():
        texts = render.renderings(ok)
        texts[engine] = text.replace("--max-num-batched-tokens", "--max-num-batched-tokenz")
        with pytest.raises(FlagError) as err:
            flagtable.check_config(ok, texts, quiet=True)
        assert err.value.flags == ["--max-num-batched-tokenz"]
        said = "--max-num-batched-tokenz does not exist in vLLM 0.32.0 (did you mean '--max-num-batched-tokens'?)"
        assert f"{said} ({engine})." in str(err.value)  # fmt: skip
    with pytest.raises(FlagError, match="Unknown rendering 'helm': one of shell, docker"):
        flagtable.served_argvs("helm", "")


def test_a_value_the_release_lacks_fails_by_name():
    cfg = recipes.resolve("h200", extra_args={"--tool-call-parser": "qwen9_coder"})
    with pytest.raises(
        FlagError, match=r"--tool-call-parser qwen9_coder: .*\(shell, .*kserve"
    ) as err:
        flagtable.check_config(cfg, render.renderings(cfg))
    assert err.value.flags == ["--tool-call-parser"]


def test_the_kserve_walk_names_unknown_keys_and_wrong_types():
    doc = yaml.safe_load(render.kserve(recipes.resolve("h200")))
    main = doc["spec"]["template"]["containers"][0]
    main["argz"] = main.pop("args")
    doc["spec"]["replica"] = 2
    doc["spec"]["replicas"] = "2"
    main["resources"]["limits"]["nvidia.com/gpu"] = 1
    main["env"][0]["valueFrom"] = {"secretKeyRef": {"nme": "x"}}
    doc["metadata"]["labelz"] = {}
    probs = kserve_problems(doc)
    at = {p.split(":")[0]: p for p in probs}
    c = "LLMInferenceService.spec.template.containers[0]"
    assert "allowed:" in at[f"{c}.argz"] and " args," in at[f"{c}.argz"]  # V1Container's keys
    assert "allowed:" in at["LLMInferenceService.spec.replica"] and "replicas" in at["LLMInferenceService.spec.replica"]  # fmt: skip
    assert "expected int, got str" in at["LLMInferenceService.spec.replicas"]
    assert "expected str, got int" in at[f"{c}.resources.limits.nvidia.com/gpu"]
    assert f"{c}.env[0].valueFrom.secretKeyRef.nme" in at  # V1SecretKeySelector
    assert "LLMInferenceService.metadata.labelz" in at  # V1ObjectMeta, from kubernetes
    assert len(probs) == 6


def test_kserve_0210_ships_the_top_level_model_but_not_the_spec():
    """Why :data:`LLMISVC_SPEC` exists: if a kserve release ships the spec's model, use it."""
    assert set(openapi_model("V1alpha2LLMInferenceService")) == {"apiVersion", "kind", "metadata", "spec", "status"}  # fmt: skip
    assert openapi_model("V1alpha2LLMInferenceService")["spec"] == "V1alpha2LLMInferenceServiceSpec"
    assert openapi_model("V1alpha2LLMInferenceServiceSpec") is None
    assert importlib.metadata.version("kserve") == "0.21.0"
    assert "containers" in openapi_model("V1PodSpec")


def test_compose_and_production_stack_checks_name_what_is_wrong():
    doc = yaml.safe_load(render.compose(recipes.resolve("h200")))
    doc["services"]["vllm-0"]["gpus"] = "all"  # not a Compose Specification key in 1.29.2
    doc["services"]["vllm-1"]["ports"] = "8001:8000"
    probs = compose_problems(doc)
    assert any("services.vllm-0" in p and "'gpus'" in p for p in probs)
    assert any(p.startswith("services.vllm-1.ports") for p in probs)
    vals = yaml.safe_load(render.production_stack(recipes.resolve("h200")))
    spec = vals["servingEngineSpec"]["modelSpec"][0]
    spec["vllmConfig"]["extraArg"] = spec["vllmConfig"].pop("extraArgs")
    spec["requestGPU"] = "1"
    probs = sorted(production_stack_problems(vals))
    assert len(probs) == 2 and "requestGPU: expected int, got str" in probs[0]
    assert "extraArg: unknown key; allowed: enablePrefixCaching, extraArgs" in probs[1]


def test_the_stand_in_and_a_command_without_a_prefix_caching_choice_are_refused():
    with pytest.raises(RecipeError, match="GPU target"):
        render.kserve(recipes.resolve("cpu"))
    cfg = recipes.resolve("h200", extra_args={"--enable-prefix-caching": None})
    with pytest.raises(RecipeError, match="production-stack chart always passes one"):
        render.production_stack(cfg)


@pytest.mark.parametrize("replicas", [-1, 0, 1.5, "2", None, True])
def test_a_replica_count_that_is_not_a_whole_number_of_one_or_more_is_refused(replicas):
    from lab.fleet.render import compose, kserve, production_stack, renderings

    cfg = recipes.resolve("h200")
    for rendering in (renderings, compose, kserve, production_stack):
        with pytest.raises(RecipeError, match=r"pass a whole number of 1 or more"):
            rendering(cfg, replicas)
