"""size_offload's steps for Mamba2 hybrids (Nemotron-H, Granite 4.0-H) and Qwen3.5 (issue 14).

Each expected figure is derived by hand from vLLM 0.33.0's MambaStateShapeCalculator.mamba2_state_shape /
gated_delta_net_state_shape and MambaStateDtypeCalculator (vllm/model_executor/layers/mamba/mamba_utils.py),
the config hooks that set the SSM state dtype (vllm/model_executor/models/config.py) and MambaMixer2's
checkpoint block; tests/test_engine_golden.py checks the same figures against the engine's own run.
"""

from __future__ import annotations

from typing import Any

import pytest

from conftest import size_offload_of as ask
from conftest import sizing_model as model_of
from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.advice.model_config import Architecture, from_knowledge
from vllm_caching_mcp.advice.sizing import (
    SizeOffloadRequest,
    SizeOffloadResult,
    _layer_specs,
    _mamba_layout,
    _Parallel,
    _ssm_state_dtype,
    _Trail,
    known_models_text,
)
from vllm_caching_mcp.knowledge import Knowledge
from vllm_caching_mcp.versions import Version

GIB = 1 << 30


def state_bytes(result: SizeOffloadResult) -> int:
    linear = next(k for k in result.layer_kinds if k.kind == "linear_attention")
    assert linear.state_bytes_per_sequence_per_rank is not None
    return linear.state_bytes_per_sequence_per_rank


def granite_like(**changes: Any) -> dict[str, Any]:
    """A typed-in Granite 4.0-H style layout: 48 Mamba2 heads of 64, a single group, no SSM dtype hook."""
    arch: dict[str, Any] = {
        "name": "granite-like",
        "architecture": "GraniteMoeHybridForCausalLM",
        "num_layers": 8,
        "num_attention_heads": 12,
        "num_kv_heads": 4,
        "head_dim": 128,
        "linear_attention_layers": 6,
        "mamba2": {"mamba_num_heads": 48, "mamba_head_dim": 64, "n_groups": 1, "ssm_state_size": 128, "conv_kernel": 4},
        "params_total_b": 1.0,
        "max_position_embeddings": 131072,
    }
    arch.update(changes)
    return arch


def test_nemotron_h_state_is_the_mamba2_conv_and_float32_ssm_state(knowledge: Knowledge) -> None:
    # TP 1: conv (128·64 + 2·8·128) × (4 − 1) × 2 B = 61,440; SSM 128 × 64 × 128 × 4 B (float32) = 4,194,304.
    assert state_bytes(ask(knowledge, model="nemotron-h-8b")) == 61_440 + 4_194_304
    # TP 8: conv 10,240 / 8 × 3 × 2 B = 7,680; SSM 16 × 64 × 128 × 4 B = 524,288.
    assert state_bytes(ask(knowledge, model="nemotron-h-8b", tensor_parallel_size=8)) == 7_680 + 524_288


def test_a_single_mamba2_group_is_replicated_up_to_tp(knowledge: Knowledge) -> None:
    # TP 1: conv (48·64 + 2·1·128) × 3 × 2 B = 19,968; SSM 48 × 64 × 128 × 2 B (bfloat16: no hook) = 786,432.
    assert state_bytes(ask(knowledge, architecture=granite_like())) == 19_968 + 786_432
    # TP 4: the one group becomes 4 (one per rank): conv (3,072 + 2·4·128) / 4 × 3 × 2 B = 6,144; SSM 12·64·128·2 B.
    assert state_bytes(ask(knowledge, architecture=granite_like(), tensor_parallel_size=4)) == 6_144 + 196_608


# 0.19.1: recorded float32, the class default of transformers' NemotronHConfig that the hook's getattr finds.
NEMOTRON_H_SSM_DTYPES = {
    "0.12.0": "bfloat16", "0.13.0": "float16", "0.19.0": "float16", "0.19.1": "float32", "0.20.0": "float32"
}  # fmt: skip


@pytest.mark.parametrize(("version", "dtype"), [*NEMOTRON_H_SSM_DTYPES.items(), ("0.33.0", "float32")])
def test_nemotron_h_ssm_dtype_is_the_hooks_default_of_the_release(
    knowledge: Knowledge, version: str, dtype: str
) -> None:
    # No hook before 0.13.0 (the model dtype); the hook's default float16 (read from the code) until the
    # recorded 0.19.1, float32 from it.
    arch = model_of(knowledge, "nemotron-h-8b").arch
    assert _ssm_state_dtype(arch, Version(version), _Trail(knowledge)) == dtype


