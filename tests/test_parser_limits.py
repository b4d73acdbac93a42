"""Inputs built to exhaust the deployment and metrics parsers, through `run_tool` as both adapters call it.

Each case comes from an attack run (issue 20): YAML alias bombs, nesting that PyYAML's composer
recurses through, values the safe constructor cannot build, numbers that overflow, a shell text
with tens of thousands of servers, /metrics lines that prometheus_client's parser reads in
quadratic time, and NaN counters. Every one must end in a result with finite numbers or in a
one-line ToolInputError that names the field (``documents[i].text`` for review_deployment,
``deployment[i].text`` for diagnose, ``metrics_before`` / ``metrics_after``).

`test_parsers_scale_linearly` is the one slow test (a few seconds): it times inputs of size n
and 4n and expects a ratio near 4, far from the 16 of a quadratic parser.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

import reading
from vllm_caching_mcp.advice.common import Result
from vllm_caching_mcp.advice.diagnose import DiagnoseResult
from vllm_caching_mcp.tools import ToolInputError, run_tool

IMAGE = "vllm/vllm-openai:v0.20.2"
TOGETHER = 5_000_000  # characters in all the documents of one call
TIERING = (
    '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":%s}}'
)


# Every bound is checked on one release, with every finding at its own place.
review = functools.partial(reading.review, version="0.20.2")


def diagnose(*documents: tuple[str, str]) -> DiagnoseResult:
    return metrics(symptoms=["ttft_high"], deployment=[{"name": n, "text": t} for n, t in documents])


def metrics(**arguments: Any) -> DiagnoseResult:
    """diagnose with these arguments, vLLM 0.20.2 unless they say."""
    result = run_tool("diagnose", {"version": "0.20.2"} | arguments)
    assert isinstance(result, DiagnoseResult)
    return result


# The two tools that read deployments, and what each calls the documents.
READERS: list[tuple[Callable[..., Result], str]] = [(review, "documents"), (diagnose, "deployment")]


def refused(call: Callable[[], Result], pattern: str) -> str:
    """The call's ToolInputError message, which must be one line matching ``pattern`` (from its start)."""
    with pytest.raises(ToolInputError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message, message
    assert len(message) < 600, message[:600]
    assert re.match(pattern, message), message
    return message


def finite_numbers(result: Result) -> list[float]:
    """Every number in the answer as the client receives it; a NaN there would reach it as null."""
    found: list[float] = []

    def walk(value: Any) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, (int, float)):
            found.append(float(value))
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(result.model_dump())
    assert all(math.isfinite(v) for v in found), [v for v in found if not math.isfinite(v)]
    return found


