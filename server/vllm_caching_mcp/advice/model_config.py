"""The architecture facts KV sizing needs, from the knowledge or from a local Hugging Face config.json.

`Architecture` is what `size_offload` computes with. It comes from one of three places: a
`ModelArch` entry in `knowledge/models.yaml` (sourced), a `config.json` on the user's disk
(read here, the way vLLM reads the same keys), or fields the user types in.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.json_schema import SkipJsonSchema

from ..knowledge import LinearAttentionState, Mamba2State, ModelArch, ShortConvState, SsmStateDType
from .common import AdviceError, ParamsB, TokenCount

DType = Literal["bfloat16", "float16", "float32"]
WeightsDType = Literal["bfloat16", "float16", "fp8", "mxfp4"]
# Bytes per parameter of the released weights; mxfp4 packs 4-bit values with one 8-bit scale per 32 (4.25 bits).
# Only an estimate of the footprint: embeddings and unquantized layers differ.
WEIGHT_BYTES: dict[str, float] = {"bfloat16": 2.0, "float16": 2.0, "fp8": 1.0, "mxfp4": 4.25 / 8}
MAX_CONFIG_BYTES = 4 * 2**20  # a config.json is tens of KiB; the bound is for the wrong file


class Architecture(BaseModel):
    """A decoder's attention layout: how many layers of each kind, and their KV geometry."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="custom model", max_length=200)
    num_layers: int = Field(gt=0, le=1000, description="layers with KV or state")
    num_attention_heads: int = Field(gt=0, le=4096)
    num_kv_heads: int = Field(gt=0, le=4096, description="num_key_value_heads")
    head_dim: int = Field(gt=0, le=4096)
    attention: Literal["gqa", "mla"] = Field(default="gqa", description="gqa covers MHA/MQA")
    kv_lora_rank: int | None = Field(default=None, gt=0, le=65536)
    qk_rope_head_dim: int | None = Field(default=None, gt=0, le=4096)
    sliding_window: TokenCount | None = Field(default=None, gt=0)
    sliding_window_layers: int = Field(default=0, ge=0, le=1000)
    # Gemma 4's full-attention (global) layers: their own head size and KV heads, where they differ from the
    # sliding layers' head_dim / num_kv_heads (rule engine.per-layer-attention-geometry). Read from config.json,
    # left out of the listed schema (its size is bounded), accepted all the same.
    full_attention_head_dim: SkipJsonSchema[int | None] = Field(default=None, gt=0, le=4096)
    full_attention_kv_heads: SkipJsonSchema[int | None] = Field(default=None, gt=0, le=4096)
    # MiMo-V2: V's head size where it differs from K's (vLLM's DiffKV attention), and the KV heads vLLM reports
    # for the model (its config's num_key_value_heads, the full layers') where they are not num_kv_heads.
    v_head_dim: SkipJsonSchema[int | None] = Field(default=None, gt=0, le=4096)
    reported_kv_heads: SkipJsonSchema[int | None] = Field(default=None, gt=0, le=4096)
    attention_chunk_size: TokenCount | None = Field(default=None, gt=0)
    chunked_local_layers: int = Field(default=0, ge=0, le=1000)
    linear_attention_layers: int = Field(default=0, ge=0, le=1000)
    linear_attention: LinearAttentionState | None = None
    mamba2: Mamba2State | None = None
    # LFM2's short convolutions: read from config.json, left out of the listed schema (its size is bounded).
    short_conv: SkipJsonSchema[ShortConvState | None] = None
    ssm_state_dtype: SsmStateDType | None = None  # config.json's mamba_ssm_dtype / mamba_ssm_cache_dtype
    # The model class (architectures[0]) vLLM's per-model config hooks key on: the reader fills it; left out of
    # the listed schema (its size is bounded, tests/test_compact_schema.py), accepted all the same.
    architecture: SkipJsonSchema[str | None] = Field(default=None, max_length=200)
    # config.json's model_type and the remote-code classes its auto_map names (AutoConfig, AutoModel*): what
    # decides whether vLLM can load the config and build the model at all (advice/engine_registry.py).
    model_type: SkipJsonSchema[str | None] = Field(default=None, max_length=200)
    remote_config: SkipJsonSchema[bool] = False
    remote_model: SkipJsonSchema[bool] = False
    # The checkpoint's tensor bytes (a Hub safetensors index's metadata.total_size): the weights side of the
    # budget for a model read from the Hub. Unlisted like `architecture`.
    checkpoint_bytes: SkipJsonSchema[int | None] = Field(default=None, gt=0, lt=2**50)
    params_total_b: ParamsB | None = Field(default=None, description="billions")
    params_active_b: ParamsB | None = Field(default=None, description="billions used per token")
    weights_dtype: WeightsDType = "bfloat16"
    default_dtype: DType = "bfloat16"
    max_position_embeddings: TokenCount | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> Architecture:
        special = self.sliding_window_layers + self.chunked_local_layers + self.linear_attention_layers
        if special > self.num_layers:
            raise ValueError("sliding_window_layers + chunked_local_layers + linear_attention_layers exceed num_layers")
        if self.attention == "mla" and (self.kv_lora_rank is None or self.qk_rope_head_dim is None):
            raise ValueError("attention 'mla' needs kv_lora_rank and qk_rope_head_dim")
        if self.sliding_window_layers and self.sliding_window is None:
            raise ValueError("sliding_window_layers needs sliding_window")
        if self.chunked_local_layers and self.attention_chunk_size is None:
            raise ValueError("chunked_local_layers needs attention_chunk_size")
        own_geometry = (self.full_attention_head_dim, self.full_attention_kv_heads, self.v_head_dim) != (None,) * 3
        if own_geometry and (self.attention == "mla" or self.linear_attention_layers):
            raise ValueError(
                "full_attention_head_dim / full_attention_kv_heads / v_head_dim are modelled for attention-only GQA "
                "layouts (Gemma 4, MiMo-V2), not with MLA or linear-attention layers"
            )
        states = (self.linear_attention, self.mamba2, self.short_conv)
        if self.linear_attention_layers and sum(state is not None for state in states) != 1:
            raise ValueError(
                "linear_attention_layers needs one of linear_attention (Gated DeltaNet linear_* sizes) or mamba2"
            )
        return self

    @property
    def full_attention_layers(self) -> int:
        return self.num_layers - self.sliding_window_layers - self.chunked_local_layers - self.linear_attention_layers

    @property
    def full_head_dim(self) -> int:
        """Head size of the full-attention layers (the sliding layers keep head_dim)."""
        return self.full_attention_head_dim or self.head_dim

    @property
    def full_kv_heads(self) -> int:
        return self.full_attention_kv_heads or self.num_kv_heads

    @property
    def full_layers_own_geometry(self) -> bool:
        """Whether the full-attention layers' head size or KV heads differ from the other layers'."""
        return (self.full_head_dim, self.full_kv_heads) != (self.head_dim, self.num_kv_heads)

    @property
    def v_head_size(self) -> int:
        """Width of one cached V head (K's unless the model gives V its own)."""
        return self.v_head_dim or self.head_dim

    @property
    def kv_head_size(self) -> int:
        """Width of one cached head: the MLA latent (kv_lora_rank + rope) or the head dim."""
        if self.attention == "mla":
            assert self.kv_lora_rank is not None and self.qk_rope_head_dim is not None
            return self.kv_lora_rank + self.qk_rope_head_dim
        return self.head_dim