def test_an_ssm_dtype_the_config_declares_wins_over_the_hooks_default(knowledge: Knowledge) -> None:
    arch = model_of(knowledge, "nemotron-h-8b").arch.model_copy(update={"ssm_state_dtype": "float16"})
    assert _ssm_state_dtype(arch, Version("0.33.0"), _Trail(knowledge)) == "float16"


def test_qwen3_5_float32_recurrent_state_doubles_the_gated_deltanet_state(knowledge: Knowledge) -> None:
    # conv (2·16·128 + 32·128) × 3 × 2 B = 49,152; recurrent 32 × 128 × 128 × 4 B (mamba_ssm_dtype float32).
    result = ask(knowledge, model="qwen3.5-35b-a3b")
    assert state_bytes(result) == 49_152 + 2_097_152
    assert any(c.id == "engine.qwen3_5-ssm-dtype" for c in result.citations)
    # Qwen3-Next, the same layout without the hook: both states in bfloat16 (1,097,728 B), as before.
    assert state_bytes(ask(knowledge, model="qwen3-next-80b-a3b")) == 49_152 + 1_048_576


def test_a_declared_ssm_dtype_vllm_does_not_read_is_named_not_applied(knowledge: Knowledge) -> None:
    # 0.16.0 has no Qwen3.5 hook (Qwen3.5 arrived in 0.17.0): the state stays bfloat16 and the answer says why.
    result = ask(knowledge, model="qwen3.5-35b-a3b", version="0.16.0", enable_prefix_caching=False)
    assert state_bytes(result) == 49_152 + 1_048_576
    assert any("--mamba-ssm-cache-dtype float32" in w for w in result.warnings)
    # Qwen3-Next has no such hook in any release: a float32 declared for it is not what vLLM keeps.
    qwen3_5 = from_knowledge(next(m for m in knowledge.models if m.id == "model.qwen3.5-35b-a3b"))
    trail = _Trail(knowledge)
    other = qwen3_5.model_copy(update={"architecture": "Qwen3NextForCausalLM"})
    assert _ssm_state_dtype(other, Version("0.33.0"), trail) == "bfloat16"
    assert any("not Qwen3NextForCausalLM" in w for w in trail.warnings)


def test_a_typed_in_layout_keeps_the_ssm_dtype_it_gives(knowledge: Knowledge) -> None:
    typed = Architecture.model_validate(granite_like(architecture=None, ssm_state_dtype="float32"))
    assert _ssm_state_dtype(typed, Version("0.33.0"), _Trail(knowledge)) == "float32"
    # 48 × 64 × 128 SSM state in float32: 1,572,864 B, with the 19,968 B bfloat16 conv state.
    result = ask(knowledge, architecture=granite_like(architecture=None, ssm_state_dtype="float32"))
    assert state_bytes(result) == 19_968 + 1_572_864


@pytest.mark.parametrize("gpu", ["h100-sxm", "a100-80gb-sxm"])
def test_mamba2_align_mode_holds_a_checkpoint_block_on_any_gpu_and_adds_no_alignment(
    knowledge: Knowledge, gpu: str
) -> None:
    request = SizeOffloadRequest.model_validate({"model": "nemotron-h-8b"})
    layout = _mamba_layout(request, model_of(knowledge, "nemotron-h-8b", gpu), _Trail(knowledge))
    assert (layout.mode, layout.state_blocks, layout.checkpoint_alignment) == ("align", 3, 1)


@pytest.mark.parametrize(("prefix_caching", "blocks"), [(None, 8 + 6 * 3), (False, 8 + 6 * 1)])
def test_nemotron_h_blocks_per_request(knowledge: Knowledge, prefix_caching: bool | None, blocks: int) -> None:
    # block = 16 × cdiv(4,255,744 B, 16 × 4,096 B) = 1,040 tokens; 24 Mamba2 and 4 attention layers: group size
    # 4, so 6 Mamba2 groups and 1 attention group. At 8,192 tokens: cdiv(8,192, 1,040) = 8 attention blocks and
    # 3 state blocks per Mamba2 group in 'align' mode (prefix caching on: 0.33.0's default), 1 in 'none'.
    fields = {"model": "nemotron-h-8b"} | ({} if prefix_caching is None else {"enable_prefix_caching": False})
    request = SizeOffloadRequest.model_validate(fields)
    layout = _Parallel(tp=1, pp=1, dp=1, gpus_per_node=8)
    specs = _layer_specs(request, model_of(knowledge, "nemotron-h-8b"), layout, _Trail(knowledge))
    assert (specs.block, specs.group_size) == (1040, 4)
    assert specs.blocks_per_session(8192) == blocks


