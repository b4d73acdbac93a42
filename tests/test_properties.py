"""Generated inputs against every tool: nothing escapes but a tool input error that names a field.

For each tool in the registry, hypothesis builds arguments from the tool's own input schema
(values inside the bounds, drawn partly from the knowledge so the interesting branches run)
and arguments that break it (wrong types, out-of-range numbers, NaN and infinity, unknown
keys). Through `tools.run_tool`, the way both adapters call the tools, every call must either
answer or raise `ToolInputError` whose message names one of the tool's fields. Every answer
must hold only finite numbers, sizes, times and counts must not be negative, and a rendered
config must parse back in its own format. The network tools run offline (their
snapshot answers); a closed loopback port stands in for the network in case one tries.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from vllm_caching_mcp.advice.common import ToolSpec
from vllm_caching_mcp.knowledge import load_knowledge
from vllm_caching_mcp.tools import ToolInputError, all_tools, run_tool

EXAMPLES = int(os.environ.get("PROPERTY_EXAMPLES", "80"))  # raise it to hunt: PROPERTY_EXAMPLES=2000
PROFILE = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same examples on every run: a CI failure reproduces locally
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)

KNOWLEDGE = load_knowledge()
VERSIONS = [str(v) for v in KNOWLEDGE.release_versions()]
LMCACHE_VERSIONS = [str(v) for v in KNOWLEDGE.release_versions("lmcache")] if "lmcache" in KNOWLEDGE.releases else []
SETTING_NAMES = sorted({s.name for s in KNOWLEDGE.settings})[:400]
MODEL_NAMES = sorted({m.name for m in KNOWLEDGE.models} | {m.id for m in KNOWLEDGE.models})
GPU_IDS = sorted(g.id for g in KNOWLEDGE.hardware.gpus)
BUG_REFS = sorted(f"{b.repo}#{b.number}" for b in KNOWLEDGE.bugs)
DEPLOYMENTS = sorted((REPO / "tests" / "data" / "deployments").glob("*"))
DEPLOYMENT_TEXTS = [p.read_text(encoding="utf-8") for p in DEPLOYMENTS if p.is_file()]
METRICS_TEXT = (
    "# TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total 1000\n"
    "vllm:prefix_cache_hits_total 100\nvllm:num_preemptions_total 3\n"
)

# Numbers under these result keys are sizes, times or counts: never negative.
NON_NEGATIVE_KEY = re.compile(
    r"(gib|gb|mib|bytes|_b|seconds|_s|_ms|tokens|blocks|sessions|count|layers|heads|ranks|gpus|replicas|size|ttl)$"
)


# -- strategies built from each tool's JSON schema ------------------------------------------------------


def _texts_for(field: str) -> st.SearchStrategy[str]:
    """Realistic values for well-known fields, mixed with arbitrary text so the parsers meet junk too."""
    junk = st.text(max_size=60)
    realistic: list[str] = []
    if "version" in field:
        realistic = [*VERSIONS, *LMCACHE_VERSIONS, "0.9.0", "99.0.0", "v0.22.1", "latest", "0.22"]
    elif field == "name":
        realistic = [*SETTING_NAMES, "vllm", "kv-cache-a", "--kv-offloading-size", "OffloadingConnector"]
    elif field == "model":
        realistic = [*MODEL_NAMES, "meta-llama/Llama-3.1-8B-Instruct"]
    elif field == "gpu":
        realistic = [*GPU_IDS, "h100", "B200"]
    elif field == "text":
        return st.one_of(
            st.sampled_from(DEPLOYMENT_TEXTS or [""]), junk, st.just("vllm serve m --kv-offloading-size 64")
        )
    elif field.startswith("metrics"):
        return st.one_of(st.just(METRICS_TEXT), junk)
    elif field == "image":
        realistic = ["vllm/vllm-openai:v0.22.1", "vllm/vllm-openai:latest", "lmcache/vllm-openai:v0.3.9"]
    elif field == "config_path":
        return st.sampled_from(["/nonexistent/config.json", "/dev/null", str(REPO), "/proc/self"])
    elif field == "bugs":
        realistic = [*BUG_REFS, "vllm-project/vllm#1", "https://github.com/vllm-project/vllm/issues/2"]
    if realistic:
        return st.one_of(st.sampled_from(realistic), junk)
    return junk


def _from_schema(schema: dict[str, Any], defs: dict[str, Any], field: str, depth: int = 0) -> st.SearchStrategy[Any]:
    if "$ref" in schema:
        return _from_schema(defs[schema["$ref"].split("/")[-1]], defs, field, depth)
    if "anyOf" in schema:
        return st.one_of(*(_from_schema(s, defs, field, depth) for s in schema["anyOf"]))
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        low = schema.get("minimum", schema.get("exclusiveMinimum", -(2**31)) + ("exclusiveMinimum" in schema))
        high = schema.get("maximum", 2**40)
        return st.integers(min_value=low, max_value=high)
    if kind == "number":
        low = schema.get("minimum", schema.get("exclusiveMinimum", -1e12))
        high = schema.get("maximum", 1e12)
        return st.floats(
            min_value=low,
            max_value=high,
            exclude_min="exclusiveMinimum" in schema,
            allow_nan=False,
            allow_infinity=False,
        )
    if kind == "string":
        text = _texts_for(field)
        return text.filter(lambda s: schema.get("minLength", 0) <= len(s) <= schema.get("maxLength", 10**7))
    if kind == "array":
        items = _from_schema(schema.get("items", {}), defs, field, depth + 1)
        return st.lists(items, max_size=min(schema.get("maxItems", 4), 4))
    if kind == "object" and "properties" in schema and depth < 3:
        return _object(schema, defs, depth + 1)
    if kind == "object":
        return st.dictionaries(st.text(max_size=10), _junk_scalar(), max_size=3)
    return _junk()


def _object(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    required = set(schema.get("required", []))
    props = schema.get("properties", {})
    return st.fixed_dictionaries(
        {k: _from_schema(v, defs, k, depth) for k, v in props.items() if k in required},
        optional={k: _from_schema(v, defs, k, depth) for k, v in props.items() if k not in required},
    )


def _junk_scalar() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=30),
    )


def _junk() -> st.SearchStrategy[Any]:
    return st.recursive(
        _junk_scalar(),
        lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
        max_leaves=6,
    )


def valid_arguments(spec: ToolSpec) -> st.SearchStrategy[dict[str, Any]]:
    schema = spec.request.model_json_schema()
    return _object(schema, schema.get("$defs", {}))


def broken_arguments(spec: ToolSpec) -> st.SearchStrategy[dict[str, Any]]:
    """Valid-shaped arguments with one field replaced by junk, or an unknown key added."""
    schema = spec.request.model_json_schema()
    names = sorted(schema["properties"])

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        arguments = dict(draw(valid_arguments(spec)))
        if draw(st.booleans()):
            arguments[draw(st.sampled_from(names))] = draw(_junk())
        else:
            arguments[draw(st.sampled_from(["unknown_field", "versoin", "__class__"]))] = draw(_junk_scalar())
        return arguments

    return build()


def field_names(spec: ToolSpec) -> set[str]:
    schema = spec.request.model_json_schema()
    names = set(schema["properties"])
    for definition in schema.get("$defs", {}).values():
        names |= set(definition.get("properties", {}))
    return names


# -- what every answer must satisfy -------------------------------------------------------------------


def numbers(value: Any, key: str = "") -> list[tuple[str, float]]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [(key, float(value))]
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in numbers(v, str(k))]
    if isinstance(value, list):
        return [n for v in value for n in numbers(v, key)]
    return []


def check_rendered(files: list[dict[str, Any]]) -> None:
    for file in files:
        text, kind = file["content"], file["format"]
        if kind in ("kubernetes", "lmcache_yaml"):
            assert list(yaml.safe_load_all(text)), file["name"]
        elif kind == "kv_transfer_config":
            json.loads(text)
        elif kind in ("vllm_serve", "docker_run"):
            assert shlex.split(text, comments=True), file["name"]
        elif kind == "env_file":
            for line in text.splitlines():
                assert not line.strip() or line.startswith("#") or re.match(r"[A-Za-z_][A-Za-z0-9_]*=", line), line


def call(spec: ToolSpec, arguments: dict[str, Any]) -> None:
    try:
        result = run_tool(spec.name, arguments)
    except ToolInputError as exc:
        message = str(exc)
        assert message.strip(), spec.name
        named = {n for n in field_names(spec) if re.search(rf"\b{re.escape(n)}\b", message)}
        assert named or message.startswith(("arguments:", "unknown_field", "versoin", "__class__")), message
        assert "Traceback" not in message
        return
    data = result.model_dump(mode="json")
    assert result.summary().strip()
    for key, number in numbers(data):
        assert math.isfinite(number), (key, number)
        if NON_NEGATIVE_KEY.search(key.lower()):
            assert number >= 0, (key, number)
    if spec.name == "render_config":
        check_rendered(data["files"])


@pytest.fixture(autouse=True)
def no_network(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Network tools reach a closed port on loopback and keep their caches in a temporary directory."""
    monkeypatch.setenv("VLLM_CACHING_MCP_GITHUB_API", "http://127.0.0.1:9")
    monkeypatch.setenv("VLLM_CACHING_MCP_REGISTRY_MIRROR", "http://127.0.0.1:9")
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    for name in ("GITHUB_TOKEN", "GH_TOKEN", "VLLM_CACHING_MCP_REGISTRY_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def _network_bounded(spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    # Input handling is the subject here; the network paths (retries with backoff against a closed
    # port cost a second a call) are exercised by tests/test_faults.py. Junk in `offline` stays junk.
    if spec.open_world and isinstance(arguments.get("offline", False), bool):
        arguments = {**arguments, "offline": True}
    return arguments


@pytest.mark.parametrize("spec", all_tools(), ids=[s.name for s in all_tools()])
def test_arguments_within_the_schema_answer_or_name_a_field(spec: ToolSpec) -> None:
    @PROFILE
    @given(valid_arguments(spec))
    def check(arguments: dict[str, Any]) -> None:
        call(spec, _network_bounded(spec, arguments))

    check()


@pytest.mark.parametrize("spec", all_tools(), ids=[s.name for s in all_tools()])
def test_arguments_outside_the_schema_are_a_tool_error_naming_a_field(spec: ToolSpec) -> None:
    @PROFILE
    @given(broken_arguments(spec))
    def check(arguments: dict[str, Any]) -> None:
        call(spec, _network_bounded(spec, arguments))

    check()