def alias_bomb(levels: int) -> str:
    """Nine aliases of the level below at each level: 9**levels nodes from ~50 bytes a level."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- YAML


@pytest.mark.parametrize(("call", "field"), READERS)
def test_an_alias_bomb_is_refused_naming_the_document(call: Callable[..., Result], field: str) -> None:
    # 9**6 = 531,441 nodes from 300 bytes; the old reader walked every one (and 9**7 took minutes).
    text = "kind: ConfigMap\n---\n" + alias_bomb(6)
    refused(
        lambda: call(("serve.sh", "vllm serve m --max-model-len 8192"), ("bomb.yaml", text)),
        rf"^{field}\[1\]\.text: bomb\.yaml, YAML document 2: expands to more than 100,000 nodes through its "
        r"aliases \(an alias bomb\?\)",
    )


def test_a_long_string_multiplied_by_aliases_is_refused() -> None:
    # One 300,000-character scalar named eight times is 2.4 million characters for the shell reader.
    text = f'big: &s "{"x" * 300_000}"\ncopies: [{", ".join(["*s"] * 8)}]\n'
    refused(
        lambda: review(("values.yaml", text)),
        r"^documents\[0\]\.text: values\.yaml, YAML document 1: expands to more than 2,000,000 characters through "
        r"its aliases",
    )


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    refused(
        lambda: review(("loop.yaml", "a: &a [x, *a]\n")),
        r"^documents\[0\]\.text: loop\.yaml, line 1: the alias \*a is inside the node it names",
    )


def test_merge_keys_are_read() -> None:
    compose = textwrap.dedent(f"""\
        x-vllm: &vllm
          image: {IMAGE}
          command: [--model, m, --max-model-len, "8192"]
        services:
          decode:
            <<: *vllm
            environment: {{PYTHONHASHSEED: "0"}}
        """)
    result = review(("docker-compose.yaml", compose))
    assert [(w.name, w.image) for w in result.workloads] == [("service decode", IMAGE)]
    assert result.workloads[0].facts["max_model_len"] == 8192


def test_anchors_used_as_intended_still_work() -> None:
    compose = textwrap.dedent(f"""\
        x-vllm: &vllm
          image: {IMAGE}
          command: [--model, m, --kv-offloading-size, "100", --kv-offloading-backend, native]
        services:
          prefill: *vllm
          decode: *vllm
        """)
    result = review(("docker-compose.yaml", compose))
    assert [w.name for w in result.workloads] == ["service prefill", "service decode"]


NESTED = {
    "flow lists": "a: " + "[" * 500 + "]" * 500,
    "flow maps": "a: " + "{a: " * 500 + "}" * 500,
    "block lists": "a:\n" + "".join(" " * (2 * i) + "-\n" for i in range(1, 501)),
}


@pytest.mark.parametrize(("call", "field"), READERS)
@pytest.mark.parametrize("shape", sorted(NESTED))
def test_deep_nesting_is_refused_with_the_depth(call: Callable[..., Result], field: str, shape: str) -> None:
    refused(
        lambda: call(("deep.yaml", NESTED[shape])),
        rf"^{field}\[0\]\.text: deep\.yaml, YAML document 1, line \d+: nested more than 100 levels deep",
    )


def test_nesting_built_from_aliases_is_refused() -> None:
    # Each anchor nests the one before 60 levels deeper: 100 levels and more only once expanded.
    lines, below = [], "x"
    for i in range(4):
        lines.append(f"a{i}: &a{i} " + "[" * 60 + below + "]" * 60)
        below = f"*a{i}"
    refused(
        lambda: review(("deep.yaml", "\n".join(lines) + "\n")),
        r"^documents\[0\]\.text: deep\.yaml, YAML document 1, line 2: nested more than 100 levels deep through "
        r"its aliases",
    )


def test_nesting_that_crashed_the_yaml_composer_is_refused(tmp_path: Any) -> None:
    # 50,000 open brackets made libyaml's composer overflow the C stack: the process died (SIGSEGV).
    script = textwrap.dedent("""\
        from vllm_caching_mcp.tools import ToolInputError, run_tool
        try:
            run_tool("review_deployment", {"documents": [{"name": "deep.yaml", "text": "[" * 50000 + "]" * 50000}]})
        except ToolInputError as exc:
            print(exc)
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "nested more than 100 levels deep" in done.stdout


UNBUILDABLE = {
    "=": r"the value '=' .*cannot be read",
    "a: !!int xyz": r"the value 'xyz' .*cannot be read as !!int",
    "a: !!int ''": r"the value '' .*cannot be read as !!int",
    "a: !!float xyz": r"the value 'xyz' .*cannot be read as !!float",
    "a: !foo bar": r"the tag !foo is not one the safe YAML loader reads",
    "a: 2020-13-01": r"the value '2020-13-01' .*cannot be read as !!timestamp",
    "a: !!binary abc": r"the value 'abc' .*cannot be read as !!binary",
    "a: !!python/name:os.system x": r"the tag !!python/name:os.system is not one the safe YAML loader reads",
}