def test_mamba2_tp_must_divide_the_heads_and_the_groups(knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"Mamba2 groups \(8\) divisible by TP \(16\), or a single group"):
        ask(knowledge, model="nemotron-h-8b", tensor_parallel_size=16)
    heads = granite_like(
        mamba2={"mamba_num_heads": 40, "mamba_head_dim": 64, "n_groups": 1, "ssm_state_size": 128, "conv_kernel": 4}
    )
    with pytest.raises(AdviceError, match=r"Mamba2 heads \(40\) divisible by TP \(12\)"):
        ask(knowledge, architecture=heads, tensor_parallel_size=12)


def test_native_offload_of_a_mamba2_hybrid_without_prefix_caching_is_an_error(knowledge: Knowledge) -> None:
    result = ask(knowledge, model="nemotron-h-8b", enable_prefix_caching=False, kv_offloading_size_gib=64)
    assert any(w.startswith("ERROR:") and "prefix caching" in w for w in result.warnings)
    on = ask(knowledge, model="nemotron-h-8b", kv_offloading_size_gib=64)
    assert not any(w.startswith("ERROR:") for w in on.warnings)


def test_an_architecture_needs_one_kind_of_linear_state() -> None:
    both = granite_like(
        linear_attention={
            "conv_kernel_dim": 4,
            "num_key_heads": 16,
            "num_value_heads": 32,
            "key_head_dim": 128,
            "value_head_dim": 128,
        }
    )
    with pytest.raises(ValueError, match="one of linear_attention"):
        Architecture.model_validate(both)
    with pytest.raises(ValueError, match="one of linear_attention"):
        Architecture.model_validate({**granite_like(), "mamba2": None})


def test_the_models_listing_names_mamba2_layers(knowledge: Knowledge) -> None:
    row = next(line for line in known_models_text(knowledge).splitlines() if line.startswith("nemotron-h-8b "))
    assert "GQA + 24 Mamba2" in row


def test_a_context_length_from_the_checkpoint_is_used_and_a_class_default_one_is_flagged(knowledge: Knowledge) -> None:
    # Qwen3.5-35B-A3B's checkpoint says 262,144 (transformers' class default is 32,768); the layout values that
    # are still class defaults are listed, the context length is not among them (issue 28).
    entry = next(m for m in knowledge.models if m.id == "model.qwen3.5-35b-a3b")
    assert entry.max_position_embeddings == 262_144 and "max_position_embeddings" not in entry.class_defaults
    warned = [w for w in ask(knowledge, model="qwen3.5-35b-a3b").warnings if "config class's default" in w]
    assert warned == []
    defaulted = entry.model_copy(update={"class_defaults": (*entry.class_defaults, "max_position_embeddings")})
    flagged = knowledge.model_copy(update={"models": tuple(defaulted if m is entry else m for m in knowledge.models)})
    flagged.__dict__.pop("_model_index", None)  # the copy carries the original's index by name
    warned = [w for w in ask(flagged, model="qwen3.5-35b-a3b").warnings if "config class's default" in w]
    assert warned == [
        "Qwen3.5 35B-A3B's max_position_embeddings 262,144 is its config class's default, not read from the "
        "published checkpoint: give max_model_len for the length you serve."
    ]
    assert not [w for w in ask(flagged, model="qwen3.5-35b-a3b", max_model_len=8192).warnings if "class's" in w]


def test_class_defaults_name_layout_values_only() -> None:
    from pydantic import ValidationError

    from vllm_caching_mcp.knowledge import ModelArch

    with pytest.raises(ValidationError, match="class_defaults: hf_repo is not a layout value"):
        ModelArch.model_validate(
            {
                "id": "model.x",
                "name": "X",
                "hf_repo": "o/x",
                "architecture": "LlamaForCausalLM",
                "num_layers": 2,
                "num_attention_heads": 2,
                "num_kv_heads": 2,
                "head_dim": 64,
                "params_total_b": 1.0,
                "params_active_b": 1.0,
                "max_position_embeddings": 4096,
                "class_defaults": ["hf_repo"],
                "sources": ["https://example.org/x"],
                "verified_at": "2026-12-02",
            }
        )
