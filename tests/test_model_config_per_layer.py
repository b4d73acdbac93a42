"""Layouts whose layers differ from one another, as issue 27's sweep found them (vLLM 0.33.0).

DeciLM / Nemotron-NAS (Llama-3.3-Nemotron-Super) keeps KV only in the blocks whose attention is not
no_op, with num_attention_heads // n_heads_in_group KV heads: read as vLLM reads it, it is an
ordinary GQA model with fewer layers. Gemma 4's global layers have their own head size and KV heads:
the reader keeps both geometries, and sizing unifies their pages as the planner does. MiMo-V2's
sliding layers have their own KV heads, and every layer caches a V head smaller than its K head
(vLLM's DiffKV attention): kept the same way. LFM2 keeps KV only in its full_attention layers; the others
are short convolutions with a conv state per sequence, sized like the other hybrids' state.

The configs under tests/data/engine/configs/ for these models are written for these tests in the
shape of the published ones (the keys and sizes vLLM reads), not copied whole.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import size_offload_of
from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.advice.model_config import architecture_from_hf_config
from vllm_caching_mcp.knowledge import Knowledge

CONFIGS = Path(__file__).resolve().parent / "data" / "engine" / "configs"


def published(model: str) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((CONFIGS / model / "config.json").read_text())
    return raw


def test_nemotron_nas_counts_only_the_blocks_with_attention() -> None:
    arch = architecture_from_hf_config(published("llama-3.3-nemotron-super-49b"), name="nemotron-super")
    assert (arch.num_layers, arch.num_kv_heads, arch.head_dim) == (49, 8, 128)


def test_nemotron_nas_kv_per_token_is_the_engines(knowledge: Knowledge) -> None:
    """49 attention layers × 2 × 8 KV heads × 128 × 2 B: the 13× of the all-layers reading is gone."""
    answer = size_offload_of(
        knowledge,
        config_path=str(CONFIGS / "llama-3.3-nemotron-super-49b"),
        tensor_parallel_size=4,
        weights_gib_per_gpu=25,
    )
    assert answer.kv_bytes_per_token_total == 49 * 2 * 8 * 128 * 2
    assert not any("will not start" in w for w in answer.warnings)
    # its config class is remote code: vLLM 0.33.0's engine config refuses it without --trust-remote-code
    # (recorded with the oracle on this config: 'contains custom code which must be executed')
    assert any("start it with --trust-remote-code" in w for w in answer.warnings)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({0: {"attention": {"no_op": False}}}, "needs n_heads_in_group"),
        ({0: {"attention": {"no_op": False, "n_heads_in_group": 16}}}, r"different n_heads_in_group \(\[8, 16\]\)"),
        ({0: "block"}, "needs an attention object"),
    ],
)
def test_nemotron_nas_blocks_vllm_cannot_build_or_that_differ_are_refused(change: dict[int, Any], message: str) -> None:
    raw = published("llama-3.3-nemotron-super-49b")
    for index, block in change.items():
        raw["block_configs"][index] = block
    with pytest.raises(AdviceError, match=message):
        architecture_from_hf_config(raw, name="nas")


def test_nemotron_nas_without_attention_blocks_is_refused() -> None:
    raw = published("llama-3.3-nemotron-super-49b")
    raw["block_configs"] = [{"attention": {"no_op": True}, "ffn": {}} for _ in raw["block_configs"]]
    with pytest.raises(AdviceError, match="no attention block"):
        architecture_from_hf_config(raw, name="nas")
    raw["block_configs"] = raw["block_configs"][:3]
    with pytest.raises(AdviceError, match=r"one block per layer \(80\)"):
        architecture_from_hf_config(raw, name="nas")


def test_mimo_v2_sliding_layers_have_their_own_kv_heads_and_v_is_smaller_than_k(knowledge: Knowledge) -> None:
    """vLLM 0.33.0, H100, TP 1: sliding layers (192 + 128) × 8 heads × 2 B = 5,120 B/token, full layers 4 heads
    = 2,560 B/token; the full layers' block doubles to 32; 9 layers a group, 6 groups."""
    answer = size_offload_of(
        knowledge, config_path=str(CONFIGS / "mimo-v2-flash"), version="0.33.0", weights_gib_per_gpu=10
    )
    kinds = {k.kind: k for k in answer.layer_kinds}
    assert (kinds["sliding_window"].bytes_per_token_per_layer_per_rank, kinds["full_attention"].block_size) == (
        5_120,
        32,
    )
    assert (answer.kv_heads_per_rank, answer.gpu_block_bytes_per_rank) == (4, 81_920 * 9)


def test_mimo_v2_fp8_on_blackwell_is_refused_as_vllm_refuses_it(knowledge: Knowledge) -> None:
    answer = size_offload_of(
        knowledge,
        config_path=str(CONFIGS / "mimo-v2-flash"),
        version="0.33.0",
        gpu="gpu.b200",
        kv_cache_dtype="fp8",
        weights_gib_per_gpu=10,
    )
    assert any(w.startswith("ERROR") and "DiffKV backend, which refuses an fp8 KV cache" in w for w in answer.warnings)


def test_gemma4_global_layers_keep_their_own_head_size_and_kv_heads() -> None:
    arch = architecture_from_hf_config(published("gemma-4-31b"), name="gemma4")
    assert (arch.num_layers, arch.sliding_window_layers, arch.full_attention_layers) == (60, 50, 10)
    assert (arch.head_dim, arch.num_kv_heads, arch.sliding_window) == (256, 16, 1024)
    assert (arch.full_head_dim, arch.full_kv_heads) == (512, 4)


