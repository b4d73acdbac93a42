"""size_offload against the released engine's own figures (issue 14: the released engine as the oracle).

tests/data/engine/golden-<version>.json holds what vLLM itself computed for each cell (model
config, TP, dtypes, GPU, per-rank KV budget), recorded by scripts/engine_oracle/oracle.py with
vLLM installed in a scratch venv (knowledge/ENGINE.md says how). This test needs no vLLM: it asks
size_offload the same question, with the GPU budget set so the per-rank KV budget is the
record's, and compares the figures — integers exactly.

Cells where size_offload disagrees today are listed in KNOWN_MISMATCHES with what differs; the
test asserts that the set of disagreeing cells is exactly that set, so a fix fails until its
entry is removed and a new disagreement fails at once.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.advice.model_config import architecture_from_hf_config
from vllm_caching_mcp.advice.render import shell_words
from vllm_caching_mcp.advice.sizing import SizeOffloadResult
from vllm_caching_mcp.knowledge import Connector, load_knowledge
from vllm_caching_mcp.tools import ToolInputError, run_tool
from vllm_caching_mcp.versions import parse_specifier

REPO = Path(__file__).resolve().parents[1]
ENGINE_DATA = REPO / "tests" / "data" / "engine"
GOLDEN_FILES = sorted(ENGINE_DATA.glob("golden-*.json"))
GIB = 1 << 30
# size_offload rounds live sessions to 3 decimals; the engine's max concurrency is a float.
CONCURRENCY_TOLERANCE = 5e-4 + 1e-9

# (golden file version, cell id, source of the architecture) → (the fields that differ, why).
# "config": size_offload reads the same config.json the engine was given; "knowledge": size_offload is
# given the model by its knowledge id (knowledge/models.yaml). The fields must match exactly too, so a
# partial fix or a new difference in a known cell fails as well. None today: the four found when the cells
# were first recorded (the null block, FlashMLA's 64-token block for fp8 MLA on Hopper, sliding-window
# in-flight tokens, hybrid 'align' mode) are fixed; knowledge/ENGINE.md tells the story.
KNOWN_MISMATCHES: dict[tuple[str, str, str], tuple[frozenset[str], str]] = {}


# Each golden file, read once: {file name: its content}.
GOLDEN: dict[str, dict[str, Any]] = {path.name: json.loads(path.read_text()) for path in GOLDEN_FILES}


def _records() -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """Every recorded cell with its release, and the cells a release records more than once."""
    records: list[tuple[str, dict[str, Any]]] = []
    conflicts: list[str] = []
    for name, golden in GOLDEN.items():
        ids = Counter(cell["id"] for cell in golden["cells"])
        conflicts += [f"{name}: {cid} recorded twice" for cid, n in sorted(ids.items()) if n > 1]
        records += [(golden["vllm_version"], cell) for cell in golden["cells"]]
    releases = Counter(golden["vllm_version"] for golden in GOLDEN.values())
    conflicts += [f"vLLM {v} has more than one golden file" for v, n in sorted(releases.items()) if n > 1]
    return records, conflicts


RECORDS, RECORD_CONFLICTS = _records()
SOURCES = ("config", "knowledge")


def _ask(version: str, cell: dict[str, Any], source: str, **extra: Any) -> SizeOffloadResult:
    inputs = cell["inputs"]
    budget = inputs["kv_budget_bytes_per_rank"]
    assert budget % GIB == 0, "the budget must be whole GiB to be passed to size_offload exactly"
    request: dict[str, Any] = {
        "version": version,
        "tensor_parallel_size": inputs["tensor_parallel_size"],
        "pipeline_parallel_size": inputs["pipeline_parallel_size"],
        "kv_cache_dtype": inputs["kv_cache_dtype"],
        "gpu": inputs["gpu"]["knowledge_id"],
        # The per-rank KV budget = gpu_memory_gib × utilization − weights − reserve = budget.
        "gpu_memory_gib": budget / GIB,
        "gpu_memory_utilization": 1.0,
        "weights_gib_per_gpu": 0.0,
        "activation_reserve_gib": 0.0,
        "max_model_len": inputs["max_model_len"],
    }
    if "max_num_batched_tokens" in inputs["engine_args"]:
        # Otherwise the engine took vllm serve's default for the GPU, and size_offload must find the same.
        request["max_num_batched_tokens"] = inputs["max_num_batched_tokens"]
    if inputs.get("enable_prefix_caching") is not None:
        request["enable_prefix_caching"] = inputs["enable_prefix_caching"]
    if inputs["block_size_flag"] is not None:
        request["block_size"] = inputs["block_size_flag"]
    disabled = inputs["engine_args"].get("disable_hybrid_kv_cache_manager")
    if inputs.get("hybrid_kv_cache_manager") is None and disabled is not None:  # a cell refused before it is planned
        request["hybrid_kv_cache_manager"] = not disabled
    if inputs.get("hybrid_kv_cache_manager") is not None:
        # The cells run without a KV connector, so the hybrid manager is as the engine resolved it. size_offload
        # would otherwise take it from the offload connector's HMA support, which before 0.21.0 turns it off.
        request["hybrid_kv_cache_manager"] = inputs["hybrid_kv_cache_manager"]
    if source == "config":
        raw = json.loads((REPO / inputs["config"]).read_text())
        request["architecture"] = architecture_from_hf_config(raw, name=inputs["model"]).model_dump()
    else:
        request["model"] = inputs["model"]
    request.update(extra)  # the offload comparison's fields
    result = run_tool("size_offload", request)
    assert isinstance(result, SizeOffloadResult)
    return result


def fields_of(diffs: list[str]) -> set[str]:
    """The figures a list of differences (`field: ours != engine`) names."""
    return {d.split(":", 1)[0] for d in diffs}


def differences(result: SizeOffloadResult, engine: dict[str, Any]) -> list[str]:
    """Every figure where size_offload and the engine disagree, as `field: ours != engine`."""
    diffs: list[str] = []

    def check(field: str, ours: object, theirs: object) -> None:
        if ours != theirs:
            diffs.append(f"{field}: {ours} != {theirs}")

    check("block_size", result.block_size, engine["block_size"])
    check("kv_heads_per_rank", result.kv_heads_per_rank, engine["num_kv_heads_per_rank"])
    ours_kinds = {k.kind: k for k in result.layer_kinds}
    check("layer kinds", sorted(ours_kinds), sorted(engine["layer_kinds"]))
    for kind, figures in engine["layer_kinds"].items():
        mine = ours_kinds.get(kind)
        if mine is None:
            continue
        check(f"{kind}.layers_per_rank", mine.layers_per_rank, figures["layers_per_rank"])
        if kind == "linear_attention":
            check(
                f"{kind}.state_bytes_per_sequence_per_layer_per_rank",
                mine.state_bytes_per_sequence_per_rank,
                figures["state_bytes_per_sequence_per_layer_per_rank"],
            )
            continue
        check(
            f"{kind}.bytes_per_token_per_layer_per_rank",
            mine.bytes_per_token_per_layer_per_rank,
            figures["bytes_per_token_per_layer_per_rank"],
        )
        check(f"{kind}.bytes_per_token_per_rank", mine.bytes_per_token_per_rank, figures["bytes_per_token_per_rank"])
        check(f"{kind}.block_size", [mine.block_size], group_blocks(engine).get(kind))
    check("gpu_block_bytes_per_rank", result.gpu_block_bytes_per_rank, engine["block_bytes_per_rank"])
    check("num_gpu_blocks", result.num_gpu_blocks, engine["num_gpu_blocks"])
    # The engine refuses to start when one request at max_model_len does not fit the usable pool.
    ours_start = not any("refuse to start" in w for w in result.warnings)
    check("starts", ours_start, engine["starts"])
    theirs = engine["max_concurrency_at_max_model_len"]
    if abs(result.live_sessions_at_max_model_len - theirs) > CONCURRENCY_TOLERANCE:
        diffs.append(f"max_concurrency: {result.live_sessions_at_max_model_len} != {theirs}")
    return diffs


_SPEC_KINDS = {
    "FullAttentionSpec": "full_attention",
    "MLAAttentionSpec": "mla",
    "SlidingWindowSpec": "sliding_window",
    "ChunkedLocalAttentionSpec": "chunked_local",
}


def group_blocks(engine: dict[str, Any]) -> dict[str, list[int]]:
    """The block sizes of each attention kind's KV cache groups, after the planner unified their pages."""
    blocks: dict[str, set[int]] = {}
    for group in engine["kv_cache_groups"]:
        kind = _SPEC_KINDS.get(group["spec"]["type"])
        if kind is not None:
            blocks.setdefault(kind, set()).add(group["spec"]["block_size"])
    return {kind: sorted(sizes) for kind, sizes in blocks.items()}