@pytest.mark.parametrize(("call", "field"), READERS)
@pytest.mark.parametrize("text", sorted(UNBUILDABLE))
def test_values_yaml_cannot_build_are_one_line_errors(call: Callable[..., Result], field: str, text: str) -> None:
    refused(lambda: call(("values.yaml", text)), rf"^{field}\[0\]\.text: values\.yaml, line 1: {UNBUILDABLE[text]}")


@pytest.mark.parametrize(("call", "field"), READERS)
def test_yaml_syntax_errors_are_one_line(call: Callable[..., Result], field: str) -> None:
    refused(
        lambda: call(("x.yaml", "a: [b\nc: d\n")),
        rf"^{field}\[0\]\.text: x\.yaml is not valid YAML: while parsing a flow sequence: .* \(line 2, column \d+\)$",
    )


@pytest.mark.parametrize("prefix", ["!!int", "!foo", "- " * 500], ids=["!!int", "!foo", "500 dashes"])
def test_a_text_that_is_not_yaml_is_still_read_as_shell(prefix: str) -> None:
    # A shell script is tried as YAML first: these are YAML that cannot be built (a bad int, an
    # unknown tag, 500 nested lists), and must not stop the shell reader.
    result = review(("serve.sh", f"{prefix} vllm serve m --max-model-len 8192\n"))
    assert [w.model for w in result.workloads] == ["m"]


MANIFEST = """\
apiVersion: {api}
kind: {kind}
metadata: {{name: x}}
spec:
  {spec}
  template:
    spec:
      affinity: {{nodeAffinity: {{since: 2020-01-01, blob: !!binary aGVsbG8=}}}}
      containers:
      - name: c
        image: {image}
        args: [--model, m, --kv-offloading-size, "100", --kv-offloading-backend, native]
        resources: {{limits: {{memory: "{memory}"}}}}
"""


def manifest(spec: str = "replicas: 1", memory: str = "100Gi", kind: str = "Deployment") -> str:
    api = "leaderworkerset.x-k8s.io/v1" if kind == "LeaderWorkerSet" else "apps/v1"
    return MANIFEST.format(api=api, kind=kind, spec=spec, image=IMAGE, memory=memory)


def test_dates_and_bytes_in_yaml_do_not_stop_the_reader() -> None:
    lmcache = textwrap.dedent("""\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: lm}
        data:
          lmcache.yaml: |
            chunk_size: 256
            extra_config: {since: 2020-01-01}
        """)
    result = review(("deploy.yaml", manifest()), ("lmcache.yaml", lmcache))
    assert result.workloads[0].facts["container_memory_limit_gib"] == 100


HUGE = "9" * 400  # 1e400: a float reads it as infinity


LMCACHE_V1 = """--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'"""
OUT_OF_RANGE = {
    "offloading size": (
        "serve.sh",
        f"vllm serve m --kv-offloading-size {HUGE} --kv-offloading-backend native",
        r"--kv-offloading-size 9{39}… is beyond ±2\^63; it is not used",
    ),
    "tensor parallel": (
        "serve.sh",
        f"vllm serve m -tp {HUGE[:300]} -pp {HUGE[:300]} --kv-offloading-size 10",
        r"--tensor-parallel-size 9+… is beyond",
    ),
    "max model len": ("serve.sh", f"vllm serve m --max-model-len {HUGE}", r"--max-model-len 9+… is beyond"),
    "weights offload": ("serve.sh", f"vllm serve m --cpu-offload-gb {HUGE}", r"--cpu-offload-gb 9+… is beyond"),
    "lmcache size": (
        "serve.sh",
        f"LMCACHE_MAX_LOCAL_CPU_SIZE={HUGE} vllm serve m {LMCACHE_V1}",
        r"LMCACHE_MAX_LOCAL_CPU_SIZE 9+… is beyond",
    ),
    "json 1e400": (
        "serve.sh",
        f"vllm serve m --kv-transfer-config '{TIERING % '1e400'}'",
        r"cpu_bytes_to_use inf is out",
    ),
    "json NaN": ("serve.sh", f"vllm serve m --kv-transfer-config '{TIERING % 'NaN'}'", r"cpu_bytes_to_use nan is out"),
    "json Infinity": (
        "serve.sh",
        f"vllm serve m --kv-transfer-config '{TIERING % 'Infinity'}'",
        r"cpu_bytes_to_use inf",
    ),
    "json 400 digits": (
        "serve.sh",
        f"vllm serve m --kv-transfer-config '{TIERING % HUGE}'",
        r"cpu_bytes_to_use 9+… is",
    ),
    "json 5000 digits": (
        "serve.sh",
        f"vllm serve m --kv-transfer-config '{TIERING % ('9' * 5000)}'",
        r"--kv-transfer-config is not valid JSON \(Exceeds the limit \(4300 digits\)",
    ),
    "memory 400 digits": ("deploy.yaml", manifest(memory=HUGE), r"memory '9+…' is beyond 2\^63-1 bytes"),
    "memory 1.2.3": (
        "deploy.yaml",
        manifest(memory="1.2.3"),
        r"resources.limits.memory '1\.2\.3' is not a Kubernetes quantity",
    ),
    "replicas 400 digits": (
        "deploy.yaml",
        manifest(spec=f"replicas: {HUGE}"),
        r"replicas 9+… is not a whole number from 0 to 1,000,000",
    ),
    "replicas negative": ("deploy.yaml", manifest(spec="replicas: -3"), r"replicas -3 is not a whole number"),
}


