"""The config.json reader completes a published config as transformers' class for its model_type does.

vLLM loads a config.json through transformers, so a key the file leaves out is that class's default,
not "absent" (issue 14: the published Gemma 3 config.json, which has neither sliding_window_pattern nor
layer_types nor max_position_embeddings, was read as 62 sliding layers and no context length). The
defaults are those of the transformers vLLM 0.33.0 runs with (model_config._TRANSFORMERS_DEFAULTS).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from vllm_caching_mcp.advice.model_config import Architecture, architecture_from_hf_config

ENGINE_CONFIGS = Path(__file__).resolve().parent / "data" / "engine" / "configs"


def published(model: str) -> dict[str, Any]:
    """A config.json as its publisher wrote it (the files the engine oracle ran, tests/data/engine/configs)."""
    raw: dict[str, Any] = json.loads((ENGINE_CONFIGS / model / "config.json").read_text())
    return raw


def read(raw: dict[str, Any]) -> Architecture:
    return architecture_from_hf_config(raw, name="test")


def test_the_published_gemma_3_config_has_the_layer_pattern_and_context_of_its_class() -> None:
    raw = published("gemma-3-27b")
    assert not {"sliding_window_pattern", "layer_types", "max_position_embeddings"} & set(raw["text_config"])
    arch = read(raw)
    # Gemma3TextConfig derives layer_types from sliding_window_pattern (default 6): layers 5, 11, ..., 59 are
    # full attention, 62 // 6 = 10 of them; the other 52 slide over the published window of 1024.
    assert (arch.full_attention_layers, arch.sliding_window_layers, arch.sliding_window) == (10, 52, 1024)
    assert arch.max_position_embeddings == 131_072  # the class default; vLLM 0.33.0 served 131,072 tokens
    assert (arch.num_layers, arch.num_kv_heads, arch.head_dim) == (62, 16, 128)  # as published


def test_a_key_the_file_gives_is_the_files() -> None:
    raw = published("gemma-3-27b")
    raw["text_config"].update(sliding_window_pattern=2, max_position_embeddings=32_768)
    arch = read(raw)
    assert (arch.full_attention_layers, arch.sliding_window_layers) == (31, 31)
    assert arch.max_position_embeddings == 32_768


def test_a_key_present_as_null_stays_null() -> None:
    # Mistral Small 3.1's decoder is a MistralConfig (sliding_window defaults to 4096), but the published
    # file says null: every layer is full attention, as vLLM 0.33.0 allocated it.
    raw = published("mistral-small-3.1-24b")
    assert raw["text_config"]["sliding_window"] is None
    arch = read(raw)
    assert (arch.sliding_window_layers, arch.full_attention_layers, arch.sliding_window) == (0, 40, None)


def test_the_wrapper_names_the_decoder_when_text_config_does_not() -> None:
    raw = published("gemma-3-27b")
    del raw["text_config"]["model_type"]  # Gemma3Config builds a Gemma3TextConfig from it all the same
    assert read(raw).sliding_window_layers == 52


def test_mistral_without_a_sliding_window_key_slides_every_layer() -> None:
    # MistralConfig's sliding_window defaults to 4096, and vLLM then gives every layer that window.
    raw = {
        "model_type": "mistral",
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "max_position_embeddings": 32_768,
    }
    arch = read(raw)
    assert (arch.sliding_window_layers, arch.sliding_window, arch.head_dim) == (32, 4096, 128)


def test_llama_4_chunked_layers_come_from_the_no_rope_interval_and_the_default_chunk() -> None:
    raw = published("llama-4-scout")
    assert raw["text_config"]["no_rope_layers"] == []  # empty: Llama4TextConfig derives it, every 4th layer NoPE
    arch = read(raw)
    assert (arch.chunked_local_layers, arch.full_attention_layers, arch.attention_chunk_size) == (36, 12, 8192)
    no_chunk_key = copy.deepcopy(raw)
    del no_chunk_key["text_config"]["attention_chunk_size"]
    assert read(no_chunk_key).attention_chunk_size == 8192  # the class default
    chunk_off = copy.deepcopy(raw)
    chunk_off["text_config"]["attention_chunk_size"] = None
    assert (read(chunk_off).chunked_local_layers, read(chunk_off).full_attention_layers) == (0, 48)


def test_qwen_without_use_sliding_window_keeps_full_attention() -> None:
    # Qwen2Config / Qwen3Config ship a sliding_window value but use_sliding_window defaults to False.
    raw = {
        "model_type": "qwen3",
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "sliding_window": 32_768,
        "max_position_embeddings": 40_960,
    }
    assert read(raw).sliding_window_layers == 0


def test_a_model_type_without_a_row_reads_only_the_file() -> None:
    raw = {"model_type": "not_a_known_model", "num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512}
    arch = read(raw)
    assert arch.max_position_embeddings is None  # size_offload then asks for max_model_len
    assert arch.num_kv_heads == 8