def refused_before_planning(engine: dict[str, Any]) -> bool:
    """vLLM rejected the configuration (config validation, or a layer's check while the model is built)."""
    return "refused_at" in engine


def refusal_differences(version: str, cell: dict[str, Any], source: str) -> list[str]:
    """Where vLLM rejects a configuration, size_offload must too: an error naming the field, or an ERROR warning."""
    try:
        result = _ask(version, cell, source)
    except (ToolInputError, AdviceError):
        return []
    if any(w.startswith("ERROR") for w in result.warnings):
        return []
    engine = cell["engine"]
    return [f"starts: size_offload sized it; vLLM refused it at {engine['refused_at']}: {engine['refusal']}"]


_DIFFERENCES: dict[tuple[str, str, str], list[str]] = {}


def cell_differences(version: str, cell: dict[str, Any], source: str) -> list[str]:
    """The differences for one recorded cell (asked once per run: the agreement test and the report share them)."""
    key = (version, cell["id"], source)
    if key not in _DIFFERENCES:
        if refused_before_planning(cell["engine"]):
            _DIFFERENCES[key] = refusal_differences(version, cell, source)
        else:
            _DIFFERENCES[key] = differences(_ask(version, cell, source), cell["engine"])
    return _DIFFERENCES[key]


def test_golden_records_exist_and_carry_their_provenance() -> None:
    assert GOLDEN_FILES, "no tests/data/engine/golden-*.json"
    assert RECORDS
    ids = [(v, c["id"]) for v, c in RECORDS]
    assert len(ids) == len(set(ids)), "a cell recorded twice"
    assert not RECORD_CONFLICTS, RECORD_CONFLICTS
    for version, cell in RECORDS:
        prov, inputs, engine = cell["provenance"], cell["inputs"], cell["engine"]
        assert prov["vllm_version"] == version
        assert prov["recorded_at"]
        assert (REPO / inputs["config"]).is_file(), inputs["config"]
        for key in ("name", "compute_capability", "total_memory_bytes", "knowledge_id"):
            assert inputs["gpu"][key], key
        assert inputs["kv_budget_bytes_per_rank"] > 0
        if refused_before_planning(engine):
            assert engine["starts"] is False and engine["refusal"] and engine["raised_at"], cell["id"]
            continue
        # The record is self-consistent: blocks × block bytes is the allocation, within the budget.
        assert engine["num_gpu_blocks"] * engine["block_bytes_per_rank"] == engine["kv_cache_tensor_bytes_per_rank"]
        assert engine["starts"] == (engine["refusal"] is None)
        assert engine["kv_cache_tensor_bytes_per_rank"] <= inputs["kv_budget_bytes_per_rank"]
        assert engine["kv_bytes_per_token_per_rank"] == sum(
            k.get("bytes_per_token_per_rank", 0) for k in engine["layer_kinds"].values()
        )


