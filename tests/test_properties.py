"""Generated inputs against every tool: nothing escapes but a tool input error that names a field.

For each tool in the registry, hypothesis builds arguments from the tool's own input schema
(values inside the bounds, drawn partly from the knowledge so the interesting branches run)
and arguments that break it (wrong types, out-of-range numbers, NaN and infinity, unknown
keys). Through `tools.run_tool`, the way both adapters call the tools, every call must either
answer or raise `ToolInputError` whose message names one of the tool's fields. Every answer
must hold only finite numbers, sizes, times and counts must not be negative, and a rendered
config must parse back in its own format. The network tools run offline (their
snapshot answers); a closed loopback port stands in for the network in case one tries.
tests/test_output_schemas.py checks the same answers against the tools' output schemas.

PROPERTY_EXAMPLES sets the examples per property test (default 80: seconds). The long run makes
24 property tests (8 tools × 2 here, 8 in test_output_schemas.py) × 4,200 = 100,800 tool calls,
about 12 minutes on two cores:

    PROPERTY_EXAMPLES=4200 python -m pytest -q -p no:cacheprovider tests/test_properties.py tests/test_output_schemas.py
"""

from __future__ import annotations

import atexit
import functools
import json
import math
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from vllm_caching_mcp.advice.common import Result, ToolSpec
from vllm_caching_mcp.knowledge import load_knowledge
from vllm_caching_mcp.tools import ToolInputError, all_tools, run_tool

EXAMPLES = int(os.environ.get("PROPERTY_EXAMPLES", "80"))  # raise it to hunt: see the module docstring
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
RULE_IDS = sorted(p.id for p in KNOWLEDGE.pitfalls)
# Values a user would type for fields without a list above (render_config's paths, hosts, bucket...).
TEXTS_BY_FIELD: dict[str, list[str]] = {
    "namespace": ["default", "serving"],
    "disk": ["/mnt/nvme0/lmcache", "/data/kv"],
    "gds": ["/mnt/gds0"],
    "lmcache_config_file": ["/etc/lmcache/lmcache.yaml"],
    "bucket": ["kv-cache"],
    "endpoint_override": ["http://minio.storage.svc:9000"],
    "prefix": ["", "vllm/"],
    **{host: ["10.0.0.5", "lmcache-server"] for host in ("this_instance", "prefill", "decode", "lmcache_server")},
    "controller": ["10.0.0.6"],
    "disabled_rules": RULE_IDS,
    "description": ["TTFT went up after enabling CPU offload", "the prefix cache hit rate is low"],
}
TEXTS_BY_TOOL_FIELD = {("render_config", "name"): ["vllm", "kv-cache-a"], ("render_config", "model"): ["m"]}
# Hugging Face config.json files of four attention layouts: GQA, sliding window, linear attention, MLA.
HF_CONFIGS: dict[str, dict[str, Any]] = {
    "llama": {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    },
    "gemma3": {
        "num_hidden_layers": 62,
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "head_dim": 128,
        "sliding_window": 1024,
        "sliding_window_pattern": 6,
        "max_position_embeddings": 131072,
    },
    "qwen3-next": {
        "num_hidden_layers": 48,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "full_attention_interval": 4,
        "linear_num_value_heads": 32,
        "linear_num_key_heads": 16,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "max_position_embeddings": 262144,
    },
    "deepseek": {
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "hidden_size": 7168,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "max_position_embeddings": 163840,
    },
}
_CONFIG_DIR = Path(tempfile.mkdtemp(prefix="hf-configs-"))
atexit.register(shutil.rmtree, _CONFIG_DIR, True)
for _name, _config in HF_CONFIGS.items():
    (_CONFIG_DIR / _name).mkdir()
    (_CONFIG_DIR / _name / "config.json").write_text(json.dumps(_config), encoding="utf-8")
CONFIG_PATHS = [str(_CONFIG_DIR / name) for name in HF_CONFIGS]
# A tool's own answer is a realistic argument of another: render_config takes both.
ANSWERS_AS_ARGUMENTS = {"size_offload": "size_offload", "choice": "choose_backend"}
_ANSWERED_ARGUMENTS: dict[str, list[dict[str, Any]]] = {
    "size_offload": [
        {"model": "llama-3.1-70b", "tensor_parallel_size": 8, "host_ram_gib": 2048},
        {"model": "llama-3.1-8b", "kv_offloading_size_gib": 64, "offload_backend": "lmcache"},
        {"model": "llama-3.1-8b", "warm_sessions": 100, "version": "0.11.0"},
    ],
    "choose_backend": [
        {},
        {"tiers": ["cpu", "nvme"]},
        {"topology": {"nodes": 4, "share_cache_across_instances": True}},
    ],
}
# Request fields of which exactly one must be given (render_config: at least one; here one).
ONE_OF_FIELDS = {"size_offload": ("model", "config_path", "architecture"), "render_config": ("backend", "choice")}


