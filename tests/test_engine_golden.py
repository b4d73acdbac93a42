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
from pathlib import Path
from typing import Any

import pytest

from vllm_caching_mcp.advice.model_config import architecture_from_hf_config
from vllm_caching_mcp.advice.sizing import SizeOffloadResult
from vllm_caching_mcp.tools import run_tool

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


def _records() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in GOLDEN_FILES:
        golden = json.loads(path.read_text())
        out += [(golden["vllm_version"], cell) for cell in golden["cells"]]
    return out


RECORDS = _records()
SOURCES = ("config", "knowledge")


def _ask(version: str, cell: dict[str, Any], source: str) -> SizeOffloadResult:
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
        "max_num_batched_tokens": inputs["max_num_batched_tokens"],
    }
    if inputs.get("enable_prefix_caching") is not None:
        request["enable_prefix_caching"] = inputs["enable_prefix_caching"]
    if inputs["block_size_flag"] is not None:
        request["block_size"] = inputs["block_size_flag"]
    if source == "config":
        raw = json.loads((REPO / inputs["config"]).read_text())
        request["architecture"] = architecture_from_hf_config(raw, name=inputs["model"]).model_dump()
    else:
        request["model"] = inputs["model"]
    result = run_tool("size_offload", request)
    assert isinstance(result, SizeOffloadResult)
    return result


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
    check("gpu_block_bytes_per_rank", result.gpu_block_bytes_per_rank, engine["block_bytes_per_rank"])
    check("num_gpu_blocks", result.num_gpu_blocks, engine["num_gpu_blocks"])
    # The engine refuses to start when one request at max_model_len does not fit the usable pool.
    ours_start = not any("refuse to start" in w for w in result.warnings)
    check("starts", ours_start, engine["starts"])
    theirs = engine["max_concurrency_at_max_model_len"]
    if abs(result.live_sessions_at_max_model_len - theirs) > CONCURRENCY_TOLERANCE:
        diffs.append(f"max_concurrency: {result.live_sessions_at_max_model_len} != {theirs}")
    return diffs


def test_golden_records_exist_and_carry_their_provenance() -> None:
    assert GOLDEN_FILES, "no tests/data/engine/golden-*.json"
    assert RECORDS
    ids = [(v, c["id"]) for v, c in RECORDS]
    assert len(ids) == len(set(ids)), "a cell recorded twice"
    for version, cell in RECORDS:
        prov, inputs, engine = cell["provenance"], cell["inputs"], cell["engine"]
        assert prov["vllm_version"] == version
        assert prov["recorded_at"]
        assert (REPO / inputs["config"]).is_file(), inputs["config"]
        for key in ("name", "compute_capability", "total_memory_bytes", "knowledge_id"):
            assert inputs["gpu"][key], key
        assert inputs["kv_budget_bytes_per_rank"] > 0
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
        diffs = differences(_ask(version, cell, source), cell["engine"])
        if diffs:
            found[(version, cell["id"], source)] = diffs
    expected = {k for k in KNOWN_MISMATCHES if k[2] == source}
    new = {k: v for k, v in found.items() if k not in expected}
    fixed = expected - set(found)
    assert not new, f"size_offload disagrees with the engine (add a fix, or a KNOWN_MISMATCHES entry): {new}"
    assert not fixed, f"these cells agree now; remove them from KNOWN_MISMATCHES: {sorted(fixed)}"
    changed = {k: diffs for k, diffs in found.items() if {d.split(":", 1)[0] for d in diffs} != KNOWN_MISMATCHES[k][0]}
    assert not changed, f"known mismatches whose differing fields changed (update the entry): {changed}"


def test_the_comparison_can_fail() -> None:
    """The checker reports a planted difference in each compared figure (so agreement means something)."""
    version, cell = RECORDS[0]
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
    fields = {d.split(":", 1)[0] for d in differences(result, planted)}
    assert {
        "num_gpu_blocks",
        "gpu_block_bytes_per_rank",
        "block_size",
        "max_concurrency",
        "starts",
        "kv_heads_per_rank",
        f"{kind}.bytes_per_token_per_layer_per_rank",
    } <= fields