def test_known_mismatches_name_recorded_cells() -> None:
    recorded = {(v, c["id"]) for v, c in RECORDS}
    for version, cid, source in KNOWN_MISMATCHES:
        assert (version, cid) in recorded, f"KNOWN_MISMATCHES names {cid} ({version}), which has no record"
        assert source in SOURCES


@pytest.mark.parametrize("source", SOURCES)
def test_size_offload_agrees_with_the_engine_except_the_known_mismatches(source: str) -> None:
    found: dict[tuple[str, str, str], list[str]] = {}
    for version, cell in RECORDS:
        diffs = cell_differences(version, cell, source)
        if diffs:
            found[(version, cell["id"], source)] = diffs
    expected = {k for k in KNOWN_MISMATCHES if k[2] == source}
    new = {k: v for k, v in found.items() if k not in expected}
    fixed = expected - set(found)
    assert not new, f"size_offload disagrees with the engine (add a fix, or a KNOWN_MISMATCHES entry): {new}"
    assert not fixed, f"these cells agree now; remove them from KNOWN_MISMATCHES: {sorted(fixed)}"
    changed = {k: diffs for k, diffs in found.items() if fields_of(diffs) != KNOWN_MISMATCHES[k][0]}
    assert not changed, f"known mismatches whose differing fields changed (update the entry): {changed}"


def test_the_comparison_can_fail() -> None:
    """The checker reports a planted difference in each compared figure (so agreement means something)."""
    version, cell = next((v, c) for v, c in RECORDS if not refused_before_planning(c["engine"]))
    result = _ask(version, cell, "config")
    engine = json.loads(json.dumps(cell["engine"]))
    assert differences(result, engine) == [] or (version, cell["id"], "config") in KNOWN_MISMATCHES
    planted = dict(engine)
    planted["num_gpu_blocks"] = engine["num_gpu_blocks"] + 1
    planted["block_bytes_per_rank"] = engine["block_bytes_per_rank"] * 2
    planted["block_size"] = engine["block_size"] * 2
    planted["max_concurrency_at_max_model_len"] = engine["max_concurrency_at_max_model_len"] + 0.01
    planted["starts"] = not engine["starts"]
    planted["num_kv_heads_per_rank"] = engine["num_kv_heads_per_rank"] + 1
    kind = next(iter(engine["layer_kinds"]))
    planted["layer_kinds"] = {kind: dict(engine["layer_kinds"][kind])}
    planted["layer_kinds"][kind]["bytes_per_token_per_layer_per_rank"] += 2
    fields = fields_of(differences(result, planted))
    assert {
        "num_gpu_blocks",
        "gpu_block_bytes_per_rank",
        "block_size",
        "max_concurrency",
        "starts",
        "kv_heads_per_rank",
        f"{kind}.bytes_per_token_per_layer_per_rank",
    } <= fields


# ----------------------------------------------------------------------------- the offload backends
# A cell's "offload" section (scripts/engine_oracle/offload.py) holds what the engine did on the scheduler side with
# --kv-offloading-backend native and lmcache and --kv-offloading-size N: the kv_transfer_config the shorthand
# resolved into, the hybrid KV cache manager decision, the native spec's CPU blocks, or the refusal. size_offload is
# asked for the same deployment (the backend and N), and render_config renders it; integers exactly. Cells recorded
# without an offload section (older files) are not compared here; a section that cannot be compared fails.

OFFLOAD_RECORDS = [(version, cell) for version, cell in RECORDS if "offload" in cell]
# The stage where a native refusal is the GPU pool's own (one request at max_model_len does not fit).
GPU_POOL_STAGE = "kv_cache_plan"
# The render_config backend that writes each connector the shorthand resolves to.
RENDER_BACKENDS = {
    "OffloadingConnector": "native_cpu",
    "LMCacheMPConnector": "lmcache_mp",
    "LMCacheConnectorV1": "lmcache",
}


