"""Every answer is what the tool's listed output schema promises, and holds only finite numbers.

The schema is the one the MCP server lists for the tool (`tools/list` → outputSchema), read
through the real SDK client: what a client validates structured content against. JSON has no
NaN or infinity; pydantic writes them as null, which a `number` field rejects (the client
throws the answer away) and an optional one accepts (a silently wrong answer). So the answers'
numbers are also checked before serialization.

A hypothesis property runs every tool on arguments drawn from its input schema with realistic
values (test_properties.answerable_arguments, PROPERTY_EXAMPLES examples each), so that most get
an answer; the regression tests below are the cases an attack run found, each an internal error
or a non-finite number before the fix.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

import anyio
import jsonschema
import pytest
from hypothesis import given
from mcp import Client

from test_properties import PROFILE, answerable_arguments, call, network_bounded, no_network
from vllm_caching_mcp.advice.common import Result, ToolSpec
from vllm_caching_mcp.mcp_server import build_server
from vllm_caching_mcp.tools import ToolInputError, all_tools, run_tool

__all__ = ["no_network"]  # autouse: the network tools stay offline here too


@functools.cache
def listed_output_schemas() -> dict[str, dict[str, Any]]:
    async def listing() -> dict[str, dict[str, Any]]:
        async with Client(build_server()) as client:
            tools = (await client.list_tools()).tools
        return {t.name: t.output_schema for t in tools if t.output_schema is not None}

    return anyio.run(listing)


@functools.cache
def whole_output_schemas() -> dict[str, dict[str, Any]]:
    """Each tool's whole output schema, read as a client reads it: the resource its outline names."""

    async def read() -> dict[str, dict[str, Any]]:
        schemas = {}
        async with Client(build_server()) as client:
            for tool, listed in listed_output_schemas().items():
                uri = listed["$comment"].removeprefix("the whole schema: ")
                contents = (await client.read_resource(uri)).contents[0]
                schemas[tool] = json.loads(contents.text)  # type: ignore[union-attr]
        return schemas

    return anyio.run(read)


@functools.cache
def validators(tool: str) -> tuple[jsonschema.protocols.Validator, ...]:
    """The listed outline and the whole schema: an answer must conform to both."""
    found = []
    for schema in (listed_output_schemas()[tool], whole_output_schemas()[tool]):
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        found.append(cls(schema, format_checker=cls.FORMAT_CHECKER))
    return tuple(found)


def non_finite(value: Any, path: str = "") -> list[str]:
    """Where in a python-mode dump a float is NaN or infinite, or an int is too large for a float."""
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{path}={value}"]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**1023:
        return [f"{path}=<{value.bit_length()}-bit integer>"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in non_finite(v, f"{path}.{k}")]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in non_finite(v, f"{path}[{i}]")]
    return []


def assert_conforms(tool: str, result: Result) -> None:
    assert not non_finite(result.model_dump()), (tool, non_finite(result.model_dump()))
    for data in (result.model_dump(mode="json"), result.structured()):  # the full dump, and what is sent
        json.dumps(data, allow_nan=False)
        for checker in validators(tool):
            errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in checker.iter_errors(data)]
            assert not errors, (tool, errors[:5])


def answer(tool: str, arguments: dict[str, Any]) -> Result:
    result = run_tool(tool, arguments)
    assert_conforms(tool, result)
    return result


def refused(tool: str, arguments: dict[str, Any]) -> str:
    """The one-line tool error for ``arguments`` (any other exception fails the test)."""
    with pytest.raises(ToolInputError) as caught:
        run_tool(tool, arguments)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_every_tool_lists_an_output_schema() -> None:
    assert set(listed_output_schemas()) == {s.name for s in all_tools()}


@pytest.mark.parametrize("spec", all_tools(), ids=[s.name for s in all_tools()])
def test_every_answer_matches_the_listed_output_schema(spec: ToolSpec) -> None:
    @PROFILE
    @given(answerable_arguments(spec))
    def check(arguments: dict[str, Any]) -> None:
        result = call(spec, network_bounded(spec, arguments))
        if result is not None:
            assert_conforms(spec.name, result)

    check()


# -- size_offload at its ceilings, and through the server (its input bounds: test_size_offload.py) -----

LLAMA = {"model": "llama-3.1-8b", "version": "0.33.0"}


def test_size_offload_at_its_ceilings_answers_within_its_schema() -> None:
    answer(
        "size_offload",
        {
            **LLAMA,
            "gpu_memory_gib": 4096,
            "weights_gib_per_gpu": 0,
            "kv_offloading_size_gib": 2**20,
            "host_ram_gib": 2**20,
            "max_model_len": 2**31,
            "typical_context_tokens": 2**31,
            "warm_sessions": 2**31,
        },
    )
    answer("size_offload", {**LLAMA, "gpu_memory_gib": 5e-324, "kv_offloading_size_gib": 5e-324})