@functools.cache
def tool_answers(tool: str) -> list[dict[str, Any]]:
    return [run_tool(tool, arguments).model_dump(mode="json") for arguments in _ANSWERED_ARGUMENTS[tool]]


# Numbers that once escaped as OverflowError or came back as NaN: JSON's 1e999 and "Infinity" (both
# read as infinity), the largest doubles, integers past any float, and NaN.
EXTREME_NUMBERS: list[Any] = [
    float("inf"),
    float("-inf"),
    float("nan"),
    "Infinity",
    "-Infinity",
    "NaN",
    "1e999",
    1e308,
    -1e308,
    sys.float_info.max,
    sys.float_info.min,
    5e-324,
    2**63,
    10**400,
]

# Numbers under these result keys are sizes, times or counts: never negative. Except a balance, whose
# schema says what its sign means (size_offload's RAM left after the tier: negative = overcommitted).
NON_NEGATIVE_KEY = re.compile(
    r"(gib|gb|mib|bytes|_b|seconds|_s|_ms|tokens|blocks|sessions|count|layers|heads|ranks|gpus|replicas|size|ttl)$"
)
SIGNED_KEYS = {"host_ram_left_gib"}


# -- strategies built from each tool's JSON schema ------------------------------------------------------


def _realistic_texts(field: str, tool: str | None = None) -> list[str]:
    """Values a user would give for a well-known field; empty where any text will do."""
    if (tool, field) in TEXTS_BY_TOOL_FIELD:
        return TEXTS_BY_TOOL_FIELD[tool, field]
    if "version" in field:
        return [*VERSIONS, *LMCACHE_VERSIONS, "0.9.0", "99.0.0", "v0.22.1", "latest", "0.22"]
    if field == "name":
        return [*SETTING_NAMES, "vllm", "kv-cache-a", "--kv-offloading-size", "OffloadingConnector"]
    if field == "model":
        return [*MODEL_NAMES, "meta-llama/Llama-3.1-8B-Instruct"]
    if field == "gpu":
        return [*GPU_IDS, "h100", "B200"]
    if field == "text":
        return [*DEPLOYMENT_TEXTS, "vllm serve m --kv-offloading-size 64"]
    if field.startswith("metrics"):
        return [METRICS_TEXT]
    if field in ("image", "lmcache_image"):
        return ["vllm/vllm-openai:v0.22.1", "vllm/vllm-openai:latest", "lmcache/vllm-openai:v0.3.9"]
    if field == "config_path":
        return [*CONFIG_PATHS, "/nonexistent/config.json", "/dev/null", str(REPO), "/proc/self"]
    if field == "bugs":
        return [*BUG_REFS, "vllm-project/vllm#1", "https://github.com/vllm-project/vllm/issues/2"]
    return TEXTS_BY_FIELD.get(field, [])


def _texts_for(field: str, realistic_for: str | None) -> st.SearchStrategy[str]:
    """Realistic values for well-known fields, mixed with arbitrary text so the parsers meet junk too
    (only the realistic values, where a field has them, when ``realistic_for`` names the tool)."""
    junk = st.text(max_size=60)
    values = _realistic_texts(field, realistic_for)
    if field == "config_path":
        return st.sampled_from(values)
    if not values:
        return junk
    return st.sampled_from(values) if realistic_for else st.one_of(st.sampled_from(values), junk)


