"""The config.json reader on Mamba2 hybrids (Nemotron-H, Granite 4.0-H) and Qwen3.5 (issue 14).

A Nemotron-H config used to be read as all attention (52 layers of KV where the engine keeps 4), with no
warning. Each test feeds the reader a config.json the way the model's publisher writes it and checks the
layout vLLM builds from it (vllm/model_executor/models/nemotron_h.py, granitemoehybrid.py, qwen3_5.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.advice.model_config import architecture_from_hf_config
from vllm_caching_mcp.knowledge import Mamba2State

CONFIGS = Path(__file__).resolve().parent / "data" / "engine" / "configs"
NEMOTRON_H_8B_PATTERN = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"


def published(model: str) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((CONFIGS / model / "config.json").read_text())
    return raw


def refusal(raw: dict[str, Any]) -> str:
    with pytest.raises(AdviceError) as caught:
        architecture_from_hf_config(raw, name="m")
    assert caught.value.field == "config_path"
    text = str(caught.value)
    assert "\n" not in text and text.startswith("config_path: ")
    return text.removeprefix("config_path: ")


def test_nemotron_h_pattern_is_mamba2_attention_and_mlp_blocks() -> None:
    raw = published("nemotron-h-8b")
    assert raw["hybrid_override_pattern"] == NEMOTRON_H_8B_PATTERN
    arch = architecture_from_hf_config(raw, name="nemotron-h-8b")
    # 24 M, 4 *, 24 -: the MLP blocks hold no cache, so 28 layers hold KV or state and 4 of them are attention.
    assert (arch.num_layers, arch.linear_attention_layers, arch.full_attention_layers) == (28, 24, 4)
    assert arch.mamba2 is not None and arch.linear_attention is None
    assert arch.mamba2 == Mamba2State(
        mamba_num_heads=128, mamba_head_dim=64, n_groups=8, ssm_state_size=128, conv_kernel=4
    )
    assert arch.architecture == "NemotronHForCausalLM"
    assert arch.ssm_state_dtype is None  # the config names none: vLLM's hook decides (the sizing tests)


def test_nemotron_h_layers_block_type_and_the_older_mamba_spellings_read_the_same() -> None:
    raw = published("nemotron-h-8b")
    kinds = {"M": "linear_attention", "*": "full_attention", "-": "mlp"}
    raw["layers_block_type"] = [kinds[c] for c in raw.pop("hybrid_override_pattern")]
    raw["mamba_n_groups"], raw["mamba_d_conv"] = raw.pop("n_groups"), raw.pop("conv_kernel")
    arch = architecture_from_hf_config(raw, name="m")
    assert (arch.num_layers, arch.linear_attention_layers) == (28, 24)
    assert arch.mamba2 is not None and (arch.mamba2.n_groups, arch.mamba2.conv_kernel) == (8, 4)


def test_nemotron_h_moe_blocks_hold_no_cache_either() -> None:
    raw = {**published("nemotron-h-8b"), "hybrid_override_pattern": "MEM*EM-E", "num_hidden_layers": 8}
    arch = architecture_from_hf_config(raw, name="m")
    assert (arch.num_layers, arch.linear_attention_layers, arch.full_attention_layers) == (4, 3, 1)


def granite_hybrid(**changes: Any) -> dict[str, Any]:
    """A Granite 4.0-H style config: layer_types mamba / attention, mamba_d_head 'auto'."""
    raw: dict[str, Any] = {
        "architectures": ["GraniteMoeHybridForCausalLM"],
        "model_type": "granitemoehybrid",
        "hidden_size": 1536,
        "num_hidden_layers": 8,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
        "max_position_embeddings": 131072,
        "layer_types": ["mamba", "mamba", "mamba", "attention", "mamba", "mamba", "mamba", "attention"],
        "mamba_n_heads": 48,
        "mamba_d_head": "auto",
        "mamba_expand": 2,
        "mamba_n_groups": 1,
        "mamba_d_state": 128,
        "mamba_d_conv": 4,
        "torch_dtype": "bfloat16",
    }
    raw.update(changes)
    return raw


def test_granite_layer_types_and_auto_head_dim() -> None:
    arch = architecture_from_hf_config(granite_hybrid(), name="granite")
    assert (arch.num_layers, arch.linear_attention_layers, arch.full_attention_layers) == (8, 6, 2)
    # 'auto': mamba_expand × hidden_size / mamba_n_heads = 2 × 1536 / 48 (transformers' GraniteMoeHybridConfig).
    assert arch.mamba2 == Mamba2State(
        mamba_num_heads=48, mamba_head_dim=64, n_groups=1, ssm_state_size=128, conv_kernel=4
    )
    assert arch.head_dim == 1536 // 12


def test_granite_fields_left_out_take_the_transformers_defaults() -> None:
    raw = granite_hybrid()
    for key in ("mamba_n_groups", "mamba_d_state", "mamba_d_conv", "mamba_d_head"):
        del raw[key]
    arch = architecture_from_hf_config(raw, name="granite")
    assert arch.mamba2 == Mamba2State(
        mamba_num_heads=48, mamba_head_dim=64, n_groups=1, ssm_state_size=256, conv_kernel=4
    )


def test_granite_head_dim_that_does_not_match_the_inner_width_is_refused() -> None:
    assert "mamba_expand × hidden_size" in refusal(granite_hybrid(mamba_d_head=32))


def test_mamba2_sizes_without_a_layer_layout_are_refused_not_read_as_all_attention() -> None:
    raw = published("nemotron-h-8b")
    del raw["hybrid_override_pattern"]
    message = refusal(raw)
    assert "hybrid_override_pattern" in message and "all attention" in message


@pytest.mark.parametrize("pattern", ["M-M*x-", "", "M M*"])
def test_a_pattern_with_an_unknown_block_names_the_field_and_what_it_takes(pattern: str) -> None:
    # The whole message: the key and what it takes, never the file's content.
    assert refusal({**published("nemotron-h-8b"), "hybrid_override_pattern": pattern}) == (
        "config.json field 'hybrid_override_pattern' takes M (Mamba2), * (attention), - (MLP) and E (MoE) only"
    )


def test_unknown_layer_types_of_a_mamba2_hybrid_are_refused() -> None:
    types = ["mamba"] * 7 + ["sliding_attention"]
    assert "'layer_types' of a Mamba2 hybrid takes" in refusal(granite_hybrid(layer_types=types))


def test_a_pattern_longer_than_the_layers_is_refused() -> None:
    message = refusal({**published("nemotron-h-8b"), "num_hidden_layers": 50})
    assert message == "hybrid_override_pattern lists 52 layers, num_hidden_layers is 50"


def test_a_pure_state_space_model_is_refused() -> None:
    assert "no attention layer" in refusal(granite_hybrid(layer_types=["mamba"] * 8))


def test_missing_mamba2_sizes_are_named() -> None:
    raw = {k: v for k, v in published("nemotron-h-8b").items() if k not in ("mamba_head_dim", "model_type")}
    assert refusal(raw) == "Mamba2 layers need their state sizes; missing ['mamba_head_dim']"


def test_qwen3_5_reads_the_text_config_and_its_float32_recurrent_state() -> None:
    arch = architecture_from_hf_config(published("qwen3.5-35b-a3b"), name="qwen3.5")
    assert (arch.num_layers, arch.linear_attention_layers, arch.full_attention_layers) == (40, 30, 10)
    assert (arch.num_kv_heads, arch.head_dim, arch.ssm_state_dtype) == (2, 256, "float32")
    assert arch.architecture == "Qwen3_5MoeForConditionalGeneration"
    assert arch.linear_attention is not None and arch.mamba2 is None


def test_qwen3_5_without_full_attention_interval_takes_the_class_default_of_4() -> None:
    raw = published("qwen3.5-35b-a3b")
    del raw["text_config"]["full_attention_interval"]
    arch = architecture_from_hf_config(raw, name="qwen3.5")
    assert (arch.linear_attention_layers, arch.full_attention_layers) == (30, 10)


def test_gated_deltanet_sizes_without_a_layer_layout_are_refused() -> None:
    text = {k: v for k, v in published("qwen3.5-35b-a3b")["text_config"].items() if k != "full_attention_interval"}
    del text["model_type"]  # no class defaults to fall back on
    message = refusal({"architectures": ["Qwen3_5MoeForCausalLM"], **text})
    assert "linear_*" in message and "all attention" in message


@pytest.mark.parametrize("key", ["mamba_ssm_dtype", "mamba_ssm_cache_dtype"])
def test_a_declared_ssm_dtype_must_be_one_vllm_takes(key: str) -> None:
    raw = {**published("nemotron-h-8b"), key: "float8"}
    assert refusal(raw) == f"config.json field {key!r} must be float32, bfloat16, float16 or auto"
    auto = architecture_from_hf_config({**published("nemotron-h-8b"), key: "auto"}, name="m")
    assert auto.ssm_state_dtype is None
