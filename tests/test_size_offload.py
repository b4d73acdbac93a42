"""size_offload, as operators ask it. Every expected number is derived by hand in the test."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from conftest import exact_budget, run_in_process
from conftest import size_offload_of as ask
from conftest import sizing_model as model_of
from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.advice.model_config import Architecture
from vllm_caching_mcp.advice.sizing import (
    BenchmarkPlan,
    OffloadTier,
    SizeOffloadRequest,
    SizeOffloadResult,
    _backend_block_size,
    _gpu_memory_utilization,
    _in_flight_tokens,
    _layer_specs,
    _mamba_layout,
    _Model,
    _offload_connector,
    _offload_start_checks,
    _Parallel,
    _Pool,
    _start_check,
    _token_bytes,
    _Trail,
)
from vllm_caching_mcp.cli import main
from vllm_caching_mcp.knowledge import Knowledge, load_knowledge
from vllm_caching_mcp.knowledge_files import KnowledgeError
from vllm_caching_mcp.tools import ToolInputError, describe_validation_error, run_tool
from vllm_caching_mcp.versions import Version, parse_specifier

GIB = 1 << 30


def tier(result: SizeOffloadResult) -> OffloadTier:
    assert result.offload is not None
    return result.offload


def bench(result: SizeOffloadResult) -> BenchmarkPlan:
    assert result.benchmark is not None
    return result.benchmark


# --------------------------------------------------------------------------- full attention (GQA)


def test_llama_70b_bf16_bytes_per_token_total_and_per_rank_at_tp8(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="llama-3.1-70b", tensor_parallel_size=8, max_model_len=131072)
    # 80 layers × 8 KV heads × 128 head dim × 2 (K,V) × 2 B = 327,680 B/token in total;
    # TP 8 gives each rank 8 // 8 = 1 KV head: 80 × 1 × 128 × 2 × 2 = 40,960 B/token.
    assert r.kv_bytes_per_token_total == 327_680
    assert r.kv_bytes_per_token_per_rank == 40_960
    assert r.kv_heads_per_rank == 1
    # One GPU block = 16 tokens × 512 B × 80 layers = 655,360 B per rank.
    assert r.gpu_block_bytes_per_rank == 655_360
    # Budget: 80e9 B = 74.506 GiB × 0.92 (0.33.0's default) − 70.6e9 × 2 B / 8 GPUs (16.437 GiB) − 4 GiB reserve.
    budget = 80e9 / GIB * 0.92 - 70.6e9 * 2 / 8 / GIB - 4
    assert r.gpu_budget_gib_per_rank == pytest.approx(budget, abs=1e-3)
    assert r.num_gpu_blocks == int(budget * GIB) // 655_360
    # A 131,072-token request needs 131072 / 16 = 8192 blocks.
    assert r.live_sessions_at_max_model_len == pytest.approx(r.num_gpu_blocks / 8192, abs=1e-3)


def test_kv_heads_are_replicated_when_tp_exceeds_them(knowledge: Knowledge) -> None:
    # Qwen3-235B-A22B has 4 KV heads; at TP 8 each rank still holds max(1, 4 // 8) = 1 head.
    r = ask(knowledge, model="Qwen/Qwen3-235B-A22B", tensor_parallel_size=8, gpu="h200-sxm")
    assert r.kv_heads_per_rank == 1
    # Per rank 94 × 1 × 128 × 2 × 2 = 48,128 B; the total counts the 2× replication: × 8 ranks.
    assert r.kv_bytes_per_token_per_rank == 48_128
    assert r.kv_bytes_per_token_total == 48_128 * 8


def test_fp8_kv_cache_is_one_byte_per_element(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="llama-3.1-8b", kv_cache_dtype="fp8")
    # 32 layers × 8 heads × 128 × 2 (K,V) × 1 B = 65,536 B/token.
    assert r.kv_bytes_per_token_per_rank == 65_536


def test_block_size_rounds_a_session_up_to_whole_blocks(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="llama-3.1-8b", block_size=16, typical_context_tokens=1000, max_model_len=32768)
    # 1000 tokens occupy cdiv(1000, 16) = 63 blocks = 1008 tokens of 131,072 B each.
    assert r.live_sessions_at_typical_context == pytest.approx(r.num_gpu_blocks / 63, abs=1e-3)


# --------------------------------------------------------------------------- MLA


def test_deepseek_r1_mla_latent_is_replicated_on_every_rank(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="deepseek-r1", tensor_parallel_size=8, gpu="h200-sxm", max_model_len=131072)
    # One latent of 512 + 64 = 576 values × 2 B = 1,152 B per layer, no separate V, on every rank:
    # 61 layers × 1,152 = 70,272 B/token per rank, and 8 copies = 562,176 B over TP 8.
    assert r.layer_kinds[0].kind == "mla"
    assert r.layer_kinds[0].bytes_per_token_per_layer_per_rank == 1_152
    assert r.kv_bytes_per_token_per_rank == 70_272
    assert r.kv_bytes_per_token_total == 562_176


def test_mla_cpu_tier_keeps_one_copy_from_0_27_0_but_one_per_rank_before(knowledge: Knowledge) -> None:
    common = dict(model="deepseek-r1", tensor_parallel_size=8, gpu="h200-sxm", kv_offloading_size_gib=1000)
    new = ask(knowledge, version="0.27.0", **common)
    old = ask(knowledge, version="0.26.0", **common)
    # GPU block = 16 × 1,152 × 61 = 1,124,352 B per rank. 0.26.0 stores 8 copies per block with no
    # padding; 0.27.0 (pure MLA, TP only, one node) a single copy, rounded up to the 4 KiB host page:
    # ceil(1,124,352 / 4,096) = 275 pages = 1,126,400 B — about 8× as many chunks from the same bytes.
    assert tier(old).chunk_bytes == 1_124_352 * 8
    assert tier(old).num_chunks == 1000 * GIB // (1_124_352 * 8)
    assert tier(new).replicated_mla_layout and not tier(old).replicated_mla_layout
    assert tier(new).chunk_bytes == 1_126_400
    assert tier(new).num_chunks == 1000 * GIB // 1_126_400


def test_mla_with_pipeline_parallel_is_not_replicated(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="kimi-k2", tensor_parallel_size=8, pipeline_parallel_size=2, kv_offloading_size_gib=100)
    assert not tier(r).replicated_mla_layout


# --------------------------------------------------------------------------- sliding, chunked, hybrid


def test_gpt_oss_sliding_layers_are_bounded_by_their_window(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="gpt-oss-120b", tensor_parallel_size=2, max_model_len=131072)
    sliding = next(k for k in r.layer_kinds if k.kind == "sliding_window")
    # Window 128 with 2 in-flight batches of 8192 tokens (async scheduling, 0.33.0):
    # cdiv(min(127 + 16384, 131072), 16) + 1 = 1032 + 1 = 1033 blocks.
    assert sliding.tokens_bounded_to == 1033 * 16
    # Per rank 8 // 2 = 4 heads × 64 × 2 × 2 = 1,024 B per layer; only the 18 full layers grow with context.
    assert r.kv_bytes_per_token_per_rank == 18 * 1_024
    # 18 full + 18 sliding layers: one group each of 18 layers, block = 16 × 1,024 × 18 = 294,912 B.
    assert r.gpu_block_bytes_per_rank == 294_912
    # A 131,072-token request: 8192 full blocks + 1033 sliding blocks.
    assert r.live_sessions_at_max_model_len == pytest.approx(r.num_gpu_blocks / (8192 + 1033), abs=1e-3)


def test_without_the_hybrid_manager_sliding_layers_cost_full_attention(knowledge: Knowledge) -> None:
    # OffloadingConnector has no HMA support before 0.21.0, so native offload turns HMA off.
    r = ask(knowledge, model="gemma-3-27b", version="0.20.2", kv_offloading_size_gib=64)
    assert r.hybrid_kv_cache_manager is False
    # Then all 62 layers keep every token: 62 × 16 heads × 128 × 2 × 2 = 507,904 B/token.
    assert r.kv_bytes_per_token_per_rank == 507_904
    assert any("stored as full attention" in w for w in r.warnings)
    assert ask(knowledge, model="gemma-3-27b", version="0.21.0", kv_offloading_size_gib=64).hybrid_kv_cache_manager


def test_gemma_3_five_sliding_layers_per_global_one(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="gemma-3-27b", max_model_len=131072)
    kinds = {k.kind: k for k in r.layer_kinds}
    assert kinds["full_attention"].layers == 10 and kinds["sliding_window"].layers == 52
    # Window 1024, 2 × 8192 tokens in flight: (cdiv(1023 + 16384, 16) + 1) × 16 = 1089 × 16 = 17,424 tokens.
    assert kinds["sliding_window"].tokens_bounded_to == 17_424
    # group size 10 (the smaller count): 1 full group + cdiv(52, 10) = 6 sliding groups.
    # One request at 131,072 tokens: 8192 + 6 × 1089 = 14,726 blocks of 16 × 8,192 × 10 B.
    assert r.gpu_block_bytes_per_rank == 16 * 8_192 * 10
    assert r.live_sessions_at_max_model_len == pytest.approx(r.num_gpu_blocks / 14_726, abs=1e-3)


def test_llama_4_scout_chunked_local_layers(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="llama-4-scout", tensor_parallel_size=8, max_model_len=131072)
    chunked = next(k for k in r.layer_kinds if k.kind == "chunked_local")
    # 36 chunked layers with chunk 8192, 2 × 8192 in flight: cdiv(min(8192 + 16384, 131072), 16) = 1536 blocks.
    assert chunked.layers == 36 and chunked.tokens_bounded_to == 24_576
    assert r.kv_bytes_per_token_per_rank == 12 * 2 * 1 * 128 * 2


def test_qwen3_next_linear_state_is_per_sequence_and_raises_the_block_size(knowledge: Knowledge) -> None:
    common = dict(model="qwen3-next-80b-a3b", tensor_parallel_size=4, gpu="h200-sxm", max_model_len=131072)
    r = ask(knowledge, enable_prefix_caching=False, **common)
    linear = next(k for k in r.layer_kinds if k.kind == "linear_attention")
    # conv: (128·16·2 + 128·32) / 4 × (4 − 1) = 2048 × 3 = 6,144; recurrent: 32/4 × 128 × 128 = 131,072;
    # (6,144 + 131,072) × 2 B = 274,432 B per sequence per layer per rank.
    assert linear.state_bytes_per_sequence_per_rank == 274_432
    # Attention: max(1, 2 // 4) = 1 head × 256 × 2 × 2 = 1,024 B/token/layer; the block grows to
    # 16 × cdiv(274,432, 16 × 1,024) = 16 × 17 = 272 tokens so one attention page holds the state.
    assert r.block_size == 272
    assert r.kv_bytes_per_token_per_rank == 12 * 1_024
    # group size 12: 1 full group + 3 linear groups; a 131,072-token request needs
    # cdiv(131072, 272) = 482 blocks + 3 state blocks (mamba_cache_mode 'none': 1 per group).
    assert r.live_sessions_at_max_model_len == pytest.approx(r.num_gpu_blocks / (482 + 3), abs=1e-3)
    # Prefix caching on (0.33.0's default for hybrid models): 'align' mode on Hopper aligns the block to
    # lcm(16, 64) = 64: 64 × cdiv(274,432, 64 × 1,024) = 320 tokens, and each linear group holds 2 + 1
    # checkpoint = 3 blocks: cdiv(131072, 320) = 410 + 3 × 3 blocks per request.
    aligned = ask(knowledge, **common)
    assert aligned.block_size == 320
    assert aligned.live_sessions_at_max_model_len == pytest.approx(aligned.num_gpu_blocks / (410 + 9), abs=1e-3)


def test_linear_layers_without_the_hybrid_manager_cannot_start(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="qwen3-next", version="0.20.2", tensor_parallel_size=4, kv_offloading_size_gib=10)
    assert any("cannot start" in w for w in r.warnings)


# --------------------------------------------------------------------------- the offload tier


def test_offloading_size_is_a_total_and_lmcache_gets_a_share_per_process(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="llama-3.1-70b", tensor_parallel_size=4, kv_offloading_size_gib=400, version="0.22.1")
    o = tier(r)
    assert o.cpu_bytes_to_use == 400 * GIB
    assert o.lmcache_max_local_cpu_size_gib == 100.0  # 400 / (TP 4 × PP 1)
    # 16 × 80 layers × 2 heads × 128 × 2 × 2 = 1,310,720 B per rank per block, × 4 workers per chunk.
    assert o.chunk_bytes == 1_310_720 * 4
    assert o.num_chunks == 400 * GIB // (1_310_720 * 4)
    # 8192-token sessions take 512 chunks each.
    assert o.warm_sessions_held == o.num_chunks // 512


def test_lmcache_backend_no_longer_receives_the_size_from_0_23_0(knowledge: Knowledge) -> None:
    before = ask(knowledge, model="qwen3-32b", offload_backend="lmcache", kv_offloading_size_gib=64, version="0.22.1")
    after = ask(knowledge, model="qwen3-32b", offload_backend="lmcache", kv_offloading_size_gib=64, version="0.23.0")
    assert "overriding LMCACHE_MAX_LOCAL_CPU_SIZE" in tier(before).consistency_rule
    assert "does not pass" in tier(after).consistency_rule
    assert any("LMCacheMPConnector" in w for w in after.warnings)


def test_native_shorthand_before_cpu_bytes_to_use_says_to_pass_num_cpu_blocks(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="qwen3-8b", kv_offloading_size_gib=32, version="0.13.0")
    assert any("num_cpu_blocks" in w for w in r.warnings)


def test_tier_sized_from_host_ram_and_from_warm_sessions(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="llama-3.1-70b", tensor_parallel_size=8, host_ram_gib=1024, host_ram_reserved_gib=64)
    assert tier(r).kv_offloading_size_gib == 960  # (1024 − 64) / one engine on the node
    assert r.host_ram_left_gib == 64
    # 100 warm 8192-token sessions × 512 chunks × (655,360 × 8) B = 268,435,456,000 B → 250 GiB.
    w = ask(knowledge, model="llama-3.1-70b", tensor_parallel_size=8, warm_sessions=100)
    assert tier(w).kv_offloading_size_gib == 250
    assert tier(w).warm_sessions_held >= 100


def test_two_tp4_engines_on_a_node_split_the_host_ram(knowledge: Knowledge) -> None:
    r = ask(
        knowledge,
        model="qwen3-32b",
        tensor_parallel_size=4,
        data_parallel_size=2,
        host_ram_gib=1024,
        host_ram_reserved_gib=0,
    )
    assert tier(r).kv_offloading_size_gib == 512


# --------------------------------------------------------------------------- load vs re-prefill, SGLang, bench


def test_load_times_use_the_host_link_and_prefill_uses_flops(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="llama-3.1-8b", typical_context_tokens=16384, max_model_len=32768, mfu=0.5)
    dram = next(e for e in r.load_estimates if e.tier == "CPU DRAM")
    # 16384 tokens × 131,072 B = 2,147,483,648 B over a 50 GB/s practical PCIe Gen5 link = 0.0429 s.
    assert dram.seconds == pytest.approx(2_147_483_648 / 50e9)
    # 989.4 TFLOPS × 0.5 / (2 × 8.03e9) = 30,806 tokens/s; 16384 tokens take 0.532 s.
    assert r.prefill_tokens_per_s == pytest.approx(989.4e12 * 0.5 / (2 * 8.03e9), rel=1e-4)
    prefill = next(e for e in r.load_estimates if e.tier == "re-prefill")
    assert prefill.seconds == pytest.approx(16384 / (989.4e12 * 0.5 / (2 * 8.03e9)), rel=1e-4)
    assert {e.tier for e in r.load_estimates} >= {"NVMe gen4", "NVMe gen5", "remote"}


def test_gpu_without_flops_asks_for_a_prefill_rate(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="llama-3.1-8b", gpu="l40s")
    assert any("prefill_tokens_per_s" in w for w in r.warnings)
    given = ask(knowledge, model="llama-3.1-8b", gpu="l40s", prefill_tokens_per_s=8192, typical_context_tokens=8192)
    assert next(e for e in given.load_estimates if e.tier == "re-prefill").seconds == pytest.approx(1.0)


def test_sglang_conversions_both_ways(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="llama-3.1-70b", tensor_parallel_size=8, kv_offloading_size_gib=1600)
    # 1600 GiB total over 8 ranks = 200 GiB = 214.75 GB per rank.
    assert r.sglang.hicache_size_gb_per_rank == pytest.approx(1600 * GIB / 8 / 1e9, abs=0.01)
    pool = r.num_gpu_blocks * r.gpu_block_bytes_per_rank
    assert r.sglang.hicache_ratio == pytest.approx(1600 * GIB / 8 / pool, abs=0.01)
    back = ask(knowledge, model="llama-3.1-70b", tensor_parallel_size=8, sglang_hicache_size_gb=200)
    assert back.sglang.from_sglang_kv_offloading_size_gib == pytest.approx(200e9 * 8 / GIB, abs=0.01)


def test_an_sglang_hicache_size_is_given_in_gb_and_gib_with_the_unit_vllm_takes(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="llama-3.1-70b", tensor_parallel_size=8, sglang_hicache_size_gb=200)
    # 200 GB per rank × 8 ranks = 1,600 GB = 1.6e12 / 2^30 = 1,490.12 GiB
    assert r.sglang.from_sglang_total_gb == 1600
    assert r.sglang.from_sglang_kv_offloading_size_gib == round(1.6e12 / GIB, 2) == 1490.12
    assert r.sglang.kv_offloading_size_unit == "GiB, total across the TP × PP ranks of one engine"
    assert any(c.id == "flag.kv-offloading-size" for c in r.citations)
    assert (
        "from SGLang: --hicache-size 200 GB per rank × 8 ranks = 1,600 GB = 1,490.12 GiB: pass "
        "--kv-offloading-size 1490.12 (it takes GiB, total across the TP × PP ranks of one engine)"
    ) in r.summary().splitlines()


def test_an_sglang_size_and_ratio_together_are_refused_not_one_dropped(knowledge: Knowledge) -> None:
    with pytest.raises(ToolInputError, match=r"^sglang_hicache_ratio: give sglang_hicache_size_gb or "):
        run_tool("size_offload", {"model": "llama-3.1-70b", "sglang_hicache_size_gb": 200, "sglang_hicache_ratio": 2})


def test_a_typical_context_above_the_model_limit_is_a_warning_not_a_silent_clamp(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="llama-3.1-8b", typical_context_tokens=200_000)
    assert r.typical_context_tokens == r.max_model_len == 131_072
    assert (
        "typical_context_tokens 200,000 is above max_model_len 131,072: no request can be that long, so the "
        "typical figures are for 131,072 tokens."
    ) in r.warnings
    assert not any("typical_context_tokens" in w for w in ask(knowledge, model="llama-3.1-8b").warnings)


def test_sessions_are_counted_whole_beside_the_engines_fractional_concurrency(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="llama-3.1-70b", tensor_parallel_size=4, live_sessions=10_000)
    # full attention only: 131,072 / 16 = 8,192 blocks a max_model_len request, 8,192 / 16 = 512 a typical one
    assert r.whole_sessions_at_max_model_len == r.num_gpu_blocks // 8192
    assert r.whole_sessions_at_typical_context == r.num_gpu_blocks // 512
    assert r.live_sessions_at_max_model_len == round(r.num_gpu_blocks / 8192, 3)  # the engine's figure stays
    assert r.live_sessions_at_max_model_len != r.whole_sessions_at_max_model_len
    text = r.summary()
    assert (
        f"live sessions: {r.whole_sessions_at_max_model_len:,} at 131,072 tokens (the engine's max_concurrency "
        f"{r.live_sessions_at_max_model_len:.2f}), {r.whole_sessions_at_typical_context:,} at 8,192 tokens"
    ) in text
    assert f"({r.whole_sessions_at_typical_context:,} whole sessions)" in " ".join(r.warnings)


@pytest.mark.parametrize(("command", "entries"), [("models", "models"), ("gpus", "gpus")])
def test_the_known_models_and_gpus_are_one_command_away(command: str, entries: str, knowledge: Knowledge) -> None:
    out = run_in_process(main, command)
    assert out.returncode == 0 and out.stderr == ""
    known = knowledge.models if entries == "models" else knowledge.hardware.gpus
    listed = [line.split()[0] for line in out.stdout.splitlines()[1:-1]]
    assert listed == [e.id.split(".", 1)[-1] for e in known]
    for short in listed:  # every id listed is one the tool takes
        request = {"model": short} if entries == "models" else {"model": "llama-3.1-8b", "gpu": short}
        if entries == "models" and knowledge.find_model(short).index_topk is not None:  # type: ignore[union-attr]
            with pytest.raises(AdviceError, match=r"^model: .*DeepSeek Sparse Attention"):  # not sized, and says so
                ask(knowledge, **request)
            continue
        assert ask(knowledge, **request).model


def test_benchmark_targets_twice_the_gpu_kv_within_the_cpu_tier(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="llama-3.1-70b", tensor_parallel_size=8, kv_offloading_size_gib=2000, max_model_len=131072)
    b = bench(r)
    assert b.gpu_kv_tokens == int(r.live_sessions_at_typical_context) * 8192
    assert b.unique_prefix_tokens == (2 * b.gpu_kv_tokens // 8192) * 8192
    assert b.cpu_tier_tokens is not None and b.unique_prefix_tokens <= b.cpu_tier_tokens
    assert "--dataset-name prefix_repetition" in b.command and "--prefix-repetition-num-prefixes" in b.command
    small = ask(knowledge, model="llama-3.1-70b", tensor_parallel_size=8, kv_offloading_size_gib=100)
    cpu_tokens = bench(small).cpu_tier_tokens
    assert cpu_tokens is not None and bench(small).unique_prefix_tokens <= cpu_tokens
    assert any("smaller than twice the GPU KV" in w for w in small.warnings)


# --------------------------------------------------------------------------- warnings


def test_per_rank_figure_passed_as_total_is_flagged(knowledge: Knowledge) -> None:
    r = ask(
        knowledge,
        model="llama-3.1-70b",
        tensor_parallel_size=8,
        kv_offloading_size_gib=50,
        lmcache_max_local_cpu_size_gib=50,
    )
    assert any("looks like a per-rank figure" in w and "pass 400" in w for w in r.warnings)


def test_context_that_cannot_fit_one_session(knowledge: Knowledge) -> None:
    # 24 GB card: 22.35 GiB × 0.9 − 14.96 GiB weights − 4 GiB ≈ 1.2 GiB ≈ 590 blocks of 2 MiB,
    # while one 131,072-token request needs 8192 blocks.
    r = ask(knowledge, model="llama-3.1-8b", gpu="rtx-4090", max_model_len=131072)
    assert 0 < r.num_gpu_blocks < 8192 and r.live_sessions_at_max_model_len < 1
    assert any("refuse to start" in w for w in r.warnings)


def test_weights_that_do_not_fit(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="llama-3.1-405b", tensor_parallel_size=2)
    assert r.num_gpu_blocks == 0
    assert any("do not fit" in w for w in r.warnings)


def test_tier_larger_than_host_ram(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="qwen3-32b", kv_offloading_size_gib=900, host_ram_gib=512)
    assert r.host_ram_left_gib == 512 - 900
    assert any("does not fit" in w for w in r.warnings)


# --------------------------------------------------------------------------- other inputs


def test_local_config_json(knowledge: Knowledge, tmp_path: Path) -> None:
    config = {
        "architectures": ["MistralForCausalLM"],
        "num_hidden_layers": 40,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 5120,
        "head_dim": 128,
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
        "sliding_window": None,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    r = ask(knowledge, config_path=str(tmp_path), params_total_b=24)
    # 40 × 8 × 128 × 2 × 2 = 163,840 B/token.
    assert r.kv_bytes_per_token_per_rank == 163_840
    assert r.max_model_len == 32768


def test_local_config_json_hybrid_and_sliding_layouts(knowledge: Knowledge, tmp_path: Path) -> None:
    hybrid = {
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "full_attention_interval": 4,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "max_position_embeddings": 8192,
    }
    (tmp_path / "config.json").write_text(json.dumps(hybrid))
    r = ask(knowledge, config_path=str(tmp_path / "config.json"), weights_gib_per_gpu=10)
    assert {k.kind: k.layers for k in r.layer_kinds} == {"full_attention": 2, "linear_attention": 6}
    gemma = {
        "text_config": {
            "num_hidden_layers": 12,
            "num_attention_heads": 8,
            "num_key_value_heads": 4,
            "head_dim": 256,
            "sliding_window": 1024,
            "sliding_window_pattern": 6,
            "max_position_embeddings": 32768,
        }
    }
    (tmp_path / "config.json").write_text(json.dumps(gemma))
    g = ask(knowledge, config_path=str(tmp_path), weights_gib_per_gpu=5)
    assert {k.kind: k.layers for k in g.layer_kinds} == {"full_attention": 2, "sliding_window": 10}


def test_explicit_architecture_fields(knowledge: Knowledge) -> None:
    arch = Architecture(num_layers=4, num_attention_heads=8, num_kv_heads=1, head_dim=64, max_position_embeddings=4096)
    r = ask(knowledge, architecture=arch.model_dump(), weights_gib_per_gpu=1)
    # MQA: 4 layers × 1 head × 64 × 2 × 2 = 1,024 B/token.
    assert r.kv_bytes_per_token_per_rank == 1_024


# --------------------------------------------------------------------------- per-model values from config.json

MODEL_FACTS = {
    # id: (layers, attention heads, KV heads, head_dim, max_position_embeddings)
    "model.llama-3.1-8b": (32, 32, 8, 128, 131072),
    "model.llama-3.1-70b": (80, 64, 8, 128, 131072),
    "model.llama-3.1-405b": (126, 128, 8, 128, 131072),
    "model.llama-4-scout": (48, 40, 8, 128, 10485760),
    "model.llama-4-maverick": (48, 40, 8, 128, 1048576),
    "model.qwen3-4b": (36, 32, 8, 128, 40960),
    "model.qwen3-8b": (36, 32, 8, 128, 40960),
    "model.qwen3-14b": (40, 40, 8, 128, 40960),
    "model.qwen3-32b": (64, 64, 8, 128, 40960),
    "model.qwen3-235b-a22b": (94, 64, 4, 128, 40960),
    "model.qwen3-next-80b-a3b": (48, 16, 2, 256, 262144),
    "model.deepseek-v3": (61, 128, 128, 192, 163840),
    "model.deepseek-r1": (61, 128, 128, 192, 163840),
    "model.kimi-k2": (61, 64, 64, 192, 131072),
    "model.glm-4.5": (92, 96, 8, 128, 131072),
    "model.glm-4.6": (92, 96, 8, 128, 202752),
    "model.glm-4.7": (92, 96, 8, 128, 202752),
    "model.gpt-oss-20b": (24, 64, 8, 64, 131072),
    "model.gpt-oss-120b": (36, 64, 8, 64, 131072),
    "model.gemma-3-27b": (62, 32, 16, 128, 131072),
    "model.mistral-small-3.1-24b": (40, 32, 8, 128, 131072),
    "model.mistral-large-2411": (88, 96, 8, 128, 131072),
    "model.mixtral-8x7b": (32, 32, 8, 128, 32768),
}


@pytest.mark.parametrize("model_id", sorted(MODEL_FACTS))
def test_model_entries_match_their_config_values(knowledge: Knowledge, model_id: str) -> None:
    entry = next(m for m in knowledge.models if m.id == model_id)
    assert (
        entry.num_layers,
        entry.num_attention_heads,
        entry.num_kv_heads,
        entry.head_dim,
        entry.max_position_embeddings,
    ) == MODEL_FACTS[model_id]
    assert entry.sources[0] == f"https://huggingface.co/{entry.hf_repo}/blob/main/config.json"


def test_every_knowledge_model_sizes_at_a_valid_tp(knowledge: Knowledge) -> None:
    for m in (m for m in knowledge.models if m.index_topk is None):  # sparse attention is refused, not sized
        tp = 8 if m.num_attention_heads % 8 == 0 and (m.num_kv_heads % 8 == 0 or 8 % m.num_kv_heads == 0) else 1
        r = ask(knowledge, model=m.id, tensor_parallel_size=tp, gpu="h200-sxm", max_model_len=32768)
        assert r.kv_bytes_per_token_per_rank > 0 and r.gpu_block_bytes_per_rank > 0


def test_mla_models_cache_the_latent(knowledge: Knowledge) -> None:
    mla = {m.id for m in knowledge.models if m.attention == "mla"}
    assert mla == {"model.deepseek-v3", "model.deepseek-r1", "model.kimi-k2", "model.deepseek-v3.2"}
    for m in knowledge.models:
        if m.attention == "mla":
            assert (m.kv_lora_rank, m.qk_rope_head_dim) == (512, 64)


# --------------------------------------------------------------------------- bad input


def test_unknown_model_suggests_close_names(knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"^model: .*Did you mean: .*llama-3.1-70b"):
        ask(knowledge, model="llama-3.1-7b")


def test_tp_that_does_not_divide_the_heads(knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"^tensor_parallel_size: .*heads \(40\)"):
        ask(knowledge, model="qwen3-14b", tensor_parallel_size=16)
    six_way = {"num_layers": 2, "num_attention_heads": 48, "num_kv_heads": 8, "head_dim": 64}
    with pytest.raises(AdviceError, match=r"^tensor_parallel_size: .*KV heads \(8\)"):
        ask(knowledge, architecture=six_way, tensor_parallel_size=6, weights_gib_per_gpu=1, max_model_len=4096)


def test_unknown_gpu_and_wrong_gpu_count(knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"^gpu: .*gpu.h100-sxm"):
        ask(knowledge, model="qwen3-8b", gpu="tpu-v5")
    with pytest.raises(AdviceError, match=r"^gpu_count: "):
        ask(knowledge, model="qwen3-8b", tensor_parallel_size=2, gpu_count=3)


def test_exactly_one_model_source(knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"^model: give exactly one"):
        ask(knowledge)


def test_missing_config_path(knowledge: Knowledge, tmp_path: Path) -> None:
    with pytest.raises(AdviceError, match=r"^config_path: no config.json"):
        ask(knowledge, config_path=str(tmp_path / "nope"))


def test_negative_and_out_of_range_sizes_are_rejected_by_field() -> None:
    for field, bad in (("kv_offloading_size_gib", -1), ("gpu_memory_utilization", 1.5), ("kv_cache_dtype", "int3")):
        with pytest.raises(ValidationError) as caught:
            SizeOffloadRequest.model_validate({"model": "qwen3-8b", field: bad})
        assert field in describe_validation_error(caught.value)


# Numbers that overflowed (OverflowError) or came back as NaN or infinity, which JSON sends as null.
LLAMA = {"model": "llama-3.1-8b", "version": "0.33.0"}
ARCHITECTURE = {
    "num_layers": 4,
    "num_attention_heads": 8,
    "num_kv_heads": 8,
    "head_dim": 128,
    "params_total_b": 1.0,
    "max_position_embeddings": 4096,
}


def refused(arguments: dict[str, Any]) -> str:
    with pytest.raises(ToolInputError) as caught:
        run_tool("size_offload", arguments)
    assert "\n" not in str(caught.value)
    return str(caught.value)


@pytest.mark.parametrize("field", ["gpu_memory_gib", "kv_offloading_size_gib", "lmcache_max_local_cpu_size_gib"])
@pytest.mark.parametrize("number", ["1e308", '"Infinity"', "1e999"])
def test_sizes_past_any_machine_are_refused_by_field(field: str, number: str) -> None:
    # Parsed as the server parses a request body: 1e999 and "Infinity" both become infinity.
    arguments = {**LLAMA, **json.loads(f'{{"{field}": {number}}}')}
    assert refused(arguments).startswith(f"{field}: Input should be")


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({**LLAMA, "params_total_b": 1e308}, "params_total_b"),
        ({**LLAMA, "weights_gib_per_gpu": float("inf")}, "weights_gib_per_gpu"),
        ({"architecture": {**ARCHITECTURE, "params_total_b": float("inf")}}, "architecture.params_total_b"),
        # 1e-320 active parameters made the estimated prefill rate infinite.
        ({"architecture": {**ARCHITECTURE, "params_active_b": 1e-320}}, "architecture.params_active_b"),
    ],
    ids=["params 1e308", "weights inf", "architecture params inf", "architecture active params 1e-320"],
)
def test_parameter_counts_that_gave_nan_or_infinity_are_refused_by_field(arguments: dict[str, Any], field: str) -> None:
    assert refused(arguments).startswith(f"{field}: Input should be")


def test_a_linear_attention_state_too_large_for_a_float_is_refused_by_field() -> None:
    state = {"conv_kernel_dim": 10**400, "num_key_heads": 8, "num_value_heads": 8, "key_head_dim": 128}
    architecture = {**ARCHITECTURE, "linear_attention_layers": 2, "linear_attention": {**state, "value_head_dim": 128}}
    assert refused({"architecture": architecture}).startswith("architecture.linear_attention.conv_kernel_dim:")


def test_the_bounds_say_what_they_accept() -> None:
    assert refused({**LLAMA, "gpu_memory_gib": 5000}) == "gpu_memory_gib: Input should be less than or equal to 4096"
    assert refused({**LLAMA, "host_ram_gib": float("nan")}) == "host_ram_gib: Input should be a finite number"
    assert "2147483648" in refused({**LLAMA, "max_model_len": 2**40})


def test_summary_reads_well(knowledge: Knowledge) -> None:
    text = ask(knowledge, model="llama-3.1-70b", tensor_parallel_size=8, kv_offloading_size_gib=400).summary()
    assert "327,680 B total" in text and "--kv-offloading-size 400" in text


# --------------------------------------------------------------------------- the engine's rules (knowledge/engine.yaml)
# Each fix of a difference from the released engine (tests/test_engine_golden.py, knowledge/ENGINE.md) is tested
# here on its step function too, and across the releases its rule distinguishes.


def trail_for(knowledge: Knowledge) -> _Trail:
    return _Trail(knowledge)


def request_of(**fields: object) -> SizeOffloadRequest:
    return SizeOffloadRequest.model_validate({"model": "llama-3.1-8b", **fields})


def layout_of(tp: int = 1, pp: int = 1) -> _Parallel:
    return _Parallel(tp=tp, pp=pp, dp=1, gpus_per_node=8)


@pytest.mark.parametrize(
    ("version", "pp", "in_flight"),
    [
        ("0.25.1", 1, 8192),  # before max_in_flight_tokens: the bound adds max_num_batched_tokens
        ("0.25.1", 2, 8192),
        ("0.26.0", 1, 2 * 8192),  # async scheduling: 2 concurrent batches
        ("0.28.0", 2, 2 * 8192),  # an MoE model: the V1 model runner runs PP batches (async scheduling off with PP)
        ("0.33.0", 1, 2 * 8192),
        ("0.33.0", 2, 3 * 8192),  # Model Runner V2: PP + 1
    ],
)
def test_in_flight_tokens_follow_the_release(knowledge: Knowledge, version: str, pp: int, in_flight: int) -> None:
    model = model_of(knowledge, "gpt-oss-20b", "gpu.h100-sxm", version)
    tokens, formula = _in_flight_tokens(request_of(), model, layout_of(pp=pp), trail_for(knowledge))
    assert tokens == in_flight
    assert "8,192" in formula


@pytest.mark.parametrize(
    ("version", "pp", "in_flight"),
    [
        ("0.26.0", 2, 3 * 8192),  # a dense model: Model Runner V2 is its default from 0.26.0, PP + 1
        ("0.28.0", 2, 3 * 8192),
        ("0.28.0", 4, 5 * 8192),
    ],
)
def test_dense_models_run_model_runner_v2_with_pp_before_0_29(
    knowledge: Knowledge, version: str, pp: int, in_flight: int
) -> None:
    model = model_of(knowledge, "gemma-3-27b", "gpu.h100-sxm", version)
    tokens, formula = _in_flight_tokens(request_of(), model, layout_of(pp=pp), trail_for(knowledge))
    assert tokens == in_flight
    assert "8,192" in formula


@pytest.mark.parametrize(
    ("gpu", "version", "batched"),
    [
        ("gpu.h100-sxm", "0.33.0", 8192),
        ("gpu.h200-sxm", "0.33.0", 8192),
        ("gpu.b200", "0.27.1", 8192),  # before the 160 GiB tier
        ("gpu.b200", "0.28.0", 16384),  # the engine's B200 cells record 16,384 (golden-0.33.0.json)
        ("gpu.a100-80gb-sxm", "0.33.0", 2048),  # vLLM keeps A100s on the small tier by name
        ("gpu.l40s", "0.33.0", 2048),
    ],
)
def test_max_num_batched_tokens_defaults_to_vllm_serves_for_the_gpu(
    knowledge: Knowledge, gpu: str, version: str, batched: int
) -> None:
    model = model_of(knowledge, "gpt-oss-20b", gpu, version)
    trail = trail_for(knowledge)
    tokens, _ = _in_flight_tokens(request_of(), model, layout_of(), trail)
    assert tokens == (2 if Version(version) >= Version("0.26.0") else 1) * batched
    assert any(f.rule == "engine.serve-batch-defaults" for f in trail.formulas)
    given, _ = _in_flight_tokens(request_of(max_num_batched_tokens=4096), model, layout_of(), trail)
    assert given == (2 if Version(version) >= Version("0.26.0") else 1) * 4096


def test_sliding_window_bound_uses_two_in_flight_batches_in_0_33_0(knowledge: Knowledge) -> None:
    # gpt-oss-20b: 12 sliding (window 128) + 12 full layers. The engine (golden-0.33.0.json) holds
    # cdiv(127 + 2 × 8192, 16) + 1 = 1033 sliding blocks per request next to 8192 full ones.
    r = ask(knowledge, model="gpt-oss-20b", max_model_len=131072, **exact_budget(gpu_memory_gib=40))
    assert next(k for k in r.layer_kinds if k.kind == "sliding_window").tokens_bounded_to == 1033 * 16
    assert r.live_sessions_at_max_model_len == round(r.num_gpu_blocks / (8192 + 1033), 3)
    older = ask(knowledge, model="gpt-oss-20b", version="0.25.1", max_model_len=131072)
    assert next(k for k in older.layer_kinds if k.kind == "sliding_window").tokens_bounded_to == 521 * 16


def test_the_null_block_makes_an_exactly_fitting_request_refuse_to_start(knowledge: Knowledge) -> None:
    # 80 layers × 4 KiB × 131,072 tokens is exactly 40 GiB: 8192 blocks, all of them needed by one request.
    fields = dict(model="llama-3.1-70b", max_model_len=131072, **exact_budget(gpu_memory_gib=40))
    r = ask(knowledge, **fields)
    assert r.num_gpu_blocks == 8192 and r.live_sessions_at_max_model_len == 1.0
    [refusal] = [w for w in r.warnings if "refuse to start" in w]
    assert refusal.startswith("ERROR: ")
    assert "8,191 are usable" in refusal and "null block" in refusal
    assert "more GPU memory" in refusal and "lower max_model_len to at most 131,056 tokens" in refusal
    # Before 0.29.0 the start check planned against every block, so the same request fitted.
    assert not any("refuse to start" in w for w in ask(knowledge, version="0.28.0", **fields).warnings)


def test_start_check_holds_back_the_null_block_by_release(knowledge: Knowledge) -> None:
    specs = _layer_specs(
        request_of(), model_of(knowledge, "llama-3.1-8b", "h100", "0.33.0"), layout_of(), _Trail(knowledge)
    )
    one_request = specs.blocks_per_session(4096)  # 256 blocks
    pool = _Pool(num_blocks=one_request, max_len=4096, max_blocks=one_request, typical=4096, typical_blocks=one_request)
    for version, refuses in (("0.28.0", False), ("0.29.0", True), ("0.33.0", True)):
        trail = trail_for(knowledge)
        _start_check(Version(version), specs, pool, trail)
        assert any("refuse to start" in w for w in trail.warnings) is refuses, version
        assert any(c.id == "engine.null-block" for c in trail.citations)


@pytest.mark.parametrize(
    ("version", "gpu", "kv_cache_dtype", "block"),
    [
        ("0.33.0", "h100", "fp8", 64),  # FLASH_ATTN_MLA takes no fp8 KV: FLASHMLA, kernel block 64
        ("0.33.0", "h100", "auto", 16),  # FLASH_ATTN_MLA
        ("0.18.0", "h200", "fp8", 64),
        ("0.17.1", "h100", "auto", 64),  # before 0.18.0 the platform forced FlashMLA's 64 for any MLA
        ("0.33.0", "a100", "fp8", 16),  # TRITON_MLA on 8.x
    ],
)
def test_mla_block_size_is_the_default_backends(
    knowledge: Knowledge, version: str, gpu: str, kv_cache_dtype: str, block: int
) -> None:
    model = model_of(knowledge, "deepseek-v3", gpu, version)
    request = request_of(model="deepseek-v3", kv_cache_dtype=kv_cache_dtype)
    trail = trail_for(knowledge)
    token = _token_bytes(request, model.arch, 8, trail)
    assert _backend_block_size(request, model, token, trail) == block
    note = next(f for f in trail.formulas if f.rule == "engine.attention-backend-block")
    assert note.value == str(block) and any(
        "flashmla" in s or "triton_mla" in s or "cuda.py" in s for s in note.sources
    )


def test_mla_fp8_on_hopper_takes_64_token_blocks_unless_block_size_is_given(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="deepseek-v3", kv_cache_dtype="fp8", **exact_budget(gpu_memory_gib=40))
    # 64 tokens × 576 B × 61 layers = 2,248,704 B per block; 40 GiB of them (golden-0.33.0.json: 19,099 blocks).
    assert (r.block_size, r.gpu_block_bytes_per_rank, r.num_gpu_blocks) == (64, 2_248_704, 19_099)
    given = ask(knowledge, model="deepseek-v3", kv_cache_dtype="fp8", block_size=16, **exact_budget(gpu_memory_gib=40))
    assert given.block_size == 16


def test_mla_on_a_gpu_family_without_a_recorded_backend_says_so(knowledge_copy: Path) -> None:
    path = knowledge_copy / "engine.yaml"
    data = yaml.safe_load(path.read_text())
    data["attention_backends"] = [b for b in data["attention_backends"] if b["compute_capability_major"] != 10]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    r = ask(load_knowledge(str(knowledge_copy)), model="deepseek-v3", tensor_parallel_size=8, gpu="b200")
    assert r.block_size == 16
    assert any("MLA attention backend" in w and "not recorded" in w for w in r.warnings)


# --------------------------------------------------------------------------- Blackwell (issue 14)


@pytest.mark.parametrize(
    ("version", "model", "kv_cache_dtype", "backend", "block"),
    [
        # golden-0.33.0-b200.json: FLASHINFER_MLA takes 16-bit and fp8 KV; the smallest of its blocks [32, 64].
        ("0.33.0", "deepseek-v3", "auto", "FLASHINFER_MLA", 32),
        ("0.33.0", "deepseek-v3", "fp8", "FLASHINFER_MLA", 32),
        ("0.20.2", "kimi-k2", "auto", "FLASHINFER_MLA", 32),
        ("0.17.1", "deepseek-v3", "fp8", "FLASHINFER_MLA", 64),  # 0.15.0–0.17.1: the platform raised 16 to 64
        ("0.14.1", "deepseek-v3", "auto", "CUTLASS_MLA", 128),  # before 0.15.0: CUTLASS MLA forced, block 128
        # golden-0.33.0-b200.json: dense layers get FLASHINFER, which takes the 16-token default.
        ("0.33.0", "llama-3.1-8b", "auto", "FLASHINFER", 16),
        ("0.33.0", "llama-3.1-8b", "fp8", "FLASHINFER", 16),
        ("0.22.1", "qwen3-235b-a22b", "fp8", "FLASHINFER", 16),
    ],
)
def test_blackwell_block_size_is_its_default_backends(
    knowledge: Knowledge, version: str, model: str, kv_cache_dtype: str, backend: str, block: int
) -> None:
    served = model_of(knowledge, model, "b200", version)
    request = request_of(model=model, kv_cache_dtype=kv_cache_dtype)
    trail = trail_for(knowledge)
    token = _token_bytes(request, served.arch, 8, trail)
    assert _backend_block_size(request, served, token, trail) == block
    note = next(f for f in trail.formulas if f.rule == "engine.attention-backend-block")
    assert note.value == str(block)
    assert note.formula.startswith(f"{backend}, ") and "compute capability 10.0" in note.formula
    assert any("platforms/cuda.py" in s for s in note.sources)
    assert trail.warnings == []


def test_deepseek_v3_on_b200_takes_flashinfer_mlas_32_token_blocks(knowledge: Knowledge) -> None:
    # golden-0.33.0-b200.json deepseek-v3/tp8: 32 tokens × 1,152 B (bf16) or 576 B (fp8) × 61 layers per block;
    # 40 GiB // 2,248,704 B = 19,099 blocks; a 163,840-token request takes 5,120 of them.
    bf16 = ask(knowledge, model="deepseek-v3", tensor_parallel_size=8, gpu="b200", **exact_budget(gpu_memory_gib=40))
    assert (bf16.block_size, bf16.gpu_block_bytes_per_rank, bf16.num_gpu_blocks) == (32, 2_248_704, 19_099)
    assert bf16.live_sessions_at_max_model_len == pytest.approx(19_099 / 5_120, abs=1e-3)
    fp8 = ask(
        knowledge,
        model="deepseek-v3",
        tensor_parallel_size=8,
        gpu="b200",
        kv_cache_dtype="fp8",
        **exact_budget(gpu_memory_gib=40),
    )
    assert (fp8.block_size, fp8.gpu_block_bytes_per_rank, fp8.num_gpu_blocks) == (32, 1_124_352, 38_199)
    assert not any("not recorded" in w for w in bf16.warnings + fp8.warnings)


def test_hybrid_align_mode_on_blackwell_exports_checkpoints_under_cuda_13(knowledge: Knowledge) -> None:
    # 0.33.0's builds run CUDA 13, so Qwen3-Next's GDN layers (key heads of 128) take FlashInfer's prefill on
    # cc 10.0 as on 9.0: 3 state blocks, the block aligned to 64 (golden-0.33.0-b200.json: 576 at TP 1).
    model = model_of(knowledge, "qwen3-next-80b-a3b", "b200", "0.33.0")
    trail = trail_for(knowledge)
    on = _mamba_layout(request_of(), model, trail)
    assert (on.mode, on.state_blocks, on.checkpoint_alignment) == ("align", 3, 64)
    assert [w for w in trail.warnings if "CUDA 13" in w and "CUDA 12 runs the Triton prefill" in w]
    assert any(c.id == "engine.release-cuda-runtime" for c in trail.citations)
    # Key heads other than 128: the Triton prefill on Blackwell, no checkpoints.
    state = model.arch.linear_attention
    assert state is not None
    narrow = dataclasses.replace(
        model, arch=model.arch.model_copy(update={"linear_attention": state.model_copy(update={"key_head_dim": 64})})
    )
    triton = _mamba_layout(request_of(), narrow, trail_for(knowledge))
    assert (triton.mode, triton.state_blocks, triton.checkpoint_alignment) == ("align", 2, 1)


def test_hybrid_on_blackwell_without_a_recorded_cuda_runtime_assumes_triton_and_says_so(knowledge_copy: Path) -> None:
    path = knowledge_copy / "engine.yaml"
    data = yaml.safe_load(path.read_text())
    rule = next(r for r in data["rules"] if r["id"] == "engine.release-cuda-runtime")
    rule["values"] = [{"versions": "", "value": None}]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    copy = load_knowledge(str(knowledge_copy))
    trail = trail_for(copy)
    layout = _mamba_layout(request_of(), model_of(copy, "qwen3-next-80b-a3b", "b200", "0.33.0"), trail)
    assert (layout.mode, layout.state_blocks, layout.checkpoint_alignment) == ("align", 2, 1)
    assert [w for w in trail.warnings if "not recorded" in w and "multiple of 64 tokens" in w]


@pytest.mark.parametrize(
    ("tp", "kv_cache_dtype", "block", "blocks"),
    [(1, "auto", 576, 3_034), (8, "auto", 192, 18_204), (1, "fp8", 1_088, 3_212), (8, "fp8", 320, 21_845)],
)
def test_qwen3_next_on_b200_matches_the_engines_align_layout(
    knowledge: Knowledge, tp: int, kv_cache_dtype: str, block: int, blocks: int
) -> None:
    # golden-0.33.0-b200.json: the block is 64 × cdiv(state, 64 × attention bytes per token and layer), e.g. TP 8
    # fp8: 64 × cdiv(137,216, 64 × 512) = 320 tokens; 40 GiB // (320 × 512 × 12 layers) = 21,845 blocks.
    r = ask(
        knowledge,
        model="qwen3-next-80b-a3b",
        tensor_parallel_size=tp,
        kv_cache_dtype=kv_cache_dtype,
        gpu="b200",
        max_num_batched_tokens=16384,
        **exact_budget(gpu_memory_gib=40),
    )
    assert (r.block_size, r.num_gpu_blocks) == (block, blocks)


def test_release_cuda_runtime_is_read_where_align_mode_is_modelled(knowledge: Knowledge) -> None:
    rule = knowledge.engine.rule("engine.release-cuda-runtime")
    align = knowledge.engine.rule("engine.mamba-align-mode")
    for release in knowledge.release_versions():
        found = rule.value_at(release)
        assert found is not None, str(release)
        assert found.value is None or (isinstance(found.value, int) and not isinstance(found.value, bool))
        checkpoints = align.value_at(release)
        if checkpoints is not None and isinstance(checkpoints.value, int) and checkpoints.value > 0:
            assert found.value == 13, str(release)  # read in 0.33.0's release builds


def test_hybrid_align_mode_on_hopper_aligns_the_block_and_holds_three_state_blocks(knowledge: Knowledge) -> None:
    model = model_of(knowledge, "qwen3-next-80b-a3b", "h100", "0.33.0")
    on = _mamba_layout(request_of(), model, trail_for(knowledge))  # prefix caching: 0.33.0's default, on
    assert (on.mode, on.state_blocks, on.checkpoint_alignment) == ("align", 3, 64)
    off = _mamba_layout(request_of(enable_prefix_caching=False), model, trail_for(knowledge))
    assert (off.mode, off.state_blocks, off.checkpoint_alignment) == ("none", 1, 1)
    # Without FlashInfer's GDN prefill (8.x) no checkpoints are exported: 2 blocks, no extra alignment.
    ampere = _mamba_layout(request_of(), model_of(knowledge, "qwen3-next", "a100", "0.33.0"), trail_for(knowledge))
    assert (ampere.mode, ampere.state_blocks, ampere.checkpoint_alignment) == ("align", 2, 1)


def test_hybrid_align_mode_where_its_default_is_not_recorded_or_off(knowledge: Knowledge) -> None:
    # 0.11.0: the hybrid default is not recorded (said so); 0.20.0: off by default, so 'none'.
    for version, warning in (("0.11.0", "not recorded"), ("0.20.0", None)):
        trail = trail_for(knowledge)
        layout = _mamba_layout(request_of(), model_of(knowledge, "qwen3-next", "h100", version), trail)
        assert layout.mode == "none", version
        if warning is None:
            assert trail.warnings == [], version
        else:
            assert [w for w in trail.warnings if warning in w], version


@pytest.mark.parametrize(
    "version", ["0.15.0", "0.20.2", "0.22.1", "0.27.0", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0"]
)
def test_hybrid_align_mode_before_checkpoints_holds_two_state_blocks_at_the_none_block(
    knowledge: Knowledge, version: str
) -> None:
    # Before 0.33.0 no Gated DeltaNet layer exports prefill checkpoints, on any GPU: 2 state blocks per linear
    # group, no alignment (golden-0.28.0.json, -0.30.0.json, -0.32.0.json record it).
    for gpu in ("h100", "a100"):
        trail = trail_for(knowledge)
        layout = _mamba_layout(
            request_of(enable_prefix_caching=True), model_of(knowledge, "qwen3-next", gpu, version), trail
        )
        assert (layout.mode, layout.state_blocks, layout.checkpoint_alignment) == ("align", 2, 1), (version, gpu)
        assert trail.warnings == []
        assert any(f.rule == "engine.mamba-align-mode" for f in trail.formulas)


def test_qwen3_next_matches_the_engines_align_layout_in_0_20_2(knowledge: Knowledge) -> None:
    # golden-0.20.2.json qwen3-next-80b-a3b/tp1/auto/h100/prefix-caching: mamba_cache_mode 'align', block 544 as
    # with prefix caching off (16 × cdiv(1,097,728, 16 × 2,048)), 3,212 blocks of 544 × 2,048 × 12 B; a
    # 262,144-token request takes cdiv(262,144, 544) = 482 + 3 groups × 2 state blocks = 488 blocks.
    fields = dict(model="qwen3-next-80b-a3b", max_model_len=262144, version="0.20.2", **exact_budget(gpu_memory_gib=40))
    r = ask(knowledge, enable_prefix_caching=True, **fields)
    assert (r.block_size, r.gpu_block_bytes_per_rank, r.num_gpu_blocks) == (544, 13_369_344, 3_212)
    assert r.live_sessions_at_max_model_len == round(3_212 / 488, 3) == 6.582
    # Off (that release's default for hybrids): one state block per group, 482 + 3.
    assert ask(knowledge, **fields).live_sessions_at_max_model_len == round(3_212 / 485, 3)


def test_qwen3_next_matches_the_engines_align_layout_at_tp1(knowledge: Knowledge) -> None:
    # golden-0.33.0.json qwen3-next-80b-a3b/tp1: block lcm(16, 64) × cdiv(1,097,728, 64 × 2,048) = 576 tokens,
    # 3,034 blocks of 576 × 2,048 × 12 B; a 262,144-token request takes 456 + 3 groups × 3 state blocks.
    r = ask(knowledge, model="qwen3-next-80b-a3b", max_model_len=262144, **exact_budget(gpu_memory_gib=40))
    assert (r.block_size, r.num_gpu_blocks) == (576, 3_034)
    assert r.live_sessions_at_max_model_len == round(3_034 / (456 + 9), 3)


@pytest.mark.parametrize(("version", "default"), [("0.19.1", 0.9), ("0.20.0", 0.92), ("0.33.0", 0.92)])
def test_gpu_memory_utilization_default_is_the_releases(knowledge: Knowledge, version: str, default: float) -> None:
    trail = trail_for(knowledge)
    assert _gpu_memory_utilization(request_of(), Version(version), trail) == (default, f"vLLM {version}'s default")
    assert _gpu_memory_utilization(request_of(gpu_memory_utilization=0.5), Version(version), trail)[0] == 0.5
    r = ask(knowledge, version=version, model="llama-3.1-8b", weights_gib_per_gpu=10, activation_reserve_gib=0)
    assert r.gpu_budget_gib_per_rank == round(80e9 / GIB * default - 10, 3)


@pytest.mark.parametrize(
    ("backend", "version", "connector"),
    [
        ("native", "0.11.0", "OffloadingConnector"),  # no shorthand yet: configured by hand
        ("native", "0.33.0", "OffloadingConnector"),
        ("lmcache", "0.22.1", "LMCacheConnectorV1"),
        ("lmcache", "0.23.0", "LMCacheMPConnector"),
    ],
)
def test_the_offload_connector_is_the_one_the_shorthand_selects(
    knowledge: Knowledge, backend: str, version: str, connector: str
) -> None:
    assert _offload_connector(request_of(offload_backend=backend), knowledge, Version(version)).name == connector


def test_native_offload_of_a_hybrid_linear_model_without_prefix_caching_will_not_start(knowledge: Knowledge) -> None:
    # The engine (offload-0.33.0.json, qwen3-next-80b-a3b/tp1/auto/h100/no-prefix-caching): OffloadingConnector's
    # scheduler side asserts "tokens_per_block=262144 not divisible by tokens_per_hash=4456448 ... need
    # --enable-prefix-caching" (rule engine.offload-hybrid-needs-prefix-caching).
    fields = dict(model="qwen3-next-80b-a3b", kv_offloading_size_gib=64, **exact_budget(gpu_memory_gib=40))
    off = ask(knowledge, enable_prefix_caching=False, **fields)
    [refusal] = [w for w in off.warnings if "OffloadingConnector" in w and w.startswith("ERROR: ")]
    assert "will not start" in refusal and "prefix caching" in refusal
    assert any(c.id == "engine.offload-hybrid-needs-prefix-caching" for c in off.citations)
    # Prefix caching on (the default), another backend, or a model without linear layers: no refusal.
    for quiet in (
        ask(knowledge, **fields),
        ask(knowledge, enable_prefix_caching=False, offload_backend="lmcache", **fields),
        ask(knowledge, enable_prefix_caching=False, **{**fields, "model": "gpt-oss-20b"}),
    ):
        assert not [w for w in quiet.warnings if w.startswith("ERROR: ")], quiet.model


@pytest.mark.parametrize(
    ("backend", "version", "hma", "refuses"),
    [
        ("native", "0.20.2", None, True),  # the engine: "OffloadingConnector does not support HMA but HMA is enabled"
        ("native", "0.20.2", False, False),  # --disable-hybrid-kv-cache-manager given
        ("native", "0.21.0", None, False),  # OffloadingConnector supports HMA from 0.21.0
        ("lmcache", "0.21.0", None, True),  # LMCacheConnectorV1 never does; the shorthand left HMA on up to 0.21.0
        ("lmcache", "0.22.0", None, False),  # from 0.22.0 vLLM turns HMA off for it
    ],
)
def test_the_shorthand_with_a_connector_without_hma_needs_the_flag_up_to_0_21(
    knowledge: Knowledge, backend: str, version: str, hma: bool | None, refuses: bool
) -> None:
    # Recorded by the oracle on 0.20.2 (offload section of llama-3.1-8b/tp1): the factory refuses at start-up.
    fields: dict[str, object] = {"model": "llama-3.1-8b", "kv_offloading_size_gib": 64, "offload_backend": backend}
    if hma is not None:
        fields["hybrid_kv_cache_manager"] = hma
    r = ask(knowledge, version=version, **fields)
    errors = [w for w in r.warnings if w.startswith("ERROR: ") and "--disable-hybrid-kv-cache-manager" in w]
    assert bool(errors) is refuses
    if refuses:
        assert "will not start" in errors[0] and f"--kv-offloading-backend {backend}" in errors[0]
        assert any(c.id == "pitfall.hma-flag-missing-with-shorthand" for c in r.citations)


@pytest.mark.parametrize(
    ("version", "refuses"),
    [("0.17.1", False), ("0.18.0", True), ("0.22.1", True), ("0.25.1", True), ("0.26.0", True), ("0.33.0", True)],
)
def test_offload_start_check_follows_the_release(knowledge: Knowledge, version: str, refuses: bool) -> None:
    # The offloading spec's block-size check arrived in 0.18.0 (golden-0.22.1.json: every hybrid cell without
    # prefix caching refused with "need --enable-prefix-caching"); what 0.17.1 does is not recorded.
    model = model_of(knowledge, "qwen3-next-80b-a3b", "h100", version)
    request = request_of(model="qwen3-next-80b-a3b", enable_prefix_caching=False, kv_offloading_size_gib=64)
    specs = _layer_specs(request, model, layout_of(), trail_for(knowledge))
    trail = trail_for(knowledge)
    _offload_start_checks(request, knowledge, model.version, specs, trail)
    refusals = [w for w in trail.warnings if w.startswith("ERROR: ") and "will not start" in w]
    assert any("to align block sizes" in w for w in refusals) is refuses
    assert any(c.id == "engine.offload-hybrid-needs-prefix-caching" for c in trail.citations)


@pytest.mark.parametrize(
    ("version", "refuses"), [("0.20.2", False), ("0.21.0", True), ("0.22.1", True), ("0.27.1", True), ("0.28.0", False)]
)
def test_native_offload_of_chunked_local_layers_follows_the_release(
    knowledge: Knowledge, version: str, refuses: bool
) -> None:
    # golden-0.22.1.json llama-4-scout/tp8/fp8/h100: the only Scout cell whose 10M-token request fits, refused by
    # OffloadingConnector's scheduler (an assertion on the chunked-local group); 0.33.0's takes it. 0.20.2's
    # connector has no HMA support, so the chunked layers never reach it as a group (not recorded: silent).
    fields = dict(model="llama-4-scout", kv_offloading_size_gib=64, hybrid_kv_cache_manager=True)
    trail = trail_for(knowledge)
    model = model_of(knowledge, "llama-4-scout", "h100", version)
    request = request_of(**fields)
    specs = _layer_specs(request, model, layout_of(), trail_for(knowledge))
    _offload_start_checks(request, knowledge, model.version, specs, trail)
    errors = [w for w in trail.warnings if w.startswith("ERROR: ") and "chunked-local" in w]
    assert bool(errors) is refuses
    if refuses:
        assert "--disable-hybrid-kv-cache-manager" in errors[0]
        assert any(c.id == "engine.offload-chunked-local-unsupported" for c in trail.citations)
    # With the hybrid manager off the chunked layers are stored as full attention: nothing for the connector to refuse.
    off = request_of(**{**fields, "hybrid_kv_cache_manager": False})
    no_hma = _Model(arch=model.arch, gpu=model.gpu, version=model.version, hma=False)
    trail = trail_for(knowledge)
    _offload_start_checks(off, knowledge, model.version, _layer_specs(off, no_hma, layout_of(), trail), trail)
    assert not [w for w in trail.warnings if "chunked-local" in w]


def test_lmcache_connector_v1_turns_the_hybrid_manager_off(knowledge: Knowledge) -> None:
    # connectors.yaml: LMCacheConnectorV1 never supports HMA; LMCacheMPConnector is 'conditional' from 0.22.0.
    v1 = ask(knowledge, model="gemma-3-27b", version="0.22.1", offload_backend="lmcache", kv_offloading_size_gib=64)
    assert v1.hybrid_kv_cache_manager is False
    assert any("stored as full attention" in w for w in v1.warnings)
    assert any(c.id == "connector.lmcache" for c in v1.citations)
    mp = ask(knowledge, model="gemma-3-27b", version="0.23.0", offload_backend="lmcache", kv_offloading_size_gib=64)
    assert mp.hybrid_kv_cache_manager is True
    linear = ask(knowledge, model="qwen3-next", version="0.22.1", offload_backend="lmcache", tensor_parallel_size=4)
    assert any("LMCacheConnectorV1 has no HMA support in 0.22.1" in w for w in linear.warnings)


# --------------------------------------------------------------------------- every formula cites a rule


def test_every_formula_names_a_rule_with_its_sources_and_cites_it(knowledge: Knowledge) -> None:
    answers = [
        ask(knowledge, model="gpt-oss-120b", tensor_parallel_size=2, kv_offloading_size_gib=100),
        ask(knowledge, model="qwen3-next", tensor_parallel_size=4, host_ram_gib=1024),
        ask(knowledge, model="deepseek-v3", kv_cache_dtype="fp8", tensor_parallel_size=8, warm_sessions=10),
    ]
    for r in answers:
        cited = {c.id: c for c in r.citations}
        for note in r.formulas:
            rule = knowledge.engine.rule(note.rule)
            assert set(rule.sources) <= set(note.sources), note.name
            assert cited[note.rule].sources == list(rule.sources)
        if r.benchmark is not None:
            assert r.benchmark.rule.endswith("(flags: rule engine.bench-prefix-repetition)")
            assert "engine.bench-prefix-repetition" in cited
    assert answers[0].benchmark is not None


def test_sizing_code_holds_no_release_citations() -> None:
    source = (Path(__file__).resolve().parents[1] / "server/vllm_caching_mcp/advice/sizing.py").read_text()
    assert re.findall(r"vllm==\d", source) == []


def test_engine_rule_values_are_ones_the_code_reads_and_cover_every_release(knowledge: Knowledge) -> None:
    readable: dict[str, Callable[[object], bool]] = {
        "engine.bounded-attention-holding": lambda v: v in ("max_num_batched_tokens", "max_in_flight_tokens"),
        "engine.max-in-flight-tokens": lambda v: v == "v2" or (isinstance(v, tuple) and all("For" in a for a in v)),
        "engine.null-block": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        "engine.mamba-align-mode": lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0),
        "engine.hybrid-prefix-caching-default": lambda v: v is None or isinstance(v, bool),
        "engine.offload-hybrid-needs-prefix-caching": lambda v: v is None or isinstance(v, bool),
    }
    for rule_id, reads in readable.items():
        rule = knowledge.engine.rule(rule_id)
        for release in knowledge.release_versions():
            hits = [r for r in rule.values if parse_specifier(r.versions).contains(release, prereleases=True)]
            # max-in-flight-tokens is read only where the bound uses it (0.26.0 on).
            if rule_id == "engine.max-in-flight-tokens" and release < Version("0.26.0"):
                assert hits == [], (rule_id, str(release))
                continue
            assert len(hits) == 1, (rule_id, str(release), hits)
            assert reads(hits[0].value), (rule_id, str(release), hits[0].value)


def test_every_gpu_has_a_compute_capability_and_backend_rows_do_not_overlap(knowledge: Knowledge) -> None:
    assert {g.id for g in knowledge.hardware.gpus} == {c.gpu for c in knowledge.engine.gpu_capabilities}
    rows = knowledge.engine.attention_backends
    for release in knowledge.release_versions():
        keys = [
            (b.compute_capability_major, b.attention, b.kv_cache_dtype)
            for b in rows
            if parse_specifier(b.versions).contains(release, prereleases=True)
        ]
        assert len(keys) == len(set(keys)), str(release)


def test_a_broken_engine_file_names_the_file_and_the_field(knowledge_copy: Path) -> None:
    path = knowledge_copy / "engine.yaml"
    data = yaml.safe_load(path.read_text())
    data["rules"][0]["id"] = "sizing.kv-heads"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(KnowledgeError, match=r"engine\.yaml: entry 'sizing\.kv-heads' \(rules\[0\]\), field 'id'"):
        load_knowledge(str(knowledge_copy))
    data["rules"][0]["id"] = data["rules"][1]["id"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(KnowledgeError, match=r"engine\.yaml: .*rules: listed more than once: engine\."):
        load_knowledge(str(knowledge_copy))


# ------------------------------------------------------------------------- sliding window and chunked local (issue 14)
# The engine's figures quoted are vLLM 0.33.0's for the same question (40 GiB of KV per rank on an H100:
# tests/data/engine/golden-0.33.0-sliding.json; the Mistral 7B ones from the same oracle run on this config,
# knowledge/ENGINE.md "Sliding window and chunked local").

ENGINE_CONFIGS = Path(__file__).resolve().parent / "data" / "engine" / "configs"
# Mistral-7B-v0.1's published config.json: every layer slides over 4096 tokens (no layer_types).
MISTRAL_7B = {
    "architectures": ["MistralForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mistral",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "sliding_window": 4096,
    "torch_dtype": "bfloat16",
}


def test_the_published_gemma_3_config_sizes_as_the_engine_did(knowledge: Knowledge) -> None:
    r = ask(knowledge, config_path=str(ENGINE_CONFIGS / "gemma-3-27b"), **exact_budget(gpu_memory_gib=40))
    # 52 sliding + 10 full layers (Gemma3TextConfig's every-6th-layer pattern), 131,072 tokens (its default).
    assert {k.kind: k.layers for k in r.layer_kinds} == {"full_attention": 10, "sliding_window": 52}
    assert r.max_model_len == 131_072
    # Group size 10: blocks of 16 × 8,192 B × 10 = 1,310,720 B; 40 GiB of them is 32,768. A request holds 8192
    # full blocks and 6 sliding groups × (cdiv(1023 + 2 × 8192, 16) + 1) = 6 × 1089: 14,726 (engine: 2.22518).
    assert (r.gpu_block_bytes_per_rank, r.num_gpu_blocks) == (1_310_720, 32_768)
    assert r.live_sessions_at_max_model_len == round(32_768 / 14_726, 3)


def test_all_sliding_layers_keep_their_bound_with_or_without_the_hybrid_manager(
    knowledge: Knowledge, tmp_path: Path
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(MISTRAL_7B))
    for hma in (None, False):
        r = ask(knowledge, config_path=str(tmp_path), hybrid_kv_cache_manager=hma, **exact_budget(gpu_memory_gib=40))
        # One kind of layer, so nothing for vLLM to unify when the manager is off: 32 sliding layers of
        # 2 × 8 × 128 × 2 = 4,096 B per token, one group of 32: blocks of 16 × 4,096 × 32 = 2,097,152 B, 20,480
        # in 40 GiB. A 32,768-token request holds cdiv(min(4095 + 16384, 32768), 16) + 1 = 1281 (engine: 15.9875).
        assert [(k.kind, k.layers) for k in r.layer_kinds] == [("sliding_window", 32)], hma
        assert (r.gpu_block_bytes_per_rank, r.num_gpu_blocks) == (2_097_152, 20_480)
        assert r.live_sessions_at_max_model_len == round(20_480 / 1281, 3)
        assert not any("stored as full attention" in w for w in r.warnings)


def test_without_the_hybrid_manager_mixed_layers_are_all_stored_as_full(knowledge: Knowledge) -> None:
    r = ask(knowledge, model="gemma-3-27b", hybrid_kv_cache_manager=False, **exact_budget(gpu_memory_gib=40))
    # 62 full layers of 8,192 B per token, one group: 16 × 8,192 × 62 = 8,126,464 B blocks, 5,285 in 40 GiB;
    # a 131,072-token request needs 8192 of them, so vLLM refuses to start (engine: 0.64514, refuses).
    assert [(k.kind, k.layers) for k in r.layer_kinds] == [("full_attention", 62)]
    assert (r.gpu_block_bytes_per_rank, r.num_gpu_blocks) == (8_126_464, 5_285)
    assert any("refuse to start" in w for w in r.warnings)
    assert any(c.id == "engine.hma-off-stores-full" for c in r.citations)


def test_layer_specs_unify_only_a_model_that_mixes_full_and_bounded_layers(knowledge: Knowledge) -> None:
    gpu = knowledge.hardware.find_gpu("gpu.h100-sxm")
    assert gpu is not None
    sliding_only = Architecture(
        num_layers=32,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        sliding_window=4096,
        sliding_window_layers=32,
    )
    mixed = sliding_only.model_copy(update={"sliding_window_layers": 26})
    for arch, kinds in ((sliding_only, ["sliding_window"]), (mixed, ["full_attention"])):
        model = _Model(arch=arch, gpu=gpu, version=Version("0.33.0"), hma=False)
        specs = _layer_specs(request_of(), model, layout_of(), trail_for(knowledge))
        assert [g.kind for g, _ in specs.kinds] == kinds


def test_a_float32_config_caches_in_bfloat16_as_vllm_runs_it(knowledge: Knowledge, tmp_path: Path) -> None:
    # Gemma 2 9B's published config says float32; `vllm serve` with --dtype auto runs it in bfloat16 on every
    # GPU the knowledge holds, so the KV cache is 2 bytes a value (the engine recorded 8,192 B per token per
    # layer at TP 1 for this shape: 2 × 8 heads × 256 × 2 B).
    config = {
        "architectures": ["Gemma2ForCausalLM"],
        "model_type": "gemma2",
        "hidden_size": 3584,
        "num_hidden_layers": 42,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 256,
        "max_position_embeddings": 8192,
        "sliding_window": 4096,
        "torch_dtype": "float32",
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    r = ask(knowledge, config_path=str(tmp_path), **exact_budget(gpu_memory_gib=40))
    assert {k.kind: k.bytes_per_token_per_layer_per_rank for k in r.layer_kinds} == {
        "full_attention": 8192,
        "sliding_window": 8192,
    }
    assert any(f.rule == "engine.auto-dtype-float32" for f in r.formulas)
    assert r.num_gpu_blocks == 15_603  # the engine's figure for this config at 40 GiB


def test_a_cpu_tier_vllm_refuses_shows_the_refusal_not_its_figures(knowledge: Knowledge) -> None:
    asked = {"model": "qwen3-next-80b-a3b", "tensor_parallel_size": 8, "kv_offloading_size_gib": 100}
    refused = ask(knowledge, enable_prefix_caching=False, **asked)
    assert refused.offload is not None and refused.offload.vllm_refuses
    tier_line = next(line for line in refused.summary().splitlines() if line.startswith("CPU tier"))
    assert "will not start" in tier_line and "cpu_bytes_to_use" not in tier_line
    started = ask(knowledge, **asked)
    assert started.offload is not None and started.offload.vllm_refuses is None


@pytest.mark.parametrize(
    ("model", "version", "refused"),
    [
        ("deepseek-v3", "0.33.0", True),  # Triton MLA on 8.x refuses fp8 from 0.26.0
        ("deepseek-v3", "0.25.1", False),
        ("gpt-oss-20b", "0.24.0", True),  # attention sinks: Triton attention on 8.x, which refuses fp8 from 0.24.0
        ("gpt-oss-20b", "0.23.0", False),
        ("gemma-3-27b", "0.33.0", True),
        ("llama-3.1-8b", "0.33.0", False),  # FlashAttention takes fp8 on an A100
    ],
)
def test_fp8_kv_on_a_triton_backend_below_sm89_will_not_start(
    knowledge: Knowledge, model: str, version: str, refused: bool
) -> None:
    # The engine's A100 cells (vLLM 0.33.0): "FP8 KV cache is not supported by the Triton MLA backend on NVIDIA
    # A100-SXM4-80GB (compute capability 8.0); native FP8 (fp8e4nv) requires SM89+".
    r = ask(
        knowledge, model=model, version=version, gpu="gpu.a100-80gb-sxm", kv_cache_dtype="fp8", tensor_parallel_size=8
    )
    assert any(w.startswith("ERROR") and "SM89" in w for w in r.warnings) == refused
    on_hopper = ask(knowledge, model=model, version=version, kv_cache_dtype="fp8", tensor_parallel_size=8)
    assert not any("SM89" in w for w in on_hopper.warnings)


def test_fp8_kv_with_a_head_size_flashinfer_lacks_will_not_start_on_an_a100(knowledge: Knowledge) -> None:
    # Phi-3 mini's head size 96: with fp8 KV on compute capability 8.0 vLLM 0.33.0 runs it on Triton attention
    # (FlashInfer takes 64, 128, 256, 512), which refuses fp8 there (engine run on an A100 stand-in).
    phi3 = {"name": "phi-3-mini", "num_layers": 32, "num_attention_heads": 32, "num_kv_heads": 32, "head_dim": 96}
    fields = {"architecture": phi3, "gpu": "gpu.a100-80gb-sxm", "max_model_len": 4096, "weights_gib_per_gpu": 8}
    r = ask(knowledge, kv_cache_dtype="fp8", **fields)
    assert any(w.startswith("ERROR") and "SM89" in w for w in r.warnings)
    same_on_128 = ask(knowledge, kv_cache_dtype="fp8", **{**fields, "architecture": {**phi3, "head_dim": 128}})
    assert not any("SM89" in w for w in same_on_128.warnings)
    assert not any("SM89" in w for w in ask(knowledge, **fields).warnings)


def test_each_data_parallel_engine_has_its_own_tier_and_the_answer_says_what_a_node_holds() -> None:
    """--kv-offloading-size is one engine's total (engine_id per DP rank, vllm/config/vllm.py); TP 4 × DP 2 on
    one node with 400 GiB holds 800 GiB of host memory."""
    asked = {"model": "llama-3.1-70b", "gpu": "H100", "tensor_parallel_size": 4, "kv_offloading_size_gib": 400}
    two = run_tool("size_offload", {**asked, "data_parallel_size": 2, "host_ram_gib": 1024, "version": "0.34.0"})
    assert two.offload.host_gib_per_node == 800 and two.host_ram_left_gib == 224  # type: ignore[attr-defined]
    assert "host memory the tier takes per node: 800 GiB (400 GiB per engine × 2)" in two.summary()
    one = run_tool("size_offload", {**asked, "version": "0.34.0"})
    assert one.offload.host_gib_per_node == 400 and "takes per node" not in one.summary()  # type: ignore[attr-defined]