def _ask_offload(version: str, cell: dict[str, Any], source: str, backend: str) -> SizeOffloadResult:
    """size_offload for the cell with its CPU tier; the hybrid manager left to the connector, as in the engine."""
    size = cell["offload"]["kv_offloading_size_gib"]
    # A cell that turns the hybrid manager off itself (--disable-hybrid-kv-cache-manager) keeps it off with the
    # connector too.
    disabled = cell["inputs"]["engine_args"].get("disable_hybrid_kv_cache_manager")
    hma = None if disabled is None else not disabled
    return _ask(
        version, cell, source, offload_backend=backend, kv_offloading_size_gib=size, hybrid_kv_cache_manager=hma
    )


def _cited_connector(result: SizeOffloadResult) -> str | None:
    """The connector size_offload says the backend selects (the one connector entry it cites)."""
    knowledge = load_knowledge()
    names = [e.name for c in result.citations if isinstance(e := knowledge.by_id.get(c.id), Connector)]
    return names[0] if len(names) == 1 else f"{len(names)} connectors cited"


def _compare(diffs: list[str], prefix: str) -> Any:
    def check(field: str, ours: object, theirs: object) -> None:
        if ours != theirs:
            diffs.append(f"{prefix}.{field}: {ours} != {theirs}")

    return check


def _will_not_start(result: SizeOffloadResult) -> list[str]:
    return [w for w in result.warnings if w.startswith("ERROR: ") and "will not start" in w]


def native_differences(result: SizeOffloadResult, native: dict[str, Any]) -> list[str]:
    """Every figure of the native backend where size_offload and the engine disagree."""
    outcome = native.get("outcome")
    if outcome not in ("works", "refused"):
        return [f"native: cannot compare the outcome {outcome!r}: {native.get('error') or native.get('why')}"]
    diffs: list[str] = []
    check = _compare(diffs, "native")
    if outcome == "refused" and native["stage"] == GPU_POOL_STAGE:  # the cell's own refusal, compared above
        check("refuses to start (GPU pool)", any("refuse to start" in w for w in result.warnings), True)
        return diffs
    ktc = native["kv_transfer_config"]
    check("kv_connector", _cited_connector(result), ktc["kv_connector"])
    tier = result.offload
    asked_bytes = int(ktc["kv_connector_extra_config"]["cpu_bytes_to_use"])
    check("cpu_bytes_to_use", None if tier is None else tier.cpu_bytes_to_use, asked_bytes)
    check("starts", not _will_not_start(result), outcome == "works")
    if outcome == "refused":
        if "does not support HMA" in native["message"]:
            named = any("--disable-hybrid-kv-cache-manager" in w for w in _will_not_start(result))
            check("names --disable-hybrid-kv-cache-manager", named, True)
        return diffs
    check("hybrid_kv_cache_manager", result.hybrid_kv_cache_manager, native["hybrid_kv_cache_manager"])
    check("num_gpu_blocks", result.num_gpu_blocks, native["num_gpu_blocks"])
    if tier is None or native.get("num_cpu_blocks") is None:
        return [*diffs, "native: cannot compare: no CPU tier in the answer or no CPU blocks in the record"]
    check("num_cpu_blocks", tier.num_chunks, native["num_cpu_blocks"])
    ours_blocks = sorted({k.block_size for k in result.layer_kinds if k.block_size is not None} or {result.block_size})
    check("offloaded_block_size_tokens", ours_blocks, sorted(set(native["offloaded_block_size_tokens"])))
    for field, ours in (  # figures some releases' specs do not keep (None in the record)
        ("worker_kv_bytes_per_block", result.gpu_block_bytes_per_rank),
        ("cpu_block_bytes", tier.chunk_bytes),
        ("replicated_layout", tier.replicated_mla_layout),
    ):
        if native.get(field) is not None:
            check(field, ours, native[field])
    return diffs


def lmcache_differences(result: SizeOffloadResult, lmcache: dict[str, Any]) -> list[str]:
    """The connector the lmcache backend selects, the hybrid manager decision and what becomes of the size."""
    outcome = lmcache.get("outcome")
    if outcome == "not_reachable_offline":  # recorded without the lmcache package, which the connector's module needs
        return []
    if outcome != "configured":
        return [f"lmcache: cannot compare the outcome {outcome!r}: {lmcache.get('error') or lmcache.get('message')}"]
    diffs: list[str] = []
    check = _compare(diffs, "lmcache")
    ktc = lmcache["kv_transfer_config"]
    check("kv_connector", _cited_connector(result), ktc["kv_connector"])
    refused = lmcache["hybrid_kv_cache_manager"] and not lmcache["connector_supports_hma"]  # the factory's HMA check
    check("starts", not _will_not_start(result), not refused)
    if not refused:
        check("hybrid_kv_cache_manager", result.hybrid_kv_cache_manager, lmcache["hybrid_kv_cache_manager"])
    tier = result.offload
    passed = ktc["kv_connector_extra_config"].get("lmcache.max_local_cpu_size")
    if tier is None:
        diffs.append("lmcache: no CPU tier in the answer")
    elif passed is None:  # the size is not passed on to LMCache: the answer must say so
        check("size not passed on", "does not pass" in tier.consistency_rule, True)
    else:
        check("lmcache.max_local_cpu_size", tier.lmcache_max_local_cpu_size_gib, round(passed, 3))
    return diffs


