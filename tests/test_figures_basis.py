"""How sure the KV figures are (issue 27): verified against the engine, or the generic reader's estimate.

The rule engine.recorded-architectures names the model classes the golden files recorded at each release;
it is kept equal to them here, so an answer can only call its figures verified where CI compares them
with vLLM's own planner.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import REPO, size_offload_of
from vllm_caching_mcp.advice import sizing
from vllm_caching_mcp.knowledge import Knowledge
from vllm_caching_mcp.versions import Version

GOLDEN = REPO / "tests" / "data" / "engine"
CONFIGS = GOLDEN / "configs"


def _golden(version: str) -> list[dict[str, Any]]:
    """The matrix's cells at the release, and those recorded for models outside it (configs-RELEASE.json)."""
    cells: list[dict[str, Any]] = json.loads((GOLDEN / f"golden-{version}.json").read_text())["cells"]
    beyond = GOLDEN / f"configs-{version}.json"
    if beyond.is_file():
        cells += json.loads(beyond.read_text())["cells"]
    return cells


@pytest.mark.parametrize("version", ["0.20.2", "0.22.1", "0.33.0", "0.34.0"])
def test_the_rule_names_exactly_the_architectures_the_golden_files_recorded(knowledge: Knowledge, version: str) -> None:
    recorded = {
        json.loads((REPO / str(c["inputs"]["config"])).read_text())["architectures"][0] for c in _golden(version)
    }
    found = knowledge.engine.rule("engine.recorded-architectures").value_at(Version(version))
    assert found is not None and isinstance(found.value, tuple) and set(found.value) == recorded
    gpus = {c["inputs"]["gpu"]["knowledge_id"] for c in _golden(version)}
    tps = {c["inputs"]["tensor_parallel_size"] for c in _golden(version)}
    assert gpus == set(sizing._RECORDED_GPUS) and set(sizing._RECORDED_TP) <= tps


def test_a_recorded_architecture_is_verified(knowledge: Knowledge) -> None:
    answer = size_offload_of(knowledge, model="llama-3.1-8b", weights_gib_per_gpu=16)
    assert answer.kv_figures_basis == "verified against the engine for LlamaForCausalLM at 0.33.0"
    assert "KV figures: verified against the engine for LlamaForCausalLM at 0.33.0" in answer.summary()
    assert any(c.id == "engine.recorded-architectures" for c in answer.citations)


def test_a_layout_outside_the_recorded_cells_says_so(knowledge: Knowledge) -> None:
    answer = size_offload_of(knowledge, model="llama-3.1-70b", tensor_parallel_size=4, weights_gib_per_gpu=36)
    assert "not itself a recorded cell" in answer.kv_figures_basis


def test_a_release_without_recordings_is_an_estimate(knowledge: Knowledge) -> None:
    answer = size_offload_of(knowledge, model="llama-3.1-8b", weights_gib_per_gpu=16, version="0.30.0")
    assert answer.kv_figures_basis.startswith("estimate from the generic reader (LlamaForCausalLM has no engine ")
    assert "not modelled:" in answer.kv_figures_basis


def test_an_unrecorded_model_class_is_an_estimate(knowledge: Knowledge) -> None:
    answer = size_offload_of(
        knowledge,
        config_path=str(CONFIGS / "llama-3.3-nemotron-super-49b"),
        tensor_parallel_size=2,
        weights_gib_per_gpu=48,
    )
    assert "DeciLMForCausalLM has no engine recording at 0.33.0" in answer.kv_figures_basis
    assert "KV figures: estimate from the generic reader" in answer.summary()


def test_a_typed_in_layout_is_an_estimate(knowledge: Knowledge) -> None:
    typed = {"num_layers": 32, "num_attention_heads": 32, "num_kv_heads": 8, "head_dim": 128}
    answer = size_offload_of(knowledge, architecture=typed, weights_gib_per_gpu=16, max_model_len=8192)
    assert "no model class is named" in answer.kv_figures_basis