@pytest.mark.parametrize("case", sorted(OUT_OF_RANGE))
def test_numbers_out_of_range_are_not_used_and_said(case: str) -> None:
    name, text, note = OUT_OF_RANGE[case]
    result = review((name, text))
    finite_numbers(result)
    assert any(re.search(note, n) for n in result.notes), result.notes


@pytest.mark.parametrize("size", ["0", "-2", HUGE, "true"], ids=["zero", "negative", "400 digits", "bool"])
def test_a_leaderworkerset_size_out_of_range_is_not_used(size: str) -> None:
    container = (
        f"{{name: c, image: {IMAGE}, args: [--model, m, --kv-offloading-size, '10', --kv-offloading-backend, native]}}"
    )
    spec = f"leaderWorkerTemplate: {{size: {size}, workerTemplate: {{spec: {{containers: [{container}]}}}}}}"
    result = review(("lws.yaml", manifest(spec=spec, kind="LeaderWorkerSet")))
    finite_numbers(result)
    assert any("size" in n and "not used" in n for n in result.notes), result.notes


@pytest.mark.parametrize(
    "config",
    [
        "[" * 100_000,
        '{"kv_connector":"OffloadingConnector","kv_connector_extra_config":' + "[" * 3000 + "]" * 3000 + "}",
    ],
    ids=["100,000 brackets", "3,000 levels in the extra config"],
)
def test_transfer_config_json_nested_too_deep_is_a_note(config: str) -> None:
    result = review(("serve.sh", f"vllm serve m --kv-transfer-config '{config}'"))
    assert any("--kv-transfer-config" in n and "nested" in n for n in result.notes), result.notes


def test_dotted_transfer_config_keys_that_clash_are_a_note() -> None:
    text = "vllm serve m --kv-transfer-config.kv_connector NixlConnector --kv-transfer-config.kv_connector.x 1"
    result = review(("serve.sh", text))
    assert any("kv_connector" in n and "not used" in n for n in result.notes), result.notes
    deep = "vllm serve m --kv-transfer-config." + ".".join(["a"] * 5000) + " 1"
    result = review(("serve.sh", deep))
    assert any("--kv-transfer-config" in n and "nested" in n for n in result.notes), result.notes


