"""The config.json reader and size_offload on the dense, MoE and MLA models coding-agent fleets run (issues 14, 17).

Each config.json under tests/data/engine/configs/ is the model's published config, written by hand
(knowledge/models.yaml says where each value came from); the engine's own figures for them are in
tests/data/engine/golden-0.33.0-dense.json. These tests pin the step each one exercises: keys the
reader must ignore (GLM's partial rotary factor), keys it must read differently for MLA (Kimi's
num_key_value_heads), the fp8 weights a quantization_config declares, and a layout size_offload
does not size (DeepSeek V3.2's sparse attention) and says so instead of answering with MLA figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import exact_budget, size_offload_of
from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.advice.model_config import (
    SPARSE_MLA_RULE,
    Architecture,
    architecture_from_hf_config,
    from_knowledge,
)
from vllm_caching_mcp.advice.sizing import SizeOffloadResult
from vllm_caching_mcp.knowledge import Knowledge, load_knowledge
from vllm_caching_mcp.tools import ToolInputError, run_tool

CONFIGS = Path(__file__).resolve().parent / "data" / "engine" / "configs"
GIB = 1 << 30


@pytest.fixture(scope="module")
def knowledge() -> Knowledge:
    return load_knowledge()


def published(model: str) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((CONFIGS / model / "config.json").read_text())
    return raw


def read(model: str) -> Architecture:
    return architecture_from_hf_config(published(model), name=model)


def ask(knowledge: Knowledge, **fields: object) -> SizeOffloadResult:
    """size_offload with the per-rank KV budget exactly `gpu_memory_gib` (as the golden test asks it)."""
    return size_offload_of(knowledge, **exact_budget(**fields))


# ------------------------------------------------------------------------------------ the reader, model by model


@pytest.mark.parametrize(
    ("model", "layers", "kv_heads", "head_dim", "context"),
    [
        ("qwen3-32b", 64, 8, 128, 40960),
        ("llama-3.3-70b", 80, 8, 128, 131072),
        ("qwen3-coder-30b-a3b", 48, 4, 128, 262144),
        ("qwen3-coder-480b-a35b", 62, 8, 128, 262144),
    ],
)
def test_dense_and_moe_configs_read_as_full_attention(
    model: str, layers: int, kv_heads: int, head_dim: int, context: int
) -> None:
    arch = read(model)
    assert (arch.num_layers, arch.num_kv_heads, arch.head_dim) == (layers, kv_heads, head_dim)
    assert arch.attention == "gqa" and arch.full_attention_layers == layers
    assert arch.max_position_embeddings == context
    # Qwen3 ships sliding_window null with use_sliding_window false: no sliding layers.
    assert arch.sliding_window is None and arch.sliding_window_layers == 0


def test_qwen3_head_dim_is_read_not_derived_from_the_hidden_size() -> None:
    # Qwen3-Coder-480B: hidden_size 6144 / 96 heads would be 64; the config's head_dim is 128, and vLLM caches 128
    # (golden: 62 layers × 2 × 8 heads × 128 × 2 bytes = 4,096 bytes per token per layer at TP 1).
    raw = published("qwen3-coder-480b-a35b")
    assert raw["hidden_size"] // raw["num_attention_heads"] == 64
    assert read("qwen3-coder-480b-a35b").head_dim == 128


def test_glm_partial_rotary_factor_does_not_change_the_cached_head() -> None:
    # GLM-4.5 rotates half of each head (partial_rotary_factor 0.5) but caches all of it: K and V stay 128 wide.
    raw = published("glm-4.5")
    assert raw["partial_rotary_factor"] == 0.5
    arch = read("glm-4.5")
    assert (arch.num_layers, arch.num_kv_heads, arch.head_dim, arch.kv_head_size) == (92, 8, 128, 128)
    # The MTP layer (num_nextn_predict_layers 1) is not a decoder layer of the served model.
    assert arch.num_layers == raw["num_hidden_layers"]


def test_kimi_k2_is_mla_whatever_num_key_value_heads_says() -> None:
    # Kimi K2 (and DeepSeek V3) ship num_key_value_heads = the attention heads (64); MLA caches one latent of
    # kv_lora_rank + qk_rope_head_dim per token, on every rank.
    raw = published("kimi-k2")
    assert raw["num_key_value_heads"] == raw["num_attention_heads"] == 64
    arch = read("kimi-k2")
    assert arch.attention == "mla" and arch.kv_head_size == 512 + 64
    assert arch.weights_dtype == "fp8"  # quantization_config quant_method fp8: the weights, not the KV cache


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_kimi_k2_keeps_one_latent_per_rank(knowledge: Knowledge, tp: int) -> None:
    # Golden kimi-k2/tp{1,2,8}/auto/h100: FLASH_ATTN_MLA, block 16, 61 × 1,152 bytes, 38,199 blocks at every TP.
    result = ask(knowledge, config_path=str(CONFIGS / "kimi-k2"), tensor_parallel_size=tp, gpu_memory_gib=40)
    assert result.kv_heads_per_rank == 1
    assert result.block_size == 16
    assert result.kv_bytes_per_token_per_rank == 61 * 1152
    assert result.num_gpu_blocks == 40 * GIB // (61 * 1152 * 16)


def test_fp8_weights_do_not_make_the_kv_cache_fp8(knowledge: Knowledge) -> None:
    # Kimi K2's fp8 checkpoint with kv_cache_dtype auto: the cache stays bf16 (golden kimi-k2/tp1/auto: 1,152 B).
    result = ask(knowledge, config_path=str(CONFIGS / "kimi-k2"), gpu_memory_gib=40)
    assert result.kv_bytes_per_token_per_rank == 61 * (512 + 64) * 2


# ------------------------------------------------------------------------------------ the knowledge entries


@pytest.mark.parametrize(
    "model",
    ["qwen3-32b", "llama-3.3-70b", "qwen3-coder-30b-a3b", "qwen3-coder-480b-a35b", "glm-4.5", "kimi-k2"],
)
def test_the_knowledge_entry_is_the_config(knowledge: Knowledge, model: str) -> None:
    """The models.yaml entry and the published config.json give size_offload the same layout."""
    entry = knowledge.find_model(model)
    assert entry is not None, model
    # what only a config file gives (its model_type and auto_map, which decide how vLLM loads it) is left out
    left_out = {"name", "params_total_b", "params_active_b", "model_type", "remote_config", "remote_model"}
    ours = from_knowledge(entry).model_dump(exclude=left_out)
    theirs = read(model).model_dump(exclude=left_out)
    assert ours == theirs


# ------------------------------------------------------------------------------------ DeepSeek V3.2: not sized


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
def test_deepseek_v32_sparse_attention_is_refused_not_sized_as_mla(knowledge: Knowledge, kv_cache_dtype: str) -> None:
    # vLLM gives every V3.2 layer an indexer key cache besides the MLA latent, and packs fp8 MLA into 656-byte
    # rows (rule engine.sparse-mla-indexer): the plain MLA figures (61 × 1,152 or 61 × 576 bytes) would be wrong.
    with pytest.raises(AdviceError) as raised:
        ask(knowledge, config_path=str(CONFIGS / "deepseek-v3.2"), kv_cache_dtype=kv_cache_dtype, gpu_memory_gib=40)
    assert raised.value.field == "config_path"
    message = str(raised.value)
    assert "\n" not in message
    assert "DeepSeek Sparse Attention" in message and "index_topk 2048" in message
    assert SPARSE_MLA_RULE in message


def test_the_refusal_names_a_rule_the_knowledge_holds(knowledge: Knowledge) -> None:
    rule = knowledge.engine.rule(SPARSE_MLA_RULE)
    assert any(s.startswith("wheel:vllm==0.33.0:") for s in rule.sources)


def test_deepseek_v3_without_an_indexer_is_still_sized(knowledge: Knowledge) -> None:
    # The same MLA widths without index_topk: the golden figures (deepseek-v3/tp1/auto/h100: 61 × 1,152 bytes).
    raw = {k: v for k, v in published("deepseek-v3.2").items() if not k.startswith("index_")}
    arch = architecture_from_hf_config(raw, name="no indexer")
    assert arch.attention == "mla" and arch.kv_head_size == 576


def test_the_knowledge_entry_for_deepseek_v32_is_refused_naming_model(knowledge: Knowledge) -> None:
    with pytest.raises(ToolInputError, match=r"^model: .*DeepSeek Sparse Attention"):
        run_tool("size_offload", {"version": "0.33.0", "gpu": "h100-sxm", "model": "deepseek-v3.2"})