@pytest.mark.parametrize("number", ["Infinity", 1e308])
def test_the_server_turns_an_impossible_size_into_a_tool_error_naming_the_field(number: str | float) -> None:
    # The SDK client serializes a float infinity as null; the string "Infinity" reaches the server.
    # The SDK checks the arguments against the listed input schema before the tool sees them.
    async def ask() -> tuple[bool, str]:
        async with Client(build_server()) as client:
            result = await client.call_tool("size_offload", {**LLAMA, "gpu_memory_gib": number})
        return result.is_error, result.content[0].text

    is_error, text = anyio.run(ask)
    assert is_error and "gpu_memory_gib" in text and "Traceback" not in text


# -- numbers read from documents and dumps ----------------------------------------------------------

BIG = "9" * 400  # a literal no float holds: float() reads it as infinity, int() as a 1329-bit number


def review(text: str, name: str = "run.sh") -> Result:
    return answer("review_deployment", {"documents": [{"name": name, "text": text}]})


@pytest.mark.parametrize(
    "flags",
    [
        "--kv-offloading-size {big}",
        "--kv-offloading-size 64 --tensor-parallel-size {big}",
        "--max-model-len {big}",
        "--cpu-offload-gb {big}",
    ],
)
def test_review_of_a_flag_too_large_for_a_float_stays_finite(flags: str) -> None:
    review(f"vllm serve m {flags.format(big=BIG)}\n")


@pytest.mark.parametrize("key", ["cpu_bytes_to_use", "cpu_bytes_to_use_per_rank"])
@pytest.mark.parametrize("number", [BIG, "1e999"], ids=["400 digits", "1e999"])
def test_review_of_a_transfer_config_size_too_large_for_a_float_stays_finite(key: str, number: str) -> None:
    config = '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"%s":%s}}'
    review(f"vllm serve m --kv-transfer-config '{config % (key, number)}'\n")


@pytest.mark.parametrize("memory", ["1.2.3Gi", ".", f"{BIG}Gi"], ids=["1.2.3Gi", "dot", "400 digits Gi"])
def test_review_of_a_memory_limit_that_is_no_number_answers(memory: str) -> None:
    manifest = f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm}}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.22.1
        args: ["vllm", "serve", "m", "--kv-offloading-size", "64"]
        resources:
          limits: {{memory: "{memory}"}}
"""
    result = review(manifest, "deployment.yaml")
    assert "container_memory_limit_gib" not in result.model_dump()["workloads"][0]["facts"]


COUNTERS = "# TYPE vllm:prefix_cache_queries counter\n# TYPE vllm:prefix_cache_hits counter\n"


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf", "1e308"])
def test_diagnose_sets_aside_a_metrics_sample_that_is_not_a_finite_count(value: str) -> None:
    metrics = f"{COUNTERS}vllm:prefix_cache_queries_total {value}\nvllm:prefix_cache_hits_total 5\n"
    result = answer("diagnose", {"metrics_before": metrics, "symptoms": ["low_hit_rate"]})
    assert any("vllm:prefix_cache_queries" in note for note in result.model_dump()["metric_notes"])


@pytest.mark.parametrize("key", ["cpu_bytes_to_use", "kv_offloading_size_gib", "lmcache_max_local_cpu_size_gib"])
@pytest.mark.parametrize("number", [float("inf"), float("nan"), 10**400], ids=["inf", "nan", "10**400"])
def test_render_refuses_a_size_offload_result_with_a_size_past_any_machine(key: str, number: float) -> None:
    arguments = {"backend": "lmcache", "model": "m", "size_offload": {key: number}}
    assert refused("render_config", arguments).startswith(f"size_offload.{key}:")


def test_render_of_a_pd_backend_for_a_release_before_the_knowledge_names_the_version() -> None:
    # An AssertionError escaped here: no P/D proxy is recorded for a release older than the oldest known.
    message = refused("render_config", {"backend": "nixl_pd", "model": "m", "version": "0.3.0"})
    assert message.startswith("version:")


def test_render_of_a_choice_with_a_version_that_is_no_release_names_the_version() -> None:
    # packaging's InvalidVersion escaped when a native_tiering choice met a version such as 'latest'.
    choice = run_tool("choose_backend", {"tiers": ["cpu", "nvme"]}).model_dump(mode="json")
    message = refused("render_config", {"model": "m", "version": "latest", "choice": choice})
    assert message.startswith("version:")