# Architecture fields a knowledge entry does not have: what only a config read from disk or the Hub gives.
_NOT_IN_KNOWLEDGE = ("name", "checkpoint_bytes", "model_type", "remote_config", "remote_model")


def from_knowledge(entry: ModelArch) -> Architecture:
    fields = {name: getattr(entry, name) for name in Architecture.model_fields if name not in _NOT_IN_KNOWLEDGE}
    return Architecture(name=entry.name, **fields)


def _text_config(raw: dict[str, Any]) -> dict[str, Any]:
    """Multimodal configs (Llama 4, Gemma 3, Mistral 3) keep the decoder under text_config."""
    text = raw.get("text_config")
    if isinstance(text, dict):
        merged = {k: v for k, v in raw.items() if k != "text_config"}
        merged.update(text)
        return merged
    return raw


# What transformers' config class gives a key this reader uses when the config.json leaves it out: vLLM
# loads the config through that class, so a missing key is the class default, not "absent" (a key present
# as null stays null). Keyed on the decoder's model_type; the defaults of the transformers vLLM 0.33.0
# runs with (wheel:transformers==5.20.2:transformers/models/<model>/configuration_<model>.py at the lines
# named). `sliding_window_pattern` stands for the layer_types the class derives: every pattern-th layer
# full attention, the others sliding.
_TRANSFORMERS_DEFAULTS: dict[str, dict[str, Any]] = {
    # gemma2/configuration_gemma2.py:71-76, 88, 94-97 (layer_types: every 2nd layer full)
    "gemma2": {
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 8192,
        "sliding_window": 4096,
        "sliding_window_pattern": 2,
    },
    # gemma3/configuration_gemma3.py:77-82, 94, 101-112 (sliding_window_pattern, default 6, read from the file)
    "gemma3_text": {
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
    },
    # gemma4/configuration_gemma4.py:152-183, 185-224 (layer_types: every 6th layer full, the last forced full;
    # global_head_dim 512 for the full layers)
    "gemma4_text": {
        "num_hidden_layers": 30,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "sliding_window": 512,
        "sliding_window_pattern": 6,
        "global_head_dim": 512,
    },
    # cohere2/configuration_cohere2.py:70-74, 85, 88-102 (sliding_window_pattern, default 4)
    "cohere2": {
        "num_hidden_layers": 40,
        "num_attention_heads": 64,
        "max_position_embeddings": 8192,
        "sliding_window": 4096,
        "sliding_window_pattern": 4,
    },
    # gpt_oss/configuration_gpt_oss.py:50-62, 78-86 (layer_types: every 2nd layer full)
    "gpt_oss": {
        "num_hidden_layers": 36,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "max_position_embeddings": 131072,
        "sliding_window": 128,
        "sliding_window_pattern": 2,
    },
    # llama4/configuration_llama4.py:144-149, 168-169, 176-183 (no_rope_layers from the interval)
    "llama4_text": {
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "no_rope_layer_interval": 4,
        "attention_chunk_size": 8192,
    },
    # mistral/configuration_mistral.py:66-71, 80 (every layer slides when sliding_window is set)
    "mistral": {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
    },
    # qwen2/configuration_qwen2.py:64-68, 74-75, 83-84 (the window only with use_sliding_window)
    "qwen2": {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "max_position_embeddings": 32768,
        "use_sliding_window": False,
    },
    # qwen3/configuration_qwen3.py:65-70, 77-78, 86-87
    "qwen3": {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "head_dim": 128,
        "max_position_embeddings": 32768,
        "use_sliding_window": False,
    },
    # qwen3_next/configuration_qwen3_next.py:95-112, 127-135 (full_attention_interval, default 4)
    "qwen3_next": {
        "num_hidden_layers": 48,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "max_position_embeddings": 32768,
        "full_attention_interval": 4,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
    },
    # Mamba2 hybrids and Qwen3.5 (issue 14 "Mamba2 hybrids and Qwen3.5"); the defaults the reader uses.
    # nemotron_h/configuration_nemotron_h.py:96-99, 107-112 (hybrid_override_pattern has no default worth using)
    "nemotron_h": {
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 4096,
        "ssm_state_size": 128,
        "mamba_num_heads": 128,
        "mamba_head_dim": 64,
        "n_groups": 8,
        "conv_kernel": 4,
    },
    # granitemoehybrid/configuration_granitemoehybrid.py:58-64, 86-91 (mamba_d_head 'auto': expand × hidden / heads)
    "granitemoehybrid": {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "max_position_embeddings": 2048,
        "hidden_size": 4096,
        "mamba_n_heads": 128,
        "mamba_n_groups": 1,
        "mamba_d_state": 256,
        "mamba_d_head": "auto",
        "mamba_d_conv": 4,
        "mamba_expand": 2,
    },
    # qwen3_5/configuration_qwen3_5.py:85-89, 97-102, 112-113 (full_attention_interval, default 4)
    "qwen3_5_text": {
        "num_hidden_layers": 32,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 32768,
        "full_attention_interval": 4,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
    },
    # qwen3_5_moe/configuration_qwen3_5_moe.py:91-95, 103-108, 124-125 (full_attention_interval, default 4)
    "qwen3_5_moe_text": {
        "num_hidden_layers": 40,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "max_position_embeddings": 32768,
        "full_attention_interval": 4,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
    },
}
# The decoder config a multimodal wrapper builds when its text_config names no model_type
# (gemma3/configuration_gemma3.py:202, llama4/configuration_llama4.py:236, mistral3/configuration_mistral3.py:51-54).
_WRAPPER_TEXT_MODEL_TYPE = {
    "gemma3": "gemma3_text",
    "gemma4": "gemma4_text",
    "llama4": "llama4_text",
    "mistral3": "mistral",
}
# qwen3_5/configuration_qwen3_5.py:172-175, qwen3_5_moe/configuration_qwen3_5_moe.py:184-187 (sub_configs_defaults)
_WRAPPER_TEXT_MODEL_TYPE.update(qwen3_5="qwen3_5_text", qwen3_5_moe="qwen3_5_moe_text")