def test_long_keys_are_not_copied_into_every_path() -> None:
    # A 20,000-character service name over 5,000 arguments: the old reader kept 5,000 paths of 20 kB.
    name = "s" * 20_000
    args = ", ".join(["--max-model-len, '8192'"] * 2_500)
    text = f"services:\n  ? {name}\n  : image: {IMAGE}\n    command: [{args}]\n"  # a key past 1,024: explicit
    tracemalloc.start()
    try:
        result = review(("docker-compose.yaml", text))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(result.workloads) == 1
    assert peak < 60_000_000, f"{peak:,} bytes at the peak for a {len(text):,}-character file"


# ---------------------------------------------------------------------------------------------- shell


def test_more_servers_than_any_deployment_are_refused() -> None:
    text = "vllm serve m --max-model-len 8192\n" * 1_001
    refused(lambda: review(("serve.sh", text)), r"^documents: more than 1,000 vLLM servers")
    assert len(review(("serve.sh", "vllm serve m\n" * 200)).workloads) == 200


def test_a_command_longer_than_any_deployment_runs_is_refused() -> None:
    one_command = "echo start\nvllm serve m" + " --max-model-len 8192" * 25_001
    refused(
        lambda: review(("notes.txt", "hello"), ("serve.sh", one_command)),
        r"^documents\[1\]\.text: serve\.sh, line 2: a command of more than 50,000 words",
    )
    in_a_list = f"services:\n  s:\n    image: {IMAGE}\n    command: [{', '.join(['--max-model-len, 1'] * 25_001)}]\n"
    refused(
        lambda: review(("docker-compose.yaml", in_a_list)),
        r"^documents\[0\]\.text: docker-compose\.yaml, line 4: a command of more than 50,000 words",
    )


def test_more_arguments_than_any_deployment_are_refused() -> None:
    several = [(f"serve{i}.sh", "vllm serve m" + " --enforce-eager" * 17_000) for i in range(3)]  # 51,000 flags
    refused(lambda: review(*several), r"^documents: more than 50,000 vLLM arguments in all the documents")


def test_more_variables_than_any_deployment_sets_are_refused() -> None:
    # Each server takes every exported variable: 26,000 exports and two servers are 52,000.
    text = "".join(f"export V{i}=x\n" for i in range(26_000)) + "vllm serve a\nvllm serve b\n"
    refused(lambda: review(("serve.sh", text)), r"^documents: more than 50,000 environment variables")


def test_documents_together_are_bounded() -> None:
    text = "#" * 1_999_000 + "\nvllm serve m\n"
    count = TOGETHER // len(text) + 1
    documents = [(f"serve{i}.sh", text) for i in range(count)]
    refused(lambda: review(*documents), rf"^documents: .*at most {TOGETHER:,} characters")
    refused(lambda: diagnose(*documents), rf"^deployment: .*at most {TOGETHER:,} characters")


def test_unknown_options_beyond_the_first_hundred_get_no_suggestion_search() -> None:
    # difflib compares each unknown name with every known option: 0.5 ms each, minutes for 300,000.
    text = "vllm serve m " + " ".join(f"--max-model-len{i} 1" for i in range(300))
    result = review(("serve.sh", text))
    unknown = [f for f in result.findings if f.rule_id == "pitfall.unknown-flag"]
    assert len(unknown) == 300
    assert sum("did you mean --max-model-len?" in f.message for f in unknown) == 100
    assert any("the first 100 unknown options" in n for n in result.notes)


# ---------------------------------------------------------------------------------------------- metrics