def _from_schema(
    schema: dict[str, Any], defs: dict[str, Any], field: str, depth: int = 0, realistic_for: str | None = None
) -> st.SearchStrategy[Any]:
    def inner(sub: dict[str, Any], name: str = field, deeper: int = depth) -> st.SearchStrategy[Any]:
        return _from_schema(sub, defs, name, deeper, realistic_for)

    if "$ref" in schema:
        return inner(defs[schema["$ref"].split("/")[-1]])
    if "anyOf" in schema:
        return st.one_of(*(inner(s) for s in schema["anyOf"]))
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    # Without a maximum the schema admits any number, so the strategy draws the largest ones too.
    if kind == "integer":
        low = schema.get("minimum", schema.get("exclusiveMinimum", -(2**31)) + ("exclusiveMinimum" in schema))
        high = schema.get("maximum", 2**70)
        return st.integers(min_value=low, max_value=high)
    if kind == "number":
        low = schema.get("minimum", schema.get("exclusiveMinimum", -sys.float_info.max))
        high = schema.get("maximum", sys.float_info.max)
        return st.floats(
            min_value=low,
            max_value=high,
            exclude_min="exclusiveMinimum" in schema,
            allow_nan=False,
            allow_infinity=False,
        )
    if kind == "string":
        text = _texts_for(field, realistic_for)
        return text.filter(lambda s: schema.get("minLength", 0) <= len(s) <= schema.get("maxLength", 10**7))
    if kind == "array":
        items = inner(schema.get("items", {}), deeper=depth + 1)
        return st.lists(items, max_size=min(schema.get("maxItems", 4), 4))
    if kind == "object" and "properties" in schema and depth < 3:
        return _object(schema, defs, depth + 1, realistic_for)
    if kind == "object" and realistic_for and field in ANSWERS_AS_ARGUMENTS:
        return st.sampled_from(tool_answers(ANSWERS_AS_ARGUMENTS[field]))
    if kind == "object":
        return st.dictionaries(st.text(max_size=10), _junk_scalar(), max_size=3)
    return _junk()


def _object(
    schema: dict[str, Any], defs: dict[str, Any], depth: int = 0, realistic_for: str | None = None
) -> st.SearchStrategy[dict[str, Any]]:
    required = set(schema.get("required", []))
    props = schema.get("properties", {})
    return st.fixed_dictionaries(
        {k: _from_schema(v, defs, k, depth, realistic_for) for k, v in props.items() if k in required},
        optional={k: _from_schema(v, defs, k, depth, realistic_for) for k, v in props.items() if k not in required},
    )


def _junk_scalar() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(EXTREME_NUMBERS),
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


def answerable_arguments(spec: ToolSpec) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments within the schema and, where a field has them, with realistic values only: most of
    them get an answer, so the arithmetic behind it runs on every number the schema admits."""
    schema = spec.request.model_json_schema()
    arguments = _object(schema, schema.get("$defs", {}), realistic_for=spec.name)
    sources = ONE_OF_FIELDS.get(spec.name)
    if sources is None:
        return arguments

    @st.composite
    def with_one_source(draw: st.DrawFn) -> dict[str, Any]:
        drawn = {k: v for k, v in draw(arguments).items() if k not in sources}
        source = draw(st.sampled_from(sources))
        field = schema["properties"][source]
        value = draw(
            _from_schema(field, schema.get("$defs", {}), source, realistic_for=spec.name).filter(
                lambda v: v is not None
            )
        )
        return {**drawn, source: value}

    return with_one_source()


def numeric_branches(field: dict[str, Any]) -> list[dict[str, Any]]:
    """The number or integer schemas a field admits: itself, or its anyOf branches."""
    return [s for s in (field, *field.get("anyOf", [])) if s.get("type") in ("number", "integer")]


def numeric_fields(schema: dict[str, Any]) -> list[str]:
    return sorted(k for k, v in schema["properties"].items() if numeric_branches(v))


def broken_arguments(spec: ToolSpec) -> st.SearchStrategy[dict[str, Any]]:
    """Valid-shaped arguments with one field replaced by junk or a numeric one by an extreme number,
    or an unknown key added."""
    schema = spec.request.model_json_schema()
    names = sorted(schema["properties"])
    numeric = numeric_fields(schema)
    how = ["junk", "unknown key", *(["extreme number"] if numeric else [])]

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        arguments = dict(draw(valid_arguments(spec)))
        match draw(st.sampled_from(how)):
            case "junk":
                arguments[draw(st.sampled_from(names))] = draw(_junk())
            case "extreme number":
                arguments[draw(st.sampled_from(numeric))] = draw(st.sampled_from(EXTREME_NUMBERS))
            case _:
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


def call(spec: ToolSpec, arguments: dict[str, Any]) -> Result | None:
    """The tool's answer to ``arguments`` after checking it, or None after checking its input error."""
    try:
        result = run_tool(spec.name, arguments)
    except ToolInputError as exc:
        message = str(exc)
        assert message.strip(), spec.name
        named = {n for n in field_names(spec) if re.search(rf"\b{re.escape(n)}\b", message)}
        assert named or message.startswith(("arguments:", "unknown_field", "versoin", "__class__")), message
        assert "Traceback" not in message and "\n" not in message, message
        return None
    assert result.summary().strip()
    # The python-mode dump: the JSON one has already turned NaN and infinity into null.
    for key, number in numbers(result.model_dump()):
        assert math.isfinite(number), (key, number)
        if NON_NEGATIVE_KEY.search(key.lower()) and key not in SIGNED_KEYS:
            assert number >= 0, (key, number)
    if spec.name == "render_config":
        check_rendered(result.model_dump(mode="json")["files"])
    return result