def offload_differences(version: str, cell: dict[str, Any], source: str) -> list[str]:
    section = cell["offload"]
    if "not_in_release" in section:
        result = _ask_offload(version, cell, source, "native")
        return [] if any("does not exist in" in w for w in result.warnings) else ["--kv-offloading-size: not flagged"]
    if not {"native", "lmcache"} <= section.keys():
        return [f"cannot compare an offload section with {sorted(section)}"]
    return native_differences(_ask_offload(version, cell, source, "native"), section["native"]) + lmcache_differences(
        _ask_offload(version, cell, source, "lmcache"), section["lmcache"]
    )


def test_offload_sections_are_recorded() -> None:
    assert OFFLOAD_RECORDS, "no cell has an offload section (scripts/engine_oracle/offload.py; knowledge/ENGINE.md)"


@pytest.mark.parametrize("source", SOURCES)
def test_size_offload_agrees_with_the_engines_offload_backends(source: str) -> None:
    found: dict[tuple[str, str], list[str]] = {}
    for version, cell in OFFLOAD_RECORDS:
        if (version, cell["id"], source) in KNOWN_MISMATCHES:  # its GPU figures differ already; so would these
            continue
        diffs = offload_differences(version, cell, source)
        if diffs:
            found[(version, cell["id"])] = diffs
    assert not found, f"size_offload disagrees with the engine's offload backends: {found}"


def _without_env_prefix(words: list[str]) -> list[str]:
    while words and "=" in words[0] and words[0].split("=", 1)[0].isupper():
        words = words[1:]
    return words


def _serve_flags(result: Any) -> tuple[list[str], dict[str, str]]:
    """The words of render_config's vllm serve line (after any VAR=value prefix), and its --flag value pairs."""
    lines = [shell_words(f.content) for f in result.files]
    [words] = [w for w in (_without_env_prefix(w) for w in lines) if w[:2] == ["vllm", "serve"]]
    flags = {
        word: words[i + 1]
        for i, word in enumerate(words[:-1])
        if word.startswith("--") and not words[i + 1].startswith("--")
    }
    return words, flags


def render_differences(version: str, cell: dict[str, Any]) -> list[str]:
    """What render_config writes for the same deployment against what the engine resolved from the shorthand."""
    inputs, section = cell["inputs"], cell["offload"]
    if "not_in_release" in section:
        return []
    entry = load_knowledge().find_model(inputs["model"])
    assert entry is not None, inputs["model"]
    request = {
        "model": entry.hf_repo,
        "version": version,
        "parallelism": {
            "tensor_parallel_size": inputs["tensor_parallel_size"],
            "pipeline_parallel_size": inputs["pipeline_parallel_size"],
        },
        "sizes": {"kv_offloading_size_gib": section["kv_offloading_size_gib"]},
    }
    diffs: list[str] = []
    native, lmcache = section["native"], section["lmcache"]
    if "kv_transfer_config" in native:
        check = _compare(diffs, "render native_cpu")
        rendered = run_tool("render_config", {**request, "backend": "native_cpu"})
        words, flags = _serve_flags(rendered)
        engine_args = native["engine_args"]
        check("--kv-offloading-backend", flags.get("--kv-offloading-backend"), engine_args["kv_offloading_backend"])
        cpu_bytes = int(native["kv_transfer_config"]["kv_connector_extra_config"]["cpu_bytes_to_use"])
        check("--kv-offloading-size × 2^30", float(flags["--kv-offloading-size"]) * GIB, cpu_bytes)
        check("--kv-transfer-config", flags.get("--kv-transfer-config"), None)
        if native.get("stage") != "kv_cache_plan":  # refused before the connector: its HMA verdict is not known
            hma_refused = native["outcome"] == "refused" and "does not support HMA" in native["message"]
            check("--disable-hybrid-kv-cache-manager", "--disable-hybrid-kv-cache-manager" in words, hma_refused)
        [vllm] = [c for c in rendered.memory.components if c.name == "vllm"]
        check("pinned bytes", round(vllm.pinned_gib * GIB), cpu_bytes)
    connector = lmcache.get("kv_transfer_config", {}).get("kv_connector")
    if connector is not None:
        check = _compare(diffs, f"render {RENDER_BACKENDS.get(connector)}")
        if connector not in RENDER_BACKENDS:
            return [*diffs, f"render: no render_config backend writes {connector}"]
        rendered = run_tool("render_config", {**request, "backend": RENDER_BACKENDS[connector]})
        written = json.loads(_serve_flags(rendered)[1]["--kv-transfer-config"])
        check("kv_connector", written["kv_connector"], connector)
        check("kv_role", written["kv_role"], lmcache["kv_transfer_config"]["kv_role"])
    return diffs


