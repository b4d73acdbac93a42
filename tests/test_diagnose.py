"""diagnose, asked the way operators ask: "offload is on, why doesn't TTFT get better?"

Metrics dumps are written in the Prometheus text format by hand below; every expected rate is
worked out in the comment next to it.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.advice.deployment import Document
from vllm_caching_mcp.advice.diagnose import DiagnoseRequest, diagnose
from vllm_caching_mcp.knowledge import Knowledge

DATA = Path(__file__).parent / "data" / "deployments"


def dump(**values: float) -> str:
    """A /metrics page with one engine; keys are metric names without the vllm: prefix."""
    lines = []
    for name, value in values.items():
        kind = "gauge" if name.endswith("_perc") else "counter"
        family = name.removesuffix("_total")
        lines += [f"# HELP vllm:{family} test", f"# TYPE vllm:{family} {kind}"]
        lines.append(f'vllm:{name}{{engine="0",model_name="m"}} {value}')
    return "\n".join(lines) + "\n"


def causes(result: object) -> list[str]:
    return [c.id for c in result.causes]  # type: ignore[attr-defined]


def test_full_gpu_cache_with_preemptions_is_a_memory_wall(knowledge: Knowledge) -> None:
    before = dump(
        prefix_cache_queries_total=1e6,
        prefix_cache_hits_total=5e4,
        num_preemptions_total=0,
        kv_cache_usage_perc=0.5,
        external_prefix_cache_queries_total=9e5,
        external_prefix_cache_hits_total=9e3,
    )
    after = dump(
        prefix_cache_queries_total=5e6,
        prefix_cache_hits_total=1.5e5,
        num_preemptions_total=12,
        kv_cache_usage_perc=0.97,
        external_prefix_cache_queries_total=4.9e6,
        external_prefix_cache_hits_total=2.9e4,
    )
    result = diagnose(
        DiagnoseRequest(
            symptoms=["offload_does_not_help"], metrics_before=before, metrics_after=after, version="0.25.0"
        ),
        knowledge,
    )
    assert result.window == "delta"
    # GPU: (1.5e5 - 5e4) / (5e6 - 1e6) = 1e5 / 4e6 = 2.5 %; external: 2e4 / 4e6 = 0.5 %
    assert result.derived["gpu_prefix_hit_rate"] == pytest.approx(0.025)
    assert result.derived["external_hit_rate"] == pytest.approx(0.005)
    assert result.derived["preemptions"] == 12
    assert causes(result) == ["memory_wall", "no_prefix_locality"]
    assert result.causes[0].evidence == ["GPU KV usage 97%", "12 preemptions in the window"]


def test_offload_connector_not_loaded(knowledge: Knowledge) -> None:
    deployment = [Document(name="serve.sh", text="vllm serve m --kv-offloading-size 100")]
    # The engine exports the external counter with or without a connector; at 0 no tier was asked.
    metrics = dump(prefix_cache_queries_total=2e7, prefix_cache_hits_total=6e6, external_prefix_cache_queries_total=0)
    result = diagnose(
        DiagnoseRequest(symptoms=["ttft_high"], deployment=deployment, metrics_before=metrics, version="0.30.0"),
        knowledge,
    )
    assert causes(result)[0] == "connector_not_loaded"
    assert result.causes[0].likelihood == "high"
    assert "the deployment configures OffloadingConnector" in result.causes[0].evidence
    # A dump without the series at all is a partial dump, not evidence about the connector.
    partial = dump(prefix_cache_queries_total=2e7, prefix_cache_hits_total=6e6)
    result = diagnose(DiagnoseRequest(symptoms=["ttft_high"], metrics_before=partial, version="0.30.0"), knowledge)
    assert "connector_not_loaded" not in causes(result)


def test_metric_names_from_another_release(knowledge: Knowledge) -> None:
    # vllm:gpu_prefix_cache_* are gone from 0.12.0: a dump with them was not taken from 0.30.0.
    metrics = dump(gpu_prefix_cache_queries_total=1e7, gpu_prefix_cache_hits_total=1e6)
    result = diagnose(DiagnoseRequest(metrics_before=metrics, version="0.30.0"), knowledge)
    assert causes(result)[0] == "wrong_metric_names"
    assert (
        result.causes[0].evidence[0]
        == "vllm:gpu_prefix_cache_queries_total is removed in 0.12.0, so vLLM 0.30.0 does not export it"
    )
    # 1e6 / 1e7 = 10 %, read from the old names all the same
    assert result.derived["gpu_prefix_hit_rate"] == pytest.approx(0.1)


def test_tier_too_small_and_in_flight_usage_note(knowledge: Knowledge) -> None:
    before = dump(
        prefix_cache_queries_total=1e7,
        prefix_cache_hits_total=4e6,
        external_prefix_cache_queries_total=6e6,
        external_prefix_cache_hits_total=6e5,
        kv_offload_allocation_failure_total=10,
        kv_offload_cpu_cache_usage_perc=0.2,
    )
    after = dump(
        prefix_cache_queries_total=2e7,
        prefix_cache_hits_total=8e6,
        external_prefix_cache_queries_total=1.2e7,
        external_prefix_cache_hits_total=1.2e6,
        kv_offload_allocation_failure_total=510,
        kv_offload_cpu_cache_usage_perc=0.3,
    )
    result = diagnose(DiagnoseRequest(metrics_before=before, metrics_after=after, version="0.26.0"), knowledge)
    assert result.derived["offload_allocation_failures"] == 500  # 510 - 10
    assert result.derived["external_hit_rate"] == pytest.approx(0.1)  # 6e5 / 6e6
    assert causes(result) == ["tier_too_small"]
    assert any("in flight" in n for n in result.metric_notes)
    assert "pitfall.kv-offload-usage-is-in-flight" in {c.id for c in result.citations}


def test_thrashing_when_the_tier_stores_far_more_than_it_loads(knowledge: Knowledge) -> None:
    gib = 1 << 30
    metrics = dump(
        prefix_cache_queries_total=5e7,
        prefix_cache_hits_total=1e7,
        external_prefix_cache_queries_total=4e7,
        external_prefix_cache_hits_total=1e6,
        kv_offload_store_bytes_total=500 * gib,
        kv_offload_load_bytes_total=10 * gib,
    )
    result = diagnose(DiagnoseRequest(metrics_before=metrics, version="0.28.0"), knowledge)
    # external 1e6 / 4e7 = 2.5 %; stored 500 GiB vs loaded 10 GiB = 50x
    assert causes(result) == ["tier_thrashing"]
    assert result.causes[0].evidence[0] == "stored 500 GiB, loaded 10 GiB"
    # the release that brought the reuse filter, as the knowledge records it (0.18.0)
    threshold = knowledge.by_id["spec.store-threshold"]
    assert f"on {threshold.introduced}+ store_threshold: 2 keeps" in result.causes[0].next_check


def test_decode_bound_when_prefill_is_already_cached(knowledge: Knowledge) -> None:
    metrics = dump(prefix_cache_queries_total=1e7, prefix_cache_hits_total=8e6)  # 80 % local hits
    result = diagnose(DiagnoseRequest(symptoms=["tpot_high"], metrics_before=metrics), knowledge)
    assert "decode_bound" in causes(result)
    assert next(c for c in result.causes if c.id == "decode_bound").likelihood == "high"


def test_deployment_findings_become_causes(knowledge: Knowledge) -> None:
    # pitfall.prefix-caching-disabled fires only where prefix caching off bites: SimpleCPUOffloadConnector,
    # which turns itself off without it (the chart's LMCacheConnectorV1 keeps working, so its values are no case)
    text = (
        "docker run --gpus all vllm/vllm-openai:v0.19.1 --model m --no-enable-prefix-caching "
        """--kv-transfer-config '{"kv_connector":"SimpleCPUOffloadConnector","kv_role":"kv_both"}'"""
    )
    result = diagnose(
        DiagnoseRequest(symptoms=["offload_does_not_help"], deployment=[Document(name="run.sh", text=text)]),
        knowledge,
    )
    assert result.version_context.version == "0.19.1"  # from the image tag
    assert causes(result) == ["prefix_caching_off"]


def test_bad_input_names_the_field(knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"^symptoms: "):
        diagnose(DiagnoseRequest(), knowledge)
    with pytest.raises(AdviceError, match=r"^metrics_before: "):
        diagnose(DiagnoseRequest(metrics_before="this is not {prometheus"), knowledge)
    with pytest.raises(AdviceError, match=r"^metrics_before: metrics_after needs"):
        diagnose(DiagnoseRequest(metrics_after=dump(prefix_cache_queries_total=1)), knowledge)


def test_an_empty_gpu_kv_cache_is_reported_not_dropped(knowledge: Knowledge) -> None:
    # Usage 0.0 is a reading (the engine went idle); it was taken for "absent", the old name asked
    # instead (gone on 0.30.0), and gpu_kv_usage left out of the answer.
    before = dump(prefix_cache_queries_total=3e6, prefix_cache_hits_total=1e6, kv_cache_usage_perc=0.4)
    after = dump(prefix_cache_queries_total=5e6, prefix_cache_hits_total=2e6, kv_cache_usage_perc=0.0)
    result = diagnose(DiagnoseRequest(metrics_before=before, metrics_after=after, version="0.30.0"), knowledge)
    assert result.derived["gpu_kv_usage"] == 0.0
    assert result.derived["gpu_prefix_hit_rate"] == pytest.approx(0.5)  # (2e6 - 1e6) / (5e6 - 3e6)
    # on 0.11.0, before the rename, the old name is read
    old = dump(gpu_prefix_cache_queries_total=1e7, gpu_cache_usage_perc=0.25)
    assert diagnose(DiagnoseRequest(metrics_before=old, version="0.11.0"), knowledge).derived["gpu_kv_usage"] == 0.25


def test_diagnose_changes_neither_the_request_nor_the_knowledge(knowledge: Knowledge) -> None:
    """Read through every step (the deployment's review, both dumps, the fallback byte counter), write nothing."""
    text = (DATA / "production-stack-values.yaml").read_text()
    before = dump(prefix_cache_queries_total=1e7, kv_offload_total_bytes_total=1e9, num_preemptions_total=1)
    after = dump(prefix_cache_queries_total=2e7, kv_offload_total_bytes_total=9e9, num_preemptions_total=5)
    request = DiagnoseRequest(
        symptoms=["offload_does_not_help", "tpot_high"],
        description="after a restart our gpu_prefix_cache panel is empty",
        deployment=[Document(name="values.yaml", text=text)],
        metrics_before=before,
        metrics_after=after,
        host={"ram_gib": 512},
        p99_context_tokens=4096,
    )
    request_before, knowledge_before = copy.deepcopy(request.model_dump()), copy.deepcopy(knowledge.model_dump())
    first = diagnose(request, knowledge)
    assert request.model_dump() == request_before
    assert knowledge.model_dump() == knowledge_before
    assert diagnose(request, knowledge) == first


def info(name: str, **labels: str) -> str:
    """An info-style gauge (value 1) whose labels carry the configuration, as vllm:cache_config_info is written."""
    written = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"# HELP vllm:{name} test\n# TYPE vllm:{name} gauge\nvllm:{name}{{{written}}} 1.0\n"


def cause(result: object, cause_id: str) -> object:
    return next(c for c in result.causes if c.id == cause_id)  # type: ignore[attr-defined]


OFFLOAD_CONFIG = """--kv-transfer-config '{"kv_connector":"OffloadingConnector","kv_role":"kv_both",""" + (
    """"kv_connector_extra_config":{"cpu_bytes_to_use":107374182400}}'"""
)


def test_prefix_caching_off_is_not_said_to_stop_lookups_the_dump_shows(knowledge: Knowledge) -> None:
    # The contradiction: prefix caching off, an external hit rate of 0.7 (7e6 / 1e7), and the
    # answer said "nothing is ever looked up in the offload tier". With a connector the engine hashes
    # blocks anyway, so the tier is asked and hits; only the GPU-side reuse is lost.
    metrics = info("cache_config_info", enable_prefix_caching="False", block_size="16") + dump(
        external_prefix_cache_queries_total=1e7, external_prefix_cache_hits_total=7e6
    )
    result = diagnose(DiagnoseRequest(symptoms=["ttft_high"], metrics_before=metrics, version="0.30.0"), knowledge)
    assert result.derived["external_hit_rate"] == pytest.approx(0.7)
    assert all("nothing is ever looked up" not in c.title for c in result.causes)
    off = cause(result, "prefix_caching_off")
    assert off.likelihood == "medium" and off.title.startswith("GPU prefix caching is off")  # type: ignore[attr-defined]
    assert "external hit rate 70.0%" in off.evidence  # type: ignore[attr-defined]
    assert "feature.block-hashes-with-kv-connector" in off.premises  # type: ignore[attr-defined]
    # Without a connector asked, prefix caching off does mean nothing is reused.
    alone = diagnose(
        DiagnoseRequest(
            symptoms=["ttft_high"], metrics_before=info("cache_config_info", enable_prefix_caching="False")
        ),
        knowledge,
    )
    assert cause(alone, "prefix_caching_off").title.startswith("Prefix caching is off and no KV connector")  # type: ignore[attr-defined]


def test_simple_offload_turning_itself_off_is_read_from_the_log(knowledge: Knowledge) -> None:
    log = (
        "WARNING 12-01 10:00:01 [simple_cpu_offload_connector.py:171] Detected prefix caching disabled, "
        "disabling CPU offload since it requires prefix caching.\n"
    )
    result = diagnose(DiagnoseRequest(symptoms=["offload_does_not_help"], log=log, version="0.33.0"), knowledge)
    off = cause(result, "prefix_caching_off")
    assert off.likelihood == "high" and "SimpleCPUOffloadConnector turns itself off" in off.title  # type: ignore[attr-defined]
    # External hits in the dump show a connector that works: the log line is not taken over the figures.
    working = dump(
        prefix_cache_queries_total=1e7, external_prefix_cache_queries_total=1e7, external_prefix_cache_hits_total=5e6
    )
    result = diagnose(DiagnoseRequest(log=log, metrics_before=working, version="0.33.0"), knowledge)
    assert "prefix_caching_off" not in causes(result)


LMCACHE_REMOTE = 'vllm serve m --kv-transfer-config \'{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}\''


def test_hash_seed_mismatch_when_shared_lookups_never_hit(knowledge: Knowledge) -> None:
    script = "export LMCACHE_REMOTE_URL=lm://cache:65432\n" + LMCACHE_REMOTE + "\n"
    # 2e7 tokens asked of the shared cache, 1e4 found: 0.05 %
    metrics = dump(
        prefix_cache_queries_total=3e7,
        prefix_cache_hits_total=9e6,
        external_prefix_cache_queries_total=2e7,
        external_prefix_cache_hits_total=1e4,
    )

    def run(text: str, dumped: str = metrics) -> object:
        deployment = [Document(name="serve.sh", text=text)]
        request = DiagnoseRequest(
            symptoms=["low_hit_rate"], deployment=deployment, metrics_before=dumped, version="0.33.0"
        )
        return diagnose(request, knowledge)

    result = run(script)
    seed = cause(result, "hash_seed_mismatch")
    assert seed.likelihood == "high"  # type: ignore[attr-defined]
    assert "external hit rate 0.1%" in seed.evidence[-1]  # type: ignore[attr-defined]
    assert "feature.lmcache-hash-seed-warning" in seed.premises  # type: ignore[attr-defined]
    # One seed everywhere: not the cause.
    assert "hash_seed_mismatch" not in causes(run("export PYTHONHASHSEED=0\n" + script))
    # A shared cache that does hit (50 %) is not held back by the seed.
    hitting = dump(external_prefix_cache_queries_total=2e7, external_prefix_cache_hits_total=1e7)
    assert "hash_seed_mismatch" not in causes(run(script, hitting))


def test_connector_not_loaded_from_the_log_and_the_missing_offload_metrics(knowledge: Knowledge) -> None:
    deployment = [Document(name="serve.sh", text="vllm serve m " + OFFLOAD_CONFIG)]
    started = "INFO 12-01 10:00:00 [api_server.py:1] vLLM API server version 0.33.0\n"
    created = (
        "INFO 12-01 10:00:02 [factory.py:63] Creating v1 connector with name: OffloadingConnector and engine_id: e\n"
    )

    def run(log: str, metrics: str | None = None) -> object:
        request = DiagnoseRequest(
            symptoms=["offload_does_not_help"], deployment=deployment, log=log, metrics_before=metrics, version="0.33.0"
        )
        return diagnose(request, knowledge)

    missing = cause(run(started), "connector_not_loaded")
    assert "the log has no 'Creating v1 connector with name: ...' line (KVConnectorFactory)" in missing.evidence  # type: ignore[attr-defined]
    assert "connector_not_loaded" not in causes(run(started + created))
    # A whole dump (the engine's counters are there) without any of the connector's metrics.
    engine_only = dump(prefix_cache_queries_total=2e7, prefix_cache_hits_total=5e6)
    absent = cause(run(started + created, engine_only), "connector_not_loaded")
    assert any("none of the OffloadingConnector's metrics" in e for e in absent.evidence)  # type: ignore[attr-defined]
    with_offload = engine_only + dump(kv_offload_store_bytes_total=1e9)
    assert "connector_not_loaded" not in causes(run(started + created, with_offload))


def test_host_memory_exhausted_from_the_description_and_the_pod_limit(knowledge: Knowledge) -> None:
    told = diagnose(
        DiagnoseRequest(symptoms=["oom"], description="The pod restarts: Last State OOMKilled, exit code 137"),
        knowledge,
    )
    assert causes(told)[0] == "host_memory_exhausted"
    assert "memory_wall" not in causes(told)  # the kernel's OOM killer, not the GPU's KV cache
    manifest = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          args: ["--model", "m", "--kv-offloading-size", "200"]
          resources:
            limits: {nvidia.com/gpu: 1, memory: 64Gi}
"""
    result = diagnose(
        DiagnoseRequest(symptoms=["oom"], deployment=[Document(name="deploy.yaml", text=manifest)]), knowledge
    )
    oom = cause(result, "host_memory_exhausted")
    assert oom.likelihood == "high" and "flag.kv-offloading-size" in oom.premises  # type: ignore[attr-defined]
    roomy = manifest.replace("memory: 64Gi", "memory: 512Gi")
    result = diagnose(
        DiagnoseRequest(symptoms=["ttft_high"], deployment=[Document(name="deploy.yaml", text=roomy)]), knowledge
    )
    assert "host_memory_exhausted" not in causes(result)


def test_shm_exhausted_from_vllms_start_up_check(knowledge: Knowledge) -> None:
    # check_shm_free_space's message in 0.33.0 (shm_broadcast.py), for the CPU tier's shared region
    log = (
        "RuntimeError: Insufficient space in /dev/shm for CPU KV offload shared region in /dev/shm: "
        "102400 MiB required, 64 MiB free. Increase /dev/shm (e.g. --shm-size or --ipc=host).\n"
    )
    result = diagnose(DiagnoseRequest(log=log, version="0.33.0"), knowledge)
    shm = cause(result, "shm_exhausted")
    assert shm.likelihood == "high" and shm.evidence[0].startswith("log: RuntimeError: Insufficient space")  # type: ignore[attr-defined]
    said = diagnose(
        DiagnoseRequest(description="workers die with 'No space left on device' writing /dev/shm"), knowledge
    )
    assert cause(said, "shm_exhausted").likelihood == "medium"  # type: ignore[attr-defined]
    disk = diagnose(DiagnoseRequest(description="the fs tier says No space left on device on /mnt/nvme"), knowledge)
    assert "shm_exhausted" not in causes(disk)


def test_shm_exhausted_from_0_27s_pre_fault(knowledge: Knowledge) -> None:
    # 0.27.x creates the region unchecked and pre-faults it: the errno scripts/reproductions/shm_prefault.py
    # reproduces on a tmpfs smaller than the region, after the line shared_offload_region.py logs.
    log = (
        "INFO [shared_offload_region.py:71] Created mmap file /dev/shm/vllm_offload_0f1e.mmap (21.47 GB)\n"
        'File "/usr/local/lib/python3.12/dist-packages/vllm/v1/kv_offload/cpu/shared_offload_region.py", '
        "line 111, in __init__\n    self.mmap_obj.madvise(_MADV_POPULATE_WRITE, 0, self.total_size_bytes)\n"
        "OSError: [Errno 14] Bad address\n"
    )
    shm = cause(diagnose(DiagnoseRequest(log=log, version="0.27.1"), knowledge), "shm_exhausted")
    assert shm.evidence == ["'[errno 14] bad address' with /dev/shm named"]  # type: ignore[attr-defined]
    unrelated = diagnose(DiagnoseRequest(log="OSError: [Errno 14] Bad address\n", version="0.27.1"), knowledge)
    assert "shm_exhausted" not in causes(unrelated)


def test_a_cause_whose_premise_was_not_verified_is_not_stated_as_certain(knowledge_copy: Path) -> None:
    from vllm_caching_mcp.knowledge import load_knowledge

    path = knowledge_copy / "verification.yaml"
    data = yaml.safe_load(path.read_text())
    data["facts"] = [f for f in data["facts"] if f["id"] != "metric.kv_offload_allocation_failure"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    copy = load_knowledge(str(knowledge_copy))
    metrics = dump(prefix_cache_queries_total=2e7, prefix_cache_hits_total=8e6, kv_offload_allocation_failure_total=40)
    small = cause(diagnose(DiagnoseRequest(metrics_before=metrics, version="0.30.0"), copy), "tier_too_small")
    assert small.likelihood == "medium"  # type: ignore[attr-defined]
    assert small.unverified_premises == ["metric.kv_offload_allocation_failure"]  # type: ignore[attr-defined]


def test_metric_names_in_the_advice_come_from_the_knowledge(knowledge_copy: Path) -> None:
    from vllm_caching_mcp.knowledge import load_knowledge

    path = knowledge_copy / "metrics.yaml"
    text = path.read_text().replace("name: vllm:inter_token_latency_seconds", "name: vllm:itl_renamed_seconds")
    path.write_text(text)
    copy = load_knowledge(str(knowledge_copy))
    result = diagnose(DiagnoseRequest(symptoms=["tpot_high"]), copy)
    assert "vllm:itl_renamed_seconds" in cause(result, "decode_bound").next_check  # type: ignore[attr-defined]


def test_shm_exhausted_from_the_reviews_finding(knowledge: Knowledge) -> None:
    # A 100 GiB native CPU tier on 0.33.0 in a pod with the default 64 MiB /dev/shm: the review's rule
    # fires, and the cause rests on its premises (the tier in /dev/shm, the start-up check).
    manifest = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          args: ["--model", "m", "--kv-offloading-size", "100"]
          resources:
            limits: {nvidia.com/gpu: 1, memory: 256Gi}
"""
    deployment = [Document(name="deploy.yaml", text=manifest)]
    result = diagnose(DiagnoseRequest(symptoms=["offload_does_not_help"], deployment=deployment), knowledge)
    shm = cause(result, "shm_exhausted")
    assert shm.likelihood == "high" and "connector.offloading" in shm.premises  # type: ignore[attr-defined]
    assert len(shm.premises) > 1  # type: ignore[attr-defined]


def test_a_question_in_words_is_read_as_its_symptoms_and_says_what_to_measure(knowledge: Knowledge) -> None:
    """ "The prefix cache hit rate barely moved after offload": the logged rate counts GPU hits only; the offload
    tier's are the external series, from 0.11.1 (wheel:vllm==0.11.1:vllm/v1/metrics/loggers.py:554)."""
    asked = "I turned on --kv-offloading-size but the Prefix cache hit rate in the logs barely moved."
    result = diagnose(DiagnoseRequest(description=asked, version="0.34.0"), knowledge)
    said = "\n".join(result.metric_notes)
    assert "read from the description as: low_hit_rate, offload_does_not_help" in said
    assert "vllm:external_prefix_cache_hits_total" in said and "GPU prefix cache only" in said
    assert "metric.external_prefix_cache_hits" in {c.id for c in result.citations}
    old = diagnose(DiagnoseRequest(symptoms=["offload_does_not_help"], version="0.11.0"), knowledge)
    assert any("no series of its own before 0.11.1" in n for n in old.metric_notes)
    # Other words are not symptoms, and a question about something else gets no note on hit rates.
    assert (
        diagnose(DiagnoseRequest(description="pods restart at night", version="0.34.0"), knowledge).metric_notes == []
    )


@pytest.mark.parametrize(
    ("version", "log", "pitfall"),
    [
        # recorded by the engine oracle (tests/data/engine/rules-0.20.2.json, rules-0.33.0.json)
        (
            "0.16.0",
            "ValueError: Connector OffloadingConnector does not support HMA but HMA is enabled. Please set "
            "`--disable-hybrid-kv-cache-manager`.",
            "pitfall.hma-flag-missing-with-shorthand",
        ),
        (
            "0.33.0",
            "pydantic ValidationError: Value error, Unsupported connector type: P2pNcclConnector",
            "pitfall.p2p-nccl-removed",
        ),
        ("0.33.0", "vllm: error: unrecognized arguments: --kv-offloading-sise 10", "pitfall.unknown-flag"),
    ],
)
def test_a_start_up_refusal_in_the_log_names_its_pitfall(
    knowledge: Knowledge, version: str, log: str, pitfall: str
) -> None:
    result = diagnose(DiagnoseRequest(log=f"INFO starting\n{log}\n", version=version), knowledge)
    [cause] = [c for c in result.causes if c.id == "refused_at_start"]
    assert pitfall in cause.title and cause.likelihood == "high" and cause.evidence == [f"log: {log}"]
    assert pitfall in {c.id for c in result.citations}
    # outside the pitfall's releases the same line is not its refusal
    if pitfall == "pitfall.hma-flag-missing-with-shorthand":
        later = diagnose(DiagnoseRequest(log=log, version="0.22.1"), knowledge)
        assert not [c for c in later.causes if c.id == "refused_at_start"]