@pytest.fixture(autouse=True)
def no_network(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Network tools reach a closed port on loopback and keep their caches in a temporary directory."""
    monkeypatch.setenv("VLLM_CACHING_MCP_GITHUB_API", "http://127.0.0.1:9")
    monkeypatch.setenv("VLLM_CACHING_MCP_REGISTRY_MIRROR", "http://127.0.0.1:9")
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    for name in ("GITHUB_TOKEN", "GH_TOKEN", "VLLM_CACHING_MCP_REGISTRY_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def network_bounded(spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    # Input handling is the subject here; the network paths (retries with backoff against a closed
    # port cost a second a call) are exercised by tests/test_faults.py. Junk in `offline` stays junk.
    if spec.open_world and isinstance(arguments.get("offline", False), bool):
        arguments = {**arguments, "offline": True}
    return arguments


@pytest.mark.parametrize("spec", all_tools(), ids=[s.name for s in all_tools()])
def test_every_numeric_argument_has_a_ceiling(spec: ToolSpec) -> None:
    """A number without a maximum lets 1e308 into the arithmetic (OverflowError, NaN answers)."""
    schema = spec.request.model_json_schema()
    models = {spec.request.__name__: schema, **schema.get("$defs", {})}
    unbounded = [
        f"{model}.{name}"
        for model, definition in models.items()
        for name, field in definition.get("properties", {}).items()
        for branch in numeric_branches(field)
        if not math.isfinite(branch.get("maximum", branch.get("exclusiveMaximum", math.inf)))
    ]
    assert not unbounded, f"{spec.name}: numeric fields without a maximum: {unbounded}"


@pytest.mark.parametrize("spec", all_tools(), ids=[s.name for s in all_tools()])
def test_arguments_within_the_schema_answer_or_name_a_field(spec: ToolSpec) -> None:
    @PROFILE
    @given(valid_arguments(spec))
    def check(arguments: dict[str, Any]) -> None:
        call(spec, network_bounded(spec, arguments))

    check()


@pytest.mark.parametrize("spec", all_tools(), ids=[s.name for s in all_tools()])
def test_arguments_outside_the_schema_are_a_tool_error_naming_a_field(spec: ToolSpec) -> None:
    @PROFILE
    @given(broken_arguments(spec))
    def check(arguments: dict[str, Any]) -> None:
        call(spec, network_bounded(spec, arguments))

    check()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@functools.cache
def a_real_choice() -> dict[str, Any]:
    result = run_tool("choose_backend", {"version": VERSIONS[-1], "tiers": ["cpu", "nvme"]})
    return dict(result.model_dump(mode="json"))


def _replace_one(value: Any, path: list[int], replacement: Any) -> Any:
    """``value`` with the subtree that ``path`` picks (child indexes, in key order) replaced."""
    if not path or not isinstance(value, dict | list) or not value:
        return replacement
    keys = list(value) if isinstance(value, dict) else list(range(len(value)))
    key = keys[path[0] % len(keys)]
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[key] = _replace_one(value[key], path[1:], replacement)  # type: ignore[index]
    return copy


def test_a_choice_of_any_shape_renders_or_names_the_field() -> None:
    """A choose_backend result passed back with any part of it replaced by any JSON value (a list for the
    backend, a number for the tiers, ...): render_config answers or says what is wrong with `choice`."""
    spec = next(s for s in all_tools() if s.name == "render_config")

    @PROFILE
    @given(
        st.sampled_from(["recommendation", "version_context"]), st.lists(st.integers(0, 50), max_size=3), JSON_VALUES
    )
    def check(part: str, path: list[int], replacement: Any) -> None:
        choice = dict(a_real_choice())
        choice[part] = _replace_one(choice[part], path, replacement)
        call(spec, {"choice": choice, "model": MODEL_NAMES[0]})

    check()