def test_render_config_writes_what_the_engine_resolved_from_the_offload_shorthand() -> None:
    found = {(v, c["id"]): d for v, c in OFFLOAD_RECORDS if (d := render_differences(v, c))}
    assert not found, f"render_config writes another offload configuration than the engine resolved: {found}"


def test_the_offload_comparison_can_fail() -> None:
    """A planted difference in each compared figure is reported (so agreement means something)."""
    version, cell = next(
        (v, c)
        for v, c in OFFLOAD_RECORDS
        # a release that reports the CPU block's bytes (0.20.2's spec does not)
        if c["offload"].get("native", {}).get("outcome") == "works" and c["offload"]["native"]["cpu_block_bytes"]
    )
    native = json.loads(json.dumps(cell["offload"]["native"]))
    result = _ask_offload(version, cell, "config", "native")
    assert native_differences(result, native) == []
    planted = {
        **native,
        "num_cpu_blocks": native["num_cpu_blocks"] + 1,
        "cpu_block_bytes": native["cpu_block_bytes"] + 4096,
        "hybrid_kv_cache_manager": not native["hybrid_kv_cache_manager"],
        "offloaded_block_size_tokens": [t * 2 for t in native["offloaded_block_size_tokens"]],
        "replicated_layout": not native["replicated_layout"],
    }
    fields = fields_of(native_differences(result, planted))
    assert {
        "native.num_cpu_blocks",
        "native.cpu_block_bytes",
        "native.hybrid_kv_cache_manager",
        "native.offloaded_block_size_tokens",
        "native.replicated_layout",
    } <= fields
    refused = {**native, "outcome": "refused", "stage": "scheduler_connector", "message": "planted"}
    assert "native.starts" in fields_of(native_differences(result, refused))
    assert native_differences(result, {**native, "outcome": "oracle_error", "error": "planted"})


def test_a_refusal_is_compared_both_ways() -> None:
    """A cell vLLM refused must be refused by size_offload; sizing it without an error is a difference."""
    refused = [(v, c) for v, c in RECORDS if refused_before_planning(c["engine"])]
    assert refused, "the matrix records no configuration vLLM rejects (oracle.py CELLS has TP 3 cells for that)"
    version, cell = refused[0]
    assert refusal_differences(version, cell, "knowledge") == []
    # The same request at a TP the model divides by is sized, so a refusal record for it would be a difference.
    sized = json.loads(json.dumps(cell))
    sized["inputs"]["tensor_parallel_size"] = 1
    assert refusal_differences(version, sized, "knowledge")


# ----------------------------------------------------------------------------- the agreement report
# knowledge/ENGINE_AGREEMENT.md lists every recorded cell with the engine's figures and whether size_offload
# agrees (from the config.json and from the knowledge entry). It is generated from the records:
# `python tests/test_engine_golden.py --write`; the test below fails when it is out of date.

AGREEMENT_REPORT = REPO / "knowledge" / "ENGINE_AGREEMENT.md"


def _backends(engine: dict[str, Any]) -> str:
    return ", ".join(sorted({b.split(":", 1)[1] for b in engine.get("attention_backends", [])})) or "—"


def _verdict(version: str, cell: dict[str, Any]) -> str:
    verdicts = []
    for source in SOURCES:
        diffs = cell_differences(version, cell, source)
        if diffs and (version, cell["id"], source) in KNOWN_MISMATCHES:
            verdicts.append(f"{source}: known mismatch")
        elif diffs:
            verdicts.append(f"{source}: DIFFERS")
    return "; ".join(verdicts) or ("refused by both" if refused_before_planning(cell["engine"]) else "agrees")


