"""Layouts whose layers differ from one another, as issue 27's sweep found them (vLLM 0.33.0).

DeciLM / Nemotron-NAS (Llama-3.3-Nemotron-Super) keeps KV only in the blocks whose attention is not
no_op, with num_attention_heads // n_heads_in_group KV heads: read as vLLM reads it, it is an
ordinary GQA model with fewer layers. Gemma 4 (global layers with their own head size and KV
heads) and MiMo-V2 (sliding layers with their own heads and K/V sizes) do not fit one head size and
KV-head count for every layer: the reader refuses them with the reason instead of giving figures
wrong by the factors the sweep measured. LFM2 keeps KV only in its full_attention layers; the others
are short convolutions with a conv state per sequence, sized like the other hybrids' state.

The configs under tests/data/engine/configs/ for these four are written for these tests in the
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


@pytest.mark.parametrize(
    ("model", "why"),
    [
        ("gemma-4-31b", r"Gemma 4: its global.*gemma4.py:577-580"),
        ("mimo-v2-flash", r"MiMo-V2: its sliding-window layers.*mimo_v2.py:403-438"),
    ],
)
def test_layouts_with_per_layer_geometry_are_refused_with_the_engines_reason(
    knowledge: Knowledge, model: str, why: str
) -> None:
    with pytest.raises(AdviceError, match=rf"^config_path: {why}.*gives none. Read the KV cache size"):
        size_offload_of(knowledge, config_path=str(CONFIGS / model), weights_gib_per_gpu=10)


def test_lfm2_keeps_kv_in_its_attention_layers_and_conv_state_in_the_others() -> None:
    arch = architecture_from_hf_config(published("lfm2-1.2b"), name="lfm2")
    assert (arch.num_layers, arch.linear_attention_layers, arch.full_attention_layers) == (16, 10, 6)
    assert arch.short_conv is not None
    assert (arch.short_conv.conv_dim, arch.short_conv.conv_kernel) == (2048, 3)


@pytest.mark.parametrize("drop", ["full_attn_idxs", "layer_types"])
def test_lfm2_is_read_from_either_of_its_layer_lists(drop: str) -> None:
    raw = published("lfm2-1.2b")
    del raw[drop]
    arch = architecture_from_hf_config(raw, name="lfm2")
    assert (arch.linear_attention_layers, arch.full_attention_layers) == (10, 6)


def test_lfm2_conv_state_per_rank_is_the_engines(knowledge: Knowledge) -> None:
    """2048 channels / TP 2 × (3 − 1) × 2 B = 4 KiB per sequence per conv layer and rank."""
    answer = size_offload_of(
        knowledge,
        config_path=str(CONFIGS / "lfm2-1.2b"),
        tensor_parallel_size=2,
        weights_gib_per_gpu=2,
    )
    conv = next(k for k in answer.layer_kinds if k.kind == "linear_attention")
    assert (conv.layers, conv.state_bytes_per_sequence_per_rank) == (10, 2048 // 2 * 2 * 2)


def test_lfm2_conv_channels_must_divide_by_tp(knowledge: Knowledge) -> None:
    raw = published("lfm2-1.2b")
    raw["conv_dim"] = 2050
    with pytest.raises(AdviceError, match=r"ShortConv splits its 2050 channels over TP \(4\)"):
        arch = architecture_from_hf_config(raw, name="lfm2").model_dump()
        size_offload_of(knowledge, architecture=arch, tensor_parallel_size=4, weights_gib_per_gpu=2)