def _with_transformers_defaults(cfg: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    """The decoder config as transformers' class for its model_type completes it (see _TRANSFORMERS_DEFAULTS)."""
    text = raw.get("text_config")
    model_type = text.get("model_type") if isinstance(text, dict) else None
    if model_type is None:
        outer = raw.get("model_type")
        model_type = _WRAPPER_TEXT_MODEL_TYPE.get(outer, outer) if isinstance(outer, str) else None
    defaults = _TRANSFORMERS_DEFAULTS.get(model_type, {}) if isinstance(model_type, str) else {}
    return {**defaults, **cfg}


def _positive_int(cfg: dict[str, Any], key: str) -> int | None:
    value = cfg.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        # The key and what it takes, not the value: that is the content of a file on the server's host.
        raise AdviceError("config_path", f"config.json field {key!r} must be a positive integer")
    return value


def _dtype(cfg: dict[str, Any]) -> DType:
    text = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").replace("torch.", "")
    aliases: dict[str, DType] = {
        "bfloat16": "bfloat16",
        "float16": "float16",
        "half": "float16",
        "float32": "float32",
        "float": "float32",
    }
    return aliases.get(text, "bfloat16")


SPARSE_MLA_RULE = "engine.sparse-mla-indexer"  # knowledge/engine.yaml


def sparse_attention_refusal(label: str, index_topk: int) -> str:
    """Why a DeepSeek Sparse Attention model gets no figures: plain MLA ones would be too low."""
    return (
        f"{label} uses DeepSeek Sparse Attention (index_topk {index_topk}): vLLM keeps an indexer key cache "
        "beside the MLA latent in every layer and packs an fp8 MLA cache into 656-byte rows "
        f"(rule {SPARSE_MLA_RULE}), so plain MLA figures would be too low; size_offload sizes dense, MoE, MLA, "
        "sliding, chunked-local and linear-attention layouts, not this one. Read the KV cache size from vLLM's "
        "start-up log"
    )


def _mla_fields(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """MLA: the cached latent's widths and the query/key head (DeepSeek-style configs have no head_dim key,
    and hidden_size / heads means nothing here). A sparse-attention indexer is refused, not sized."""
    topk = _positive_int(cfg, "index_topk")
    if topk is not None:
        raise AdviceError("config_path", sparse_attention_refusal(name, topk))
    rope = _positive_int(cfg, "qk_rope_head_dim")
    nope = _positive_int(cfg, "qk_nope_head_dim")
    fields: dict[str, Any] = {"attention": "mla", "kv_lora_rank": _positive_int(cfg, "kv_lora_rank")}
    fields["qk_rope_head_dim"] = rope
    if rope is not None and nope is not None:
        fields["head_dim"] = nope + rope
    return fields


def _decilm_attention(cfg: dict[str, Any], layers: int, heads: int) -> tuple[int, int] | None:
    """DeciLM / Nemotron-NAS block_configs: (attention layers, KV heads), or None for another layout.

    vLLM builds attention only in blocks whose attention is not no_op, with num_attention_heads //
    n_heads_in_group KV heads each (wheel:vllm==0.33.0:vllm/model_executor/models/nemotron_nas.py:133-160;
    vllm/config/model.py:1748-1750 counts those layers; model_arch_config_convertor.py:535-542 the KV heads)."""
    blocks = cfg.get("block_configs")
    if blocks is None:
        return None
    if not isinstance(blocks, list) or len(blocks) != layers:
        raise AdviceError("config_path", f"config.json's block_configs must list one block per layer ({layers})")
    groups: list[int] = []
    for block in blocks:
        attention = block.get("attention") if isinstance(block, dict) else None
        if not isinstance(attention, dict):
            raise AdviceError("config_path", "each of config.json's block_configs needs an attention object")
        if attention.get("no_op") is True:
            continue
        group = attention.get("n_heads_in_group")
        if isinstance(group, bool) or not isinstance(group, int) or group <= 0 or heads % group:
            raise AdviceError(
                "config_path",
                "a block_configs attention block that is not no_op needs n_heads_in_group, a divisor of "
                f"num_attention_heads ({heads}): vLLM builds its attention with heads // n_heads_in_group KV heads",
            )
        groups.append(group)
    if not groups:
        raise AdviceError("config_path", "config.json's block_configs have no attention block: nothing keeps KV")
    if len(set(groups)) > 1:
        raise AdviceError(
            "config_path",
            f"config.json's attention blocks have different n_heads_in_group ({sorted(set(groups))}): vLLM gives "
            "each layer its own KV-head count, and size_offload models one for every attention layer",
        )
    return len(groups), heads // groups[0]


def architecture_from_hf_config(raw: dict[str, Any], *, name: str) -> Architecture:
    """Read the keys vLLM reads from a Hugging Face config.json (decoder part only)."""
    cfg = _with_transformers_defaults(_text_config(raw), raw)
    layers = _positive_int(cfg, "num_hidden_layers")
    heads = _positive_int(cfg, "num_attention_heads")
    if layers is None or heads is None:
        raise AdviceError("config_path", "config.json has no num_hidden_layers / num_attention_heads")
    kv_heads = _positive_int(cfg, "num_key_value_heads") or heads
    decilm = _decilm_attention(cfg, layers, heads)
    if decilm is not None:  # attention-free (no_op) blocks hold no KV: left out of num_layers
        layers, kv_heads = decilm
    head_dim = _positive_int(cfg, "head_dim")
    if head_dim is None:
        hidden = _positive_int(cfg, "hidden_size")
        if hidden is None:
            raise AdviceError("config_path", "config.json has neither head_dim nor hidden_size")
        head_dim = hidden // heads
    fields: dict[str, Any] = {
        "name": name,
        "num_layers": layers,
        "num_attention_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "default_dtype": _dtype(cfg),
        "max_position_embeddings": _positive_int(cfg, "max_position_embeddings"),
        "architecture": _architecture_name(cfg),
        "ssm_state_dtype": _declared_ssm_dtype(cfg),
        **_loading_fields(raw),
    }
    if cfg.get("kv_lora_rank"):
        fields.update(_mla_fields(cfg, name))
    if isinstance(cfg.get("quantization_config"), dict):
        method = str(cfg["quantization_config"].get("quant_method", "")).lower()
        if method in ("fp8", "mxfp4"):
            fields["weights_dtype"] = method
    mamba = _mamba2_layers(cfg, layers)
    if mamba is not None:  # Nemotron-H / Granite 4.0-H: Mamba2, attention and MLP-only blocks
        return _built({**fields, **mamba})

    short_conv = _short_conv_layers(cfg, layers)
    if short_conv is not None:  # LFM2: short-convolution layers and full attention
        return _built({**fields, **short_conv})

    if "global_head_dim" in cfg:  # Gemma 4: its global layers have their own head size and KV heads
        return _built({**fields, **_gemma4_layers(cfg, layers, kv_heads, head_dim)})

    if "hybrid_layer_pattern" in cfg:  # MiMo-V2: its sliding layers have their own heads and K/V sizes
        return _built({**fields, **_mimo_v2_layers(cfg, layers, kv_heads, head_dim)})

    layer_types = cfg.get("layer_types")
    window = _positive_int(cfg, "sliding_window")
    if cfg.get("use_sliding_window") is False:
        window = None  # Qwen2/Qwen3 ship a window value but switch it off
    if isinstance(layer_types, list) and layer_types:
        if len(layer_types) != layers:
            raise AdviceError(
                "config_path", f"layer_types lists {len(layer_types)} layers, num_hidden_layers is {layers}"
            )
        sliding = sum(1 for t in layer_types if t in ("sliding_attention", "sliding_window"))
        linear = sum(1 for t in layer_types if t in ("linear_attention", "mamba"))
        chunked = sum(1 for t in layer_types if t in ("chunked_attention", "chunked_local_attention"))
    else:
        sliding = linear = chunked = 0
        pattern = _positive_int(cfg, "sliding_window_pattern")
        interval = _positive_int(cfg, "full_attention_interval")
        if interval is not None and cfg.get("linear_num_value_heads"):
            linear = layers - layers // interval  # Qwen3-Next: every interval-th layer is full attention
        elif window is not None and pattern is not None:
            sliding = layers - layers // pattern  # Gemma 3: every pattern-th layer is global
        elif window is not None:
            sliding = layers  # Mistral 7B style: every layer slides
    if sliding:
        if window is None:
            raise AdviceError("config_path", "config.json marks sliding layers but gives no sliding_window")
        fields.update(sliding_window=window, sliding_window_layers=sliding)
    chunk = _positive_int(cfg, "attention_chunk_size")
    if chunk is not None and not chunked:
        no_rope = cfg.get("no_rope_layers")
        if isinstance(no_rope, list) and len(no_rope) == layers:
            chunked = sum(1 for flag in no_rope if flag)  # 1 = RoPE layer = chunked local in vLLM's Llama 4
        else:
            interval = _positive_int(cfg, "no_rope_layer_interval") or 4
            chunked = layers - layers // interval
    if chunked:
        fields.update(attention_chunk_size=chunk, chunked_local_layers=chunked)
    if linear:
        state = {
            "conv_kernel_dim": _positive_int(cfg, "linear_conv_kernel_dim"),
            "num_key_heads": _positive_int(cfg, "linear_num_key_heads"),
            "num_value_heads": _positive_int(cfg, "linear_num_value_heads"),
            "key_head_dim": _positive_int(cfg, "linear_key_head_dim"),
            "value_head_dim": _positive_int(cfg, "linear_value_head_dim"),
        }
        missing = [k for k, v in state.items() if v is None]
        if missing:
            raise AdviceError("config_path", f"linear-attention layers need linear_* fields; missing {missing}")
        fields.update(linear_attention_layers=linear, linear_attention=state)
    if not linear and cfg.get("linear_num_value_heads"):
        raise AdviceError(
            "config_path",
            "config.json has Gated DeltaNet sizes (linear_*) but no layer_types or full_attention_interval saying "
            "which layers use them; size_offload will not read it as all attention (many times the KV it has)",
        )
    return _built(fields)


def _short_conv_layers(cfg: dict[str, Any], layers: int) -> dict[str, Any] | None:
    """LFM2: layers whose layer_types entry is not full_attention are short convolutions, each keeping a conv
    state of conv_dim channels × (conv_L_cache − 1) per sequence and no KV
    (wheel:vllm==0.33.0:vllm/model_executor/models/lfm2.py:433-438, layers/mamba/short_conv.py:351-357)."""
    types = cfg.get("layer_types")
    if not (isinstance(types, list) and "conv" in types) and cfg.get("full_attn_idxs") is None:
        return None
    if not isinstance(types, list) or len(types) != layers:
        indexes = cfg.get("full_attn_idxs")
        if not isinstance(indexes, list):
            raise AdviceError("config_path", f"an LFM2 config.json needs layer_types listing its {layers} layers")
        types = ["full_attention" if i in indexes else "conv" for i in range(layers)]
    conv = sum(1 for t in types if t != "full_attention")
    state = {
        "conv_dim": _positive_int(cfg, "conv_dim") or _positive_int(cfg, "hidden_size"),
        "conv_kernel": _positive_int(cfg, "conv_L_cache"),
    }
    missing = [k for k, v in state.items() if v is None]
    if missing:
        raise AdviceError(
            "config_path", f"LFM2 short-convolution layers need conv_dim and conv_L_cache; missing {missing}"
        )
    return {"linear_attention_layers": conv, "short_conv": state} if conv else {}


_GEMMA4_PATTERN = 6  # transformers' Gemma4TextConfig: every 6th layer full attention when layer_types is absent


def _gemma4_layers(cfg: dict[str, Any], layers: int, kv_heads: int, head_dim: int) -> dict[str, Any]:
    """Gemma 4's layer kinds and the geometry of its full-attention layers (rule engine.per-layer-attention-
    geometry): the last layer is always full attention, the last num_kv_shared_layers keep no KV of their own,
    and the full layers take global_head_dim and, with attention_k_eq_v, num_global_key_value_heads."""
    types = cfg.get("layer_types")
    if types is None:
        types = ["sliding_attention" if (i + 1) % _GEMMA4_PATTERN else "full_attention" for i in range(layers)]
    if not isinstance(types, list) or len(types) != layers:
        raise AdviceError("config_path", f"a Gemma 4 config.json's layer_types must list its {layers} layers")
    types = [*types[:-1], "full_attention"]
    shared = cfg.get("num_kv_shared_layers") or 0
    if isinstance(shared, bool) or not isinstance(shared, int) or not 0 <= shared < layers:
        raise AdviceError("config_path", f"config.json field 'num_kv_shared_layers' must be 0 to {layers - 1}")
    own = types[: layers - shared]
    sliding = sum(1 for t in own if t == "sliding_attention")
    window = _positive_int(cfg, "sliding_window")
    if sliding and window is None:
        raise AdviceError("config_path", "config.json marks sliding layers but gives no sliding_window")
    if window is not None and cfg.get("use_bidirectional_attention") == "all":
        window = window // 2 + 1  # transformers halves the window of a bidirectional Gemma 4
    full_head = _positive_int(cfg, "global_head_dim") or head_dim
    global_kv = _positive_int(cfg, "num_global_key_value_heads") if cfg.get("attention_k_eq_v") is True else None
    full_kv = global_kv or kv_heads
    return {
        "num_layers": len(own),
        "sliding_window": window if sliding else None,
        "sliding_window_layers": sliding,
        "full_attention_head_dim": full_head if full_head != head_dim else None,
        "full_attention_kv_heads": full_kv if full_kv != kv_heads else None,
    }


def _mimo_v2_layers(cfg: dict[str, Any], layers: int, kv_heads: int, head_dim: int) -> dict[str, Any]:
    """MiMo-V2's layer kinds and their geometry (rule engine.per-layer-attention-geometry): hybrid_layer_pattern 1
    is a sliding-window layer with swa_num_key_value_heads, swa_head_dim and swa_v_head_dim, 0 a full-attention
    layer with num_key_value_heads, head_dim and v_head_dim (wheel:vllm==0.33.0:vllm/model_executor/models/
    mimo_v2.py:403-438); vLLM reports num_key_value_heads as the model's."""
    pattern = cfg.get("hybrid_layer_pattern")
    if not isinstance(pattern, list) or len(pattern) != layers or any(p not in (0, 1) for p in pattern):
        raise AdviceError("config_path", f"config.json's hybrid_layer_pattern must list 0 or 1 for its {layers} layers")
    sliding = sum(pattern)
    window = _positive_int(cfg, "sliding_window_size") or _positive_int(cfg, "sliding_window")
    if sliding and window is None:
        raise AdviceError("config_path", "config.json marks sliding layers but gives no sliding_window_size")
    swa_kv = _positive_int(cfg, "swa_num_key_value_heads") or kv_heads
    swa_head = _positive_int(cfg, "swa_head_dim") or head_dim
    v_head = _positive_int(cfg, "v_head_dim") or head_dim
    if (_positive_int(cfg, "swa_v_head_dim") or swa_head) != v_head or swa_head != head_dim:
        raise AdviceError(
            "config_path",
            "a MiMo-V2 config.json whose sliding layers' K or V head size differs from the full layers' is not "
            "modelled (size_offload keeps one K and one V head size); its figures would be wrong, so it gives none",
        )
    return {
        "num_kv_heads": swa_kv,
        "head_dim": head_dim,
        "sliding_window": window if sliding else None,
        "sliding_window_layers": sliding,
        "full_attention_kv_heads": kv_heads if kv_heads != swa_kv else None,
        "v_head_dim": v_head if v_head != head_dim else None,
        "reported_kv_heads": kv_heads if kv_heads != swa_kv else None,
    }


def _built(fields: dict[str, Any]) -> Architecture:
    try:
        return Architecture(**fields)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        raise AdviceError(
            "config_path", f"config.json does not describe a decoder vLLM can size: {first['msg']}"
        ) from None


# ---------------------------------------------------------------------------- Mamba2 hybrids and state dtypes


def _loading_fields(raw: dict[str, Any]) -> dict[str, Any]:
    """The top-level model_type and whether auto_map names a remote config class or model class."""
    model_type = raw.get("model_type")
    auto_map = raw.get("auto_map")
    keys = [k for k in auto_map if isinstance(k, str)] if isinstance(auto_map, dict) else []
    return {
        "model_type": model_type if isinstance(model_type, str) and 0 < len(model_type) <= 200 else None,
        "remote_config": any(k.startswith("AutoConfig") for k in keys),
        "remote_model": any(k.startswith("AutoModel") for k in keys),
    }


def _architecture_name(cfg: dict[str, Any]) -> str | None:
    """architectures[0]: the model class vLLM builds, which picks its per-model config hooks."""
    names = cfg.get("architectures")
    if isinstance(names, list) and names and isinstance(names[0], str) and 0 < len(names[0]) <= 200:
        return names[0]
    return None


_SSM_DTYPES: tuple[SsmStateDType, ...] = ("bfloat16", "float16", "float32")


def _declared_ssm_dtype(cfg: dict[str, Any]) -> SsmStateDType | None:
    """The recurrent-state dtype the config declares: Qwen3.5's mamba_ssm_dtype or Nemotron-H's
    mamba_ssm_cache_dtype (vLLM's config hooks read them: rules engine.qwen3_5-ssm-dtype and
    engine.nemotron-h-ssm-dtype); None when it declares none or 'auto'."""
    for key in ("mamba_ssm_dtype", "mamba_ssm_cache_dtype"):
        value = cfg.get(key)
        if value is None or value == "auto":
            continue
        for dtype in _SSM_DTYPES:
            if value == dtype:
                return dtype
        raise AdviceError("config_path", f"config.json field {key!r} must be float32, bfloat16, float16 or auto")
    return None


# A config with any of these keys has Mamba2 layers (Nemotron-H / Granite 4.0-H spellings).
_MAMBA2_KEYS = ("mamba_num_heads", "mamba_n_heads", "ssm_state_size", "mamba_d_state")
# Nemotron-H's hybrid_override_pattern, one character a block (vLLM nemotron_h.py ALL_DECODER_LAYER_TYPES).
_PATTERN_KINDS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
# layer_types / layers_block_type: Granite 4.0-H's (mamba, attention), transformers' current names
# (linear_attention, full_attention) and Nemotron-H's MLP-only blocks (mlp, moe).
_LAYER_TYPE_KINDS = {
    "mamba": "mamba",
    "linear_attention": "mamba",
    "attention": "attention",
    "full_attention": "attention",
    "mlp": "mlp",
    "moe": "moe",
}


def _mamba2_layers(cfg: dict[str, Any], layers: int) -> dict[str, Any] | None:
    """The layer counts and state of a Mamba2 hybrid; None when the config has no Mamba2 fields. MLP and MoE
    blocks hold neither KV nor state: they are left out of num_layers."""
    if not any(key in cfg for key in _MAMBA2_KEYS) or cfg.get("linear_num_value_heads"):
        return None
    kinds = _mamba2_layer_kinds(cfg, layers)
    mamba, attention = kinds.count("mamba"), kinds.count("attention")
    if not attention:
        raise AdviceError(
            "config_path",
            "config.json has Mamba2 layers and no attention layer: size_offload sizes attention + Mamba2 hybrids, "
            "not pure state-space models",
        )
    if not mamba:
        return {"num_layers": attention}
    return {"num_layers": mamba + attention, "linear_attention_layers": mamba, "mamba2": _mamba2_state(cfg)}


def _mamba2_layer_kinds(cfg: dict[str, Any], layers: int) -> list[str]:
    pattern = cfg.get("hybrid_override_pattern")
    if pattern is not None:
        key = "hybrid_override_pattern"
        if not isinstance(pattern, str) or not pattern or any(c not in _PATTERN_KINDS for c in pattern):
            raise AdviceError(
                "config_path", f"config.json field {key!r} takes M (Mamba2), * (attention), - (MLP) and E (MoE) only"
            )
        kinds = [_PATTERN_KINDS[c] for c in pattern]
    else:
        key = "layer_types" if "layer_types" in cfg else "layers_block_type"
        types = cfg.get(key)
        if not isinstance(types, list) or not types:
            raise AdviceError(
                "config_path",
                "config.json has Mamba2 sizes but no hybrid_override_pattern or layer_types saying which layers are "
                "Mamba2; size_offload will not read it as all attention (many times the KV it has)",
            )
        if any(not isinstance(t, str) or t not in _LAYER_TYPE_KINDS for t in types):
            raise AdviceError(
                "config_path",
                f"config.json field {key!r} of a Mamba2 hybrid takes mamba / linear_attention, attention / "
                "full_attention, mlp and moe only",
            )
        kinds = [_LAYER_TYPE_KINDS[t] for t in types]
    if len(kinds) != layers:
        raise AdviceError("config_path", f"{key} lists {len(kinds)} layers, num_hidden_layers is {layers}")
    return kinds


# Each Mamba2State field and the config keys it is read from: Nemotron-H's (n_groups / conv_kernel, or the older
# mamba_n_groups / mamba_d_conv transformers still takes), and Granite 4.0-H's.
_NEMOTRON_H_KEYS = {
    "mamba_num_heads": ("mamba_num_heads",),
    "mamba_head_dim": ("mamba_head_dim",),
    "n_groups": ("n_groups", "mamba_n_groups"),
    "ssm_state_size": ("ssm_state_size",),
    "conv_kernel": ("conv_kernel", "mamba_d_conv"),
}
_GRANITE_KEYS = {
    "mamba_num_heads": ("mamba_n_heads",),
    "n_groups": ("mamba_n_groups",),
    "ssm_state_size": ("mamba_d_state",),
    "conv_kernel": ("mamba_d_conv",),
}


def _mamba2_state(cfg: dict[str, Any]) -> dict[str, int | None]:
    """The state sizes as vLLM's models pass them to MambaMixer2 (nemotron_h.py and granitemoehybrid.py
    get_mamba_state_shape_from_config)."""
    granite = "mamba_n_heads" in cfg
    keys = _GRANITE_KEYS if granite else _NEMOTRON_H_KEYS
    state: dict[str, int | None] = {
        field: next((v for key in names if (v := _positive_int(cfg, key)) is not None), None)
        for field, names in keys.items()
    }
    if granite:
        state["mamba_head_dim"] = _granite_head_dim(cfg, state["mamba_num_heads"])
        keys = {**keys, "mamba_head_dim": ("mamba_d_head",)}
    missing = [keys[field][0] for field, value in state.items() if value is None]
    if missing:
        raise AdviceError("config_path", f"Mamba2 layers need their state sizes; missing {missing}")
    return state


def _granite_head_dim(cfg: dict[str, Any], heads: int | None) -> int | None:
    """mamba_d_head, 'auto' meaning mamba_expand × hidden_size / mamba_n_heads as transformers derives it; vLLM
    sizes the conv state from mamba_expand × hidden_size, which must equal heads × head dim."""
    expand, hidden = _positive_int(cfg, "mamba_expand"), _positive_int(cfg, "hidden_size")
    inner = expand * hidden if expand is not None and hidden is not None else None
    if cfg.get("mamba_d_head") == "auto":
        return inner // heads if inner is not None and heads is not None else None
    head_dim = _positive_int(cfg, "mamba_d_head")
    if inner is not None and heads is not None and head_dim is not None and heads * head_dim != inner:
        raise AdviceError(
            "config_path", "config.json's mamba_n_heads × mamba_d_head must equal mamba_expand × hidden_size"
        )
    return head_dim


class _ConfigPathPolicy:
    """Which config.json files a `config_path` may name: any (a local CLI or stdio server reads for the
    user who started it), or only those under one directory (a shared server), or none."""

    restricted = False
    root: Path | None = None


_policy = _ConfigPathPolicy()


def restrict_config_paths(root: Path | None) -> None:
    """From now on, read config.json files only under ``root`` (resolved), or none at all if None."""
    _policy.restricted = True
    _policy.root = root.resolve() if root is not None else None


def read_hf_config(path_text: str) -> Architecture:
    """Load a config.json (or a directory holding one) from the local disk."""
    path = _config_file(path_text)
    raw = _read_json_object(path, path_text)
    name = raw.get("_name_or_path")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_LENGTH:
        given = Path(path_text)
        name = (given.parent.name if given.name == "config.json" else given.name)[:MAX_NAME_LENGTH] or "local config"
    return architecture_from_hf_config(raw, name=name)


MAX_NAME_LENGTH = 200  # Architecture.name
_SHOWN_PATH_LENGTH = 120


def _shown(path_text: str) -> str:
    """The caller's path for a message: as given, shortened, and never spanning lines."""
    short = path_text if len(path_text) <= _SHOWN_PATH_LENGTH else path_text[:_SHOWN_PATH_LENGTH] + "..."
    return repr(short)


def _config_file(path_text: str) -> Path:
    """The file ``path_text`` names, decided by the access policy before any file system lookup.

    A server that reads no files looks nothing up; one restricted to a directory looks up nothing
    outside it and expands no '~' (the name of a home on the server's host means nothing to its
    callers). Every failure is an AdviceError, never an OSError or RuntimeError.
    """
    if _policy.restricted and _policy.root is None:
        raise AdviceError(
            "config_path",
            "this shared server reads no files; give the model's name in `model` or its layout in `architecture`",
        )
    if "\x00" in path_text:
        raise AdviceError("config_path", "a path cannot contain a NUL character")
    try:
        if _policy.root is not None:
            return _under_root(path_text, _policy.root)
        path = _expand_home(path_text)
        return path / "config.json" if path.is_dir() else path
    except OSError as exc:  # a name too long, a component that is not a directory, no permission
        raise AdviceError("config_path", f"cannot read {_shown(path_text)}: {_reason(exc)}") from None


def _expand_home(path_text: str) -> Path:
    try:
        return Path(path_text).expanduser()
    except RuntimeError:  # '~user' for a user this host does not have, or '~' with no home known
        user = path_text.split("/", 1)[0][1:]
        whose = f"user {user!r}" if user else "the user running this"
        raise AdviceError("config_path", f"{_shown(path_text)}: no home directory is known for {whose}") from None


def _under_root(path_text: str, root: Path) -> Path:
    """``path_text`` (relative to ``root``, or absolute) with symlinks and '..' resolved, if it stays under root."""
    resolved = _inside(root / path_text, path_text, root)
    if resolved.is_dir():
        resolved = _inside(resolved / "config.json", path_text, root)  # config.json may itself be a link
    return resolved


def _inside(path: Path, path_text: str, root: Path) -> Path:
    try:
        resolved = path.resolve()
    except (RuntimeError, OSError):  # a symlink loop (RuntimeError before Python 3.13)
        raise AdviceError("config_path", f"{_shown(path_text)} leads into a loop of symbolic links") from None
    if not resolved.is_relative_to(root):
        # The directory itself stays unnamed: it tells a caller about the server's host.
        raise AdviceError(
            "config_path", f"{_shown(path_text)} is outside the directory this server reads config files from"
        )
    return resolved


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__  # not str(exc): that repeats the resolved path


def _read_json_object(path: Path, path_text: str) -> dict[str, Any]:
    """The JSON object in the regular file ``path``, read with a bound.

    Opened without blocking and checked on the open file: a FIFO, /dev/zero or a huge file can
    neither hang the call nor fill memory, and nothing can be swapped in between check and read.
    On a restricted server the resolved path is opened without following a final symlink.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
    if _policy.restricted:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise AdviceError("config_path", f"no config.json at {_shown(path_text)}") from None
    except OSError as exc:
        raise AdviceError("config_path", f"cannot read {_shown(path_text)}: {_reason(exc)}") from None
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            raise AdviceError(
                "config_path", f"{_shown(path_text)} is not a regular file or a directory holding config.json"
            )
        try:
            data = stream.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            raise AdviceError("config_path", f"cannot read {_shown(path_text)}: {_reason(exc)}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise AdviceError("config_path", f"{_shown(path_text)} is larger than {MAX_CONFIG_BYTES // 2**20} MiB")
    raw = _parse_json(data, path_text)
    if not isinstance(raw, dict):
        raise AdviceError("config_path", "config.json must hold a JSON object")
    return raw


def _parse_json(data: bytes, path_text: str) -> Any:
    """The parsed JSON; the reasons it is not say where, never what the file holds."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        reason = "it is not UTF-8 text"
    except json.JSONDecodeError as exc:
        reason = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except RecursionError:
        reason = "it nests arrays or objects too deeply"
    except ValueError:  # an integer literal longer than Python converts
        reason = "it holds a number too long to read"
    raise AdviceError("config_path", f"cannot read {_shown(path_text)} as JSON: {reason}")