def _cell_row(version: str, cell: dict[str, Any]) -> str:
    engine = cell["engine"]
    if refused_before_planning(engine):
        figures = ["—"] * 4 + [f"refused ({engine['refused_at']}): {engine['refusal'][:100]}"]
    else:
        figures = [
            str(engine["block_size"]),
            f"{engine['kv_bytes_per_token_per_rank']:,}",
            f"{engine['num_gpu_blocks']:,}",
            f"{engine['max_concurrency_at_max_model_len']:.3f}",
            "starts" if engine["starts"] else "refuses to start",
        ]
    native = (cell.get("offload") or {}).get("native") or {}
    cpu = native.get("num_cpu_blocks")
    cpu_text = f"{cpu:,}" if isinstance(cpu, int) else ("refused" if native.get("outcome") == "refused" else "—")
    cells = [f"`{cell['id']}`", _backends(engine), *figures, cpu_text, _verdict(version, cell)]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _architectures_covered(by_version: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Cells per model class (config.json architectures[0]) and release: what knowledge/engine.yaml's
    engine.recorded-architectures lets size_offload call verified."""
    versions = sorted(by_version, key=lambda v: tuple(int(p) for p in v.split(".")))
    counts: dict[str, dict[str, int]] = {}
    models: dict[str, set[str]] = {}
    for version in versions:
        for cell in by_version[version]:
            arch = json.loads((REPO / cell["inputs"]["config"]).read_text())["architectures"][0]
            counts.setdefault(arch, {}).setdefault(version, 0)
            counts[arch][version] += 1
            models.setdefault(arch, set()).add(cell["inputs"]["model"])
    return [
        "",
        "## Architectures covered",
        "",
        "Cells recorded per model class and release; size_offload calls its KV figures verified against the engine",
        "for these classes at these releases only (rule engine.recorded-architectures).",
        "",
        "| architecture | configs | " + " | ".join(versions) + " |",
        "|---|---|" + "---|" * len(versions),
        *(
            f"| {arch} | {', '.join(sorted(models[arch]))} | "
            + " | ".join(str(counts[arch].get(v, "—")) for v in versions)
            + " |"
            for arch in sorted(counts)
        ),
    ]


def agreement_report() -> str:
    by_version: dict[str, list[dict[str, Any]]] = {}
    for version, cell in RECORDS:
        by_version.setdefault(version, []).append(cell)
    lines = [
        "# size_offload against the released engine, cell by cell",
        "",
        "Generated by `python tests/test_engine_golden.py --write` from `tests/data/engine/golden-*.json`",
        "(recorded by `scripts/engine_oracle/`; knowledge/ENGINE.md describes the method). Every cell is sized",
        'twice, from its config.json and from the model\'s knowledge entry; "agrees" means every compared',
        "figure is equal (integers exactly, max concurrency to size_offload's 3 decimals). Budget: 40 GiB of",
        "KV cache per rank; max_model_len: the model's. CPU blocks: what the native OffloadingConnector",
        "allocates for `--kv-offloading-size 64` (GiB, the total across the ranks), or `refused` where vLLM",
        "does not start with it.",
        "",
        "| release | cells | refused by vLLM | offload sections | agree |",
        "|---|---|---|---|---|",
    ]
    rows: list[str] = []
    for version in sorted(by_version, key=lambda v: tuple(int(p) for p in v.split("."))):
        cells = by_version[version]
        verdicts = [_verdict(version, c) for c in cells]
        agree = sum(v in ("agrees", "refused by both") for v in verdicts)
        refused = sum(refused_before_planning(c["engine"]) for c in cells)
        offload = sum("offload" in c for c in cells)
        lines.append(f"| {version} | {len(cells)} | {refused} | {offload} | {agree} of {len(cells)} |")
        rows += [
            "",
            f"## vLLM {version}",
            "",
            "| cell | attention backends | block | KV B/token/rank | GPU blocks | max concurrency | starts "
            "| CPU blocks/rank | size_offload |",
            "|---|---|---|---|---|---|---|---|---|",
            *(_cell_row(version, c) for c in cells),
        ]
    lines += _architectures_covered(by_version) + _beyond_the_matrix()
    # Cells a release cannot run offline, by model and reason: {(model, why): {release: count}}.
    not_recorded: dict[tuple[str, str], dict[str, int]] = {}
    for golden in GOLDEN.values():
        for item in golden.get("not_recorded", []):
            counts = not_recorded.setdefault((item["id"].split("/", 1)[0], item["why"]), {})
            counts[golden["vllm_version"]] = counts.get(golden["vllm_version"], 0) + 1
    if not_recorded:
        rows += ["", "## Not recorded", ""]
        for (model, why), counts in sorted(not_recorded.items()):
            where = ", ".join(f"{n} cells on {v}" for v, n in sorted(counts.items()))
            rows.append(f"- `{model}` ({where}): {why}")
    return "\n".join(lines + rows + _recorded_by_release(by_version)) + "\n"


def _beyond_the_matrix() -> list[str]:
    """The models recorded outside the matrix (configs-RELEASE.json), per model class: sized from config.json."""
    rows: list[str] = []
    for path in BEYOND_THE_MATRIX:
        golden = json.loads(path.read_text())
        version, by_arch = golden["vllm_version"], {}
        differing = {line.split(":", 1)[0] for line in config_file_differences(golden)}
        for cell in golden["cells"]:
            arch = (
                cell["engine"].get("architecture")
                or json.loads((REPO / cell["inputs"]["config"]).read_text())["architectures"][0]
            )
            by_arch.setdefault(arch, []).append(cell)
        for arch, cells in sorted(by_arch.items()):
            models = ", ".join(sorted({c["inputs"]["model"] for c in cells}))
            refused = sum(refused_before_planning(c["engine"]) for c in cells)
            agree = sum(c["id"] not in differing for c in cells)
            rows.append(f"| {arch} | {models} | {version} | {len(cells)} | {refused} | {agree} of {len(cells)} |")
    return [
        "",
        "## Models outside the matrix",
        "",
        "Recorded with `oracle.py --configs` and compared from config.json alone (no knowledge entry): "
        "`tests/data/engine/configs-RELEASE.json`.",
        "",
        "| architecture | configs | release | cells | refused by vLLM | agree |",
        "|---|---|---|---|---|---|",
        *rows,
    ]


def _records_by_release(kind: str, key: str) -> dict[str, int]:
    """How many ``key`` entries each `KIND-X.Y.Z.json` record holds, by the release it was recorded in."""
    records = (json.loads(path.read_text()) for path in sorted(ENGINE_DATA.glob(f"{kind}-*.json")))
    return {record["vllm_version"]: len(record[key]) for record in records}


def _recorded_by_release(by_version: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Per covered release: what the engine oracle recorded there, and which engine rules change value there,
    so what a release without records rests on is the code reading alone (issue 28)."""
    knowledge = load_knowledge()
    rule_cases = _records_by_release("rules", "cases")
    schema_classes = _records_by_release("schema", "classes")
    rows = [
        "",
        "## Recorded, and read from code only, by release",
        "",
        "Every vLLM release the knowledge covers. Cells: the golden cells recorded there (sizes, blocks, offload);",
        "rule cases: the command lines of the error-level review rules run there (`rules-X.Y.Z.json`); config",
        "classes: the classes of the engine schema built there, to check what they accept (`schema-X.Y.Z.json`).",
        "Rules that change here: the `knowledge/engine.yaml` rules whose value starts at this release. In a release",
        "with no cells, every sizing rule (and, with no rule cases, every refusal) is read from the code only, from",
        "the wheel lines each rule cites; where cells exist, the rules those cells exercise are recorded.",
        "",
        "| release | cells | rule cases | config classes | read from code only | rules that change here |",
        "|---|---|---|---|---|---|",
    ]
    for release in knowledge.release_versions("vllm"):
        version = str(release)
        changing = sorted(
            rule.id
            for rule in knowledge.engine.rules
            for value in rule.values
            if any(s.operator == ">=" and s.version == version for s in parse_specifier(value.versions))
        )
        cells = len(by_version.get(version, []))
        cases = rule_cases.get(version, 0)
        code_only = (
            "everything" if not cells and not cases else "sizing" if not cells else "refusals" if not cases else "—"
        )
        changes = ", ".join(f"`{r}`" for r in changing) or "—"
        classes = schema_classes.get(version, 0)
        rows.append(f"| {version} | {cells or '—'} | {cases or '—'} | {classes or '—'} | {code_only} | {changes} |")
    return rows


def test_the_agreement_report_is_current() -> None:
    write = "python tests/test_engine_golden.py --write"
    assert AGREEMENT_REPORT.is_file(), f"knowledge/ENGINE_AGREEMENT.md is missing: {write}"
    assert AGREEMENT_REPORT.read_text() == agreement_report(), f"knowledge/ENGINE_AGREEMENT.md is out of date: {write}"


def config_file_differences(golden: dict[str, Any]) -> list[str]:
    """A line per cell of a golden file recorded with oracle.py --configs where size_offload, reading the cell's
    config.json alone (such models have no knowledge entry), differs from the engine."""
    version, lines = golden["vllm_version"], []
    for cell in golden["cells"]:
        diffs = [f"config: {d}" for d in cell_differences(version, cell, "config")]
        if "offload" in cell and not refused_before_planning(cell["engine"]):
            diffs += [f"offload: {d}" for d in offload_differences(version, cell, "config")]
        if diffs:
            lines.append(f"{cell['id']}: " + "; ".join(diffs))
    return lines


BEYOND_THE_MATRIX = sorted(ENGINE_DATA.glob("configs-*.json"))


@pytest.mark.parametrize("path", BEYOND_THE_MATRIX, ids=[p.name for p in BEYOND_THE_MATRIX])
def test_size_offload_agrees_with_the_engine_beyond_the_matrix(path: Path) -> None:
    """Models recorded outside the matrix (LFM2's short convolutions at 0.33.0), sized from config.json."""
    golden = json.loads(path.read_text())
    assert golden["cells"] and all((REPO / c["inputs"]["config"]).is_file() for c in golden["cells"])
    assert config_file_differences(golden) == []


def compare_file(path: Path) -> int:
    """Every difference between size_offload and a golden file recorded elsewhere (oracle.py --configs DIR):
    a line per cell that differs, a count at the end; 1 if any differs."""
    golden = json.loads(path.read_text())
    missing = sorted({c["inputs"]["config"] for c in golden["cells"] if not (REPO / c["inputs"]["config"]).is_file()})
    if missing:
        print(f"{path}: the config files it was recorded from are gone: {', '.join(missing[:5])}")
        return 2
    lines = config_file_differences(golden)
    count = f"vLLM {golden['vllm_version']}: {len(golden['cells'])} cells, {len(lines)} differ from size_offload"
    print("\n".join([*lines, count]))
    return 1 if lines else 0


if __name__ == "__main__":
    # python tests/test_engine_golden.py [--write | --compare FILE]: print the agreement report, write it to
    # knowledge/ENGINE_AGREEMENT.md, or compare size_offload with a golden file recorded for other models.
    import sys

    if sys.argv[1:2] == ["--compare"] and len(sys.argv) == 3:
        sys.exit(compare_file(Path(sys.argv[2])))
    if sys.argv[1:] == ["--write"]:
        AGREEMENT_REPORT.write_text(agreement_report())
        print(f"wrote {AGREEMENT_REPORT.relative_to(REPO)}")
    else:
        sys.stdout.write(agreement_report())
