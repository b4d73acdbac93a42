"""The text an agent reads carries every caveat the structured answer carries.

An agent reads the text summary; the caveats (an ESTIMATE of the weights or the prefill rate, an
ASSUMED network rate, the SGLang conversion as REFERENCE ONLY) were only in the structured
content, so the summary gave those numbers plainly. For a spread of calls of every tool, each
clause of the structured answer that names an estimate, an assumption or an unchecked reference
must appear in the summary.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from vllm_caching_mcp.advice.sizing import _CAVEAT_WORDS, _caveats
from vllm_caching_mcp.tools import run_tool

SIZING = {"model": "llama-3.1-70b", "gpu": "H100", "tensor_parallel_size": 8, "host_ram_gib": 2048}
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("size_offload", {**SIZING, "version": "0.22.1"}),
    ("size_offload", {**SIZING, "version": "0.33.0", "sglang_hicache_size_gb": 100}),
    ("size_offload", {**SIZING, "version": "0.33.0", "weights_gib_per_gpu": 17.5, "prefill_tokens_per_s": 2e4}),
    ("size_offload", {"model": "deepseek-v3", "gpu": "B200", "tensor_parallel_size": 8, "host_ram_gib": 1024}),
    ("size_offload", {"model": "qwen3-32b", "gpu": "H100", "tensor_parallel_size": 2, "nvme_drives_per_node": 4}),
    ("check_version", {"name": "--kv-offloading-size", "version": "0.22.1"}),
    ("choose_backend", {"version": "0.22.1", "tiers": ["cpu", "nvme"]}),
    (
        "render_config",
        {"backend": "native_cpu", "model": "m", "version": "0.22.1", "sizes": {"kv_offloading_size_gib": 64}},
    ),
    ("review_deployment", {"documents": [{"name": "s.sh", "text": "vllm serve m --kv-offloading-size 64"}]}),
    ("diagnose", {"symptoms": ["ttft_high"], "version": "0.33.0"}),
    ("check_bug_status", {"offline": True}),
    ("check_advisories", {"offline": True, "version": "0.22.1"}),
    ("inspect_image", {"image": "v0.22.1", "offline": True}),
]


def strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


@pytest.mark.parametrize(("tool", "arguments"), CALLS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(CALLS)])
def test_every_caveat_of_the_structured_answer_is_in_the_text(tool: str, arguments: dict[str, Any]) -> None:
    result = run_tool(tool, arguments)
    summary = result.summary()
    missing = [
        clause
        for text in strings(result.model_dump(mode="json"))
        if _CAVEAT_WORDS.search(text)
        for clause in _caveats(text)
        if clause not in summary
    ]
    assert not missing, missing


def test_the_clauses_are_the_parenthesised_ones_that_name_a_caveat() -> None:
    text = "74 GiB × 0.9 (the default) − weights 16 GiB (weights an ESTIMATE: 70B × 2 B (bf16)) − 4 GiB (an ESTIMATE)"
    assert _caveats(text) == ["weights an ESTIMATE: 70B × 2 B (bf16)", "an ESTIMATE"]
    assert _caveats("REFERENCE ONLY: not checked") == ["REFERENCE ONLY: not checked"]
    assert _caveats("nothing to say (plain)") == []
    assert re.search(_CAVEAT_WORDS, "an ASSUMED rate")