def test_gemma4_e4b_keeps_kv_only_in_the_layers_before_the_shared_ones() -> None:
    arch = architecture_from_hf_config(published("gemma-4-e4b"), name="gemma4-e4b")
    assert (arch.num_layers, arch.sliding_window_layers, arch.full_attention_layers) == (24, 20, 4)
    assert (arch.head_dim, arch.full_head_dim, arch.num_kv_heads, arch.full_kv_heads) == (256, 512, 2, 2)


def test_gemma4_without_k_eq_v_keeps_the_shared_kv_heads_and_shared_layers_keep_no_kv() -> None:
    raw = published("gemma-4-31b")
    raw["text_config"].update(attention_k_eq_v=False, num_kv_shared_layers=12)
    arch = architecture_from_hf_config(raw, name="gemma4")
    # The last 12 layers reuse earlier KV: 48 layers of their own, every 6th of them global.
    assert (arch.num_layers, arch.sliding_window_layers, arch.full_attention_layers) == (48, 40, 8)
    assert (arch.full_head_dim, arch.full_kv_heads) == (512, 16)


def test_gemma4_defaults_are_transformers_class_defaults() -> None:
    """A config.json that leaves the layout out gets Gemma4TextConfig's: 30 layers, every 6th (and the last) full,
    global head 512, window 512."""
    arch = architecture_from_hf_config({"model_type": "gemma4", "text_config": {}}, name="gemma4")
    assert (arch.num_layers, arch.sliding_window_layers, arch.sliding_window) == (30, 25, 512)
    assert (arch.head_dim, arch.full_head_dim, arch.num_kv_heads, arch.full_kv_heads) == (256, 512, 4, 4)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"layer_types": ["full_attention"] * 3}, "layer_types must list its 60 layers"),
        ({"num_kv_shared_layers": 60}, "'num_kv_shared_layers' must be 0 to 59"),
        ({"sliding_window": None}, "gives no sliding_window"),
    ],
)
def test_gemma4_configs_vllm_cannot_read_are_refused(change: dict[str, Any], message: str) -> None:
    raw = published("gemma-4-31b")
    raw["text_config"].update(change)
    with pytest.raises(AdviceError, match=message):
        architecture_from_hf_config(raw, name="gemma4")


def test_gemma4_pages_are_unified_as_the_planner_does(knowledge: Knowledge) -> None:
    """vLLM 0.33.0 on H100, TP 1: sliding layers 16 × 256 × 2 × 2 B = 16,384 B/token, global 4 × 512 × 2 × 2 B =
    8,192 B/token; the global layers' block doubles to 32 so both pages are 262,144 B; 6 groups of 10 layers."""
    answer = size_offload_of(
        knowledge,
        config_path=str(CONFIGS / "gemma-4-31b"),
        version="0.33.0",
        weights_gib_per_gpu=10,
        max_model_len=262_144,
    )
    kinds = {k.kind: k for k in answer.layer_kinds}
    assert (kinds["sliding_window"].block_size, kinds["full_attention"].block_size) == (16, 32)
    assert (
        kinds["sliding_window"].bytes_per_token_per_layer_per_rank,
        kinds["full_attention"].bytes_per_token_per_layer_per_rank,
    ) == (
        16_384,
        8_192,
    )
    assert answer.gpu_block_bytes_per_rank == 262_144 * 10
    assert answer.kv_heads_per_rank == 16
    assert "block 32" in answer.summary()


def test_gemma4_fp8_on_hopper_takes_flashattention4s_64_token_block(knowledge: Knowledge) -> None:
    answer = size_offload_of(
        knowledge,
        config_path=str(CONFIGS / "gemma-4-31b"),
        version="0.33.0",
        kv_cache_dtype="fp8",
        weights_gib_per_gpu=10,
    )
    kinds = {k.kind: k.block_size for k in answer.layer_kinds}
    assert (answer.block_size, kinds["sliding_window"], kinds["full_attention"]) == (64, 64, 128)


def test_gemma4_without_the_hybrid_manager_is_one_group_holding_every_layers_page(knowledge: Knowledge) -> None:
    answer = size_offload_of(
        knowledge,
        config_path=str(CONFIGS / "gemma-4-31b"),
        version="0.33.0",
        weights_gib_per_gpu=10,
        hybrid_kv_cache_manager=False,
    )
    (kind,) = answer.layer_kinds
    assert kind.kind == "full_attention" and kind.bytes_per_token_per_layer_per_rank is None
    assert kind.bytes_per_token_per_rank == 50 * 16_384 + 10 * 8_192
    assert answer.gpu_block_bytes_per_rank == 16 * (50 * 16_384 + 10 * 8_192)


def test_gemma4_offload_block_size_across_groups_of_different_blocks_is_refused(knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"^offload_block_size: .*blocks of 16 and 32 tokens"):
        size_offload_of(
            knowledge,
            config_path=str(CONFIGS / "gemma-4-31b"),
            version="0.33.0",
            weights_gib_per_gpu=10,
            offload_backend="native",
            kv_offloading_size_gib=64,
            offload_block_size=64,
        )


def test_gemma4_tp_must_divide_the_global_kv_heads(knowledge: Knowledge, tmp_path: Path) -> None:
    """TP 4 divides the 16 sliding KV heads, not 6 global ones: vLLM's QKVParallelLinear refuses the global layers."""
    raw = published("gemma-4-31b")
    raw["text_config"]["num_global_key_value_heads"] = 6
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(AdviceError, match=r"^tensor_parallel_size: .*TP \(4\) and the KV heads \(6\)"):
        size_offload_of(knowledge, config_path=str(tmp_path), tensor_parallel_size=4, weights_gib_per_gpu=10)