def dump(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def counters(**values: str) -> str:
    lines = []
    for name, value in values.items():
        lines += [f"# TYPE vllm:{name} counter", f'vllm:{name}_total{{engine="0",model_name="m"}} {value}']
    return dump(*lines)


LONG_LINES = {
    "escaped quotes": 'vllm:prefix_cache_queries_total{engine="' + '\\"' * 50_000 + '"} 1',
    "labels": "vllm:prefix_cache_queries_total{" + ",".join(f'l{i}="x"' for i in range(10_000)) + "} 1",
    "a comment": "# HELP vllm:prefix_cache_queries" + " " * 70_000 + "x",
}


@pytest.mark.parametrize("what", sorted(LONG_LINES))
def test_a_metrics_line_longer_than_any_exporter_writes_is_refused(what: str) -> None:
    line = LONG_LINES[what]
    text = dump("# TYPE vllm:prefix_cache_queries counter", line)
    refused(
        lambda: metrics(metrics_before=text),
        rf"^metrics_before: line 2 is {len(line):,} characters long; /metrics lines are read up to 65,536",
    )


@pytest.mark.parametrize(
    "line",
    [
        "vllm:prefix_cache_queries_total{" + ",".join(f'l{i}="x"' for i in range(600)) + "} 1",
        'vllm:prefix_cache_queries_total{engine="' + '\\"' * 1_200 + '"} 1',
    ],
    ids=["600 labels", "1,200 escaped quotes"],
)
def test_a_metrics_line_with_more_quotes_than_any_exporter_writes_is_refused(line: str) -> None:
    # Each label (two quotes) and each escaped quote costs the old parser a copy of the rest of the line.
    text = dump("# TYPE vllm:prefix_cache_queries counter", line)
    refused(
        lambda: metrics(metrics_before=text),
        rf"^metrics_before: line 2 has {line.count(chr(34)):,} double quotes; /metrics lines are read with up to 1,024",
    )


def test_parser_errors_are_one_short_line() -> None:
    text = dump("vllm:prefix_cache_queries_total{" + "a" * 60_000 + "} 1")
    message = refused(
        lambda: metrics(metrics_before=text),
        r"^metrics_before: line 1: not in the Prometheus text exposition format \(Invalid labels: a{10}",
    )
    assert message.endswith("…)")


@pytest.mark.parametrize("bad", ["NaN", "+Inf", "-Inf", "1e400"])
def test_nan_and_infinite_counters_are_not_used(bad: str) -> None:
    before = counters(prefix_cache_queries="1e6", prefix_cache_hits="1e5")
    after = counters(prefix_cache_queries=bad, prefix_cache_hits="2e5")
    result = metrics(metrics_before=before, metrics_after=after, version="0.30.0")
    finite_numbers(result)
    assert "gpu_prefix_hit_rate" not in result.derived
    reading = next(r for r in result.readings if r.id == "metric.prefix_cache_queries")
    assert (reading.present, reading.value) == (True, None)
    assert any("vllm:prefix_cache_queries_total" in n and "not used" in n for n in result.metric_notes)


def test_no_rate_is_built_on_a_nan_hits_counter() -> None:
    # An unusable hits counter is not "no hits": the rate would read 0 % and blame prefix locality.
    text = counters(prefix_cache_queries="2e7", prefix_cache_hits="NaN")
    result = metrics(metrics_before=text, version="0.30.0")
    assert "gpu_prefix_hit_rate" not in result.derived
    assert "no_prefix_locality" not in [c.id for c in result.causes]


def test_no_thrashing_is_claimed_from_a_nan_load_counter() -> None:
    gib = 1 << 30
    text = counters(
        prefix_cache_queries="5e7",
        prefix_cache_hits="1e7",
        external_prefix_cache_queries="4e7",
        external_prefix_cache_hits="1e6",
        kv_offload_store_bytes=str(500 * gib),
        kv_offload_load_bytes="NaN",
    )
    result = metrics(metrics_before=text, version="0.28.0")
    assert "tier_thrashing" not in [c.id for c in result.causes]


def test_a_nan_gauge_is_not_used() -> None:
    text = dump("# TYPE vllm:kv_cache_usage_perc gauge", 'vllm:kv_cache_usage_perc{engine="0"} NaN')
    result = metrics(metrics_before=text, symptoms=["preemptions"], version="0.30.0")
    finite_numbers(result)
    assert "gpu_kv_usage" not in result.derived


def test_huge_finite_counters_do_not_add_up_to_infinity() -> None:
    # As vLLM's prometheus_client writes counters: the TYPE line names the _total series.
    lines = ["# TYPE vllm:prefix_cache_queries_total counter"]
    lines += [f'vllm:prefix_cache_queries_total{{engine="{i}"}} 1e308' for i in range(3)]
    result = metrics(metrics_before=dump(*lines), version="0.30.0")
    finite_numbers(result)
    assert any("has a sample of 1e+308" in n for n in result.metric_notes)


def test_series_without_their_type_line_are_all_counted() -> None:
    # `curl .../metrics | grep prefix_cache` drops the HELP and TYPE lines: every series then reads
    # as a family of its own, and each used to replace the one before under the same name.
    lines = [f'vllm:prefix_cache_queries_total{{engine="{i}"}} 2e6' for i in range(2)]
    lines += [f'vllm:prefix_cache_hits_total{{engine="{i}"}} {h}' for i, h in enumerate((1.5e6, 0.5e6))]
    result = metrics(metrics_before=dump(*lines), version="0.30.0")
    assert result.derived["gpu_prefix_hit_rate"] == pytest.approx(0.5)  # 2e6 / 4e6


def test_a_counter_that_went_down_between_the_dumps_is_read_as_a_restart() -> None:
    # Prometheus's increase(): a counter below its earlier value started again from zero.
    before = counters(prefix_cache_queries="5e6", prefix_cache_hits="3e6")
    after = counters(prefix_cache_queries="2e6", prefix_cache_hits="1e6")  # 1e6 / 2e6 since the restart
    result = metrics(metrics_before=before, metrics_after=after, version="0.30.0")
    assert result.derived["gpu_prefix_hit_rate"] == pytest.approx(0.5)
    assert any("went down" in n for n in result.metric_notes)


# ---------------------------------------------------------------------------------------------- scaling


def heavy_inputs(scale: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A review and a diagnose request whose size grows with ``scale``: more lines, servers, paths, series."""
    shell = "".join(
        f"echo step {i} 'quoted words here' \"and $HOME\" # a comment\n"
        f"vllm serve m{i} --max-model-len 8192 --foo-{i % 50} x --kv-offloading-size 10\n"
        for i in range(200 * scale)
    )
    # Variables set before one command: the old reader copied the rest of the command for each.
    shell += " ".join(f"V{i}=x" for i in range(8_000 * scale)) + " vllm serve last --max-model-len 1\n"
    # A key that grows with the file over arguments that do too: the old reader copied it into each path.
    key = "k" * (10_000 * scale)
    arguments = ", ".join(["--max-model-len, '1'"] * 1_000 * scale)
    compose = f"services:\n  ? {key}\n  : image: {IMAGE}\n    command: [{arguments}]\n"
    series = ["# HELP vllm:prefix_cache_queries Prefix cache queries", "# TYPE vllm:prefix_cache_queries counter"]
    series += [
        f'vllm:prefix_cache_queries_total{{engine="{i}",model_name="{"m" * 40}"}} {i}' for i in range(800 * scale)
    ]
    # Lines as long as a LoRA adapter list gets, with as many escaped quotes as are read; more with the scale.
    quotes = [
        f'vllm:prefix_cache_queries_total{{engine="q{i}",x="' + '\\"' * 1_000 + "a" * 16_000 + '"} 1'
        for i in range(10 * scale)
    ]
    exposition = "\n".join(series + quotes) + "\n"
    documents = [{"name": "serve.sh", "text": shell}, {"name": "docker-compose.yaml", "text": compose}]
    return (
        {"documents": documents, "version": "0.20.2"},
        {"symptoms": ["ttft_high"], "metrics_before": exposition, "version": "0.20.2"},
    )


def best_time(arguments: tuple[dict[str, Any], dict[str, Any]]) -> float:
    """The faster of two runs of both tools, so one pause of a loaded machine does not decide the ratio."""
    times = []
    for _ in range(2):
        start = time.perf_counter()
        run_tool("review_deployment", arguments[0])
        run_tool("diagnose", arguments[1])
        times.append(time.perf_counter() - start)
    return min(times)


def test_parsers_scale_linearly() -> None:
    small, large = heavy_inputs(1), heavy_inputs(4)
    assert len(json.dumps(large)) > 3.5 * len(json.dumps(small))
    best_time(small)  # warm the caches (knowledge, imports) before timing
    t_small, t_large = best_time(small), best_time(large)
    assert t_large < 60, f"{t_large:.1f} s for the 4n input"
    assert t_large / t_small < 8, (
        f"n: {t_small:.2f} s, 4n: {t_large:.2f} s (ratio {t_large / t_small:.1f}, 4 is linear)"
    )


# One long line of each shape a regular expression of the readers could backtrack on: runs of the
# characters its patterns repeat (path segments, `$(`, `${`, quotes, `=`, `,`) with no end in sight.
LINE_SHAPES: dict[str, Callable[[int], str]] = {
    "path segments in a command": lambda n: "python " + "a/" * n + "\n",
    "path segments in YAML": lambda n: "command: " + "a/" * n + "\n",
    "unclosed $((": lambda n: "vllm serve m " + "$((" * n + "\n",
    "unclosed $(": lambda n: "vllm serve m " + "$(" * n + "\n",
    "unclosed ${": lambda n: "vllm serve m " + "${" * n + "\n",
    "unclosed backticks": lambda n: "vllm serve m " + "`a" * n + "\n",
    "Kubernetes $(VAR": lambda n: f"image: {IMAGE}\nargs: ['" + "$(a" * n + "']\n",
    "compose ${VAR": lambda n: f"services:\n  v:\n    image: {IMAGE}\n    command: '" + "${a" * n + "'\n",
    "escaped double quotes": lambda n: 'vllm serve m "' + '\\"' * n + '"\n',
    "equals signs": lambda n: "vllm serve m --x" + "=" * n + "\n",
    "device list": lambda n: "CUDA_VISIBLE_DEVICES=" + "0," * n + " vllm serve m\n",
    "dotted keys": lambda n: "vllm serve m --kv-transfer-config." + "a." * n + "b 1\n",
    "unclosed template actions": lambda n: "kind: Deployment\nx: " + "{{ " * n + "\n{{- if .Values.a }}\n",
    "nested alternates": lambda n: "vllm serve m " + "${A:+\\\n" * n + "}" * n + "\n",
    "nested template ifs": lambda n: "kind: Deployment\n" + "{{- if .Values.a }}\n" * n + "{{- end }}\n" * n,
}


@pytest.mark.parametrize("shape", LINE_SHAPES, ids=list(LINE_SHAPES))
def test_one_long_line_of_any_shape_is_read_in_linear_time(shape: str) -> None:
    """A 40 KB line of `a/a/…` took 10 s (80 KB, 40 s): the proxy-script pattern re-read every segment
    from each position. Each shape at n and 4n: a ratio near 4 at most, far from a quadratic 16."""
    make = LINE_SHAPES[shape]

    def best(n: int) -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            with contextlib.suppress(ToolInputError):
                run_tool("review_deployment", {"documents": [{"name": "x", "text": make(n)}], "version": "0.20.2"})
            times.append(time.perf_counter() - start)
        return min(times)

    best(100)  # warm
    small, large = best(4_000), best(16_000)
    assert large < 5, f"{large:.1f} s for a {len(make(16_000)):,}-character line"
    assert large / max(small, 0.005) < 8, f"n: {small:.3f} s, 4n: {large:.3f} s"


def test_a_variable_that_doubles_itself_is_bounded_not_grown_without_end() -> None:
    # Each line doubles A: 2^40 characters if followed; past MAX_VALUE_CHARS its value is not known.
    script = "A=xxxxxxxxxxxxxxxx\n" + 'A="$A$A"\n' * 40 + "vllm serve m --served-model-name $A\n"
    result = review(("serve.sh", script))
    assert any("longer than 100,000 characters" in n for n in result.notes), result.notes
