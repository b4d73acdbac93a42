"""The tools agree with each other: what size_offload and render_config produce, review_deployment passes.

An operator following the advice end to end — choose, size, render, review — must not be told by
the last step that the first ones were wrong.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest

from reading import known_moving_tag, review
from vllm_caching_mcp.advice.backend import ChooseBackendResult
from vllm_caching_mcp.advice.render import RenderConfigResult
from vllm_caching_mcp.advice.sizing import SizeOffloadResult
from vllm_caching_mcp.knowledge import Backend
from vllm_caching_mcp.tools import ToolInputError, run_tool

# Every backend render_config knows, straight from the knowledge's type ("none" renders nothing).
BACKENDS = [b for b in typing.get_args(Backend) if b != "none"]


def render(**arguments: Any) -> RenderConfigResult:
    result = run_tool("render_config", arguments)
    assert isinstance(result, RenderConfigResult)
    return result


def files_of(rendered: RenderConfigResult) -> list[tuple[str, str]]:
    return [(f.name, f.content) for f in rendered.files]


@pytest.mark.parametrize("version", ["0.20.2", "0.22.1", "0.26.0", "0.33.0"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("output", ["vllm_serve", "docker_run", "kubernetes"])
def test_every_rendered_config_passes_review(version: str, backend: str, output: str) -> None:
    arguments: dict[str, Any] = {
        "backend": backend,
        "version": version,
        "model": "Qwen/Qwen3-32B",
        "parallelism": {"tensor_parallel_size": 4},
        "sizes": {"kv_offloading_size_gib": 400},
        "format": output,
    }
    if backend == "native_tiering":
        arguments["paths"] = {"disk": ["/mnt/nvme0/kv"]}
    try:
        rendered = render(**arguments)
    except ToolInputError as exc:
        # A backend the release lacks is refused with the release that brings it, never rendered.
        assert backend == "native_tiering" and "first ships in" in str(exc)
        return
    findings = review(*files_of(rendered), version=version, host={"ram_gib": 1024, "gpu": "H100"}).findings
    # Security advisories are about the release, not the rendered configuration (render warns of them itself).
    findings = [f for f in findings if not f.rule_id.startswith("advisory.")]
    assert [(f.rule_id, f.message) for f in findings if f.severity != "info" and not known_moving_tag(f)] == []


def test_size_then_render_then_review_on_an_8xh200_node() -> None:
    sized = run_tool(
        "size_offload",
        {
            "model": "llama-3.1-70b",
            "version": "0.33.0",
            "tensor_parallel_size": 8,
            "gpu": "h200",
            "max_model_len": 131072,
            "typical_context_tokens": 32768,
            "host_ram_gib": 2048,
        },
    )
    assert isinstance(sized, SizeOffloadResult) and sized.offload is not None
    size = sized.offload.kv_offloading_size_gib
    # 2,048 GiB less the default reserve of max(32 GiB, 20 %) = 409.6 GiB, rounded down.
    assert size == 1638
    for output in ("vllm_serve", "kubernetes"):
        rendered = render(
            backend="native_cpu",
            version="0.33.0",
            model="meta-llama/Llama-3.1-70B-Instruct",
            parallelism={"tensor_parallel_size": 8},
            sizes={"kv_offloading_size_gib": size},
            format=output,
        )
        assert "--kv-offloading-size" in rendered.files[-1].content
        findings = review(*files_of(rendered), version="0.33.0", host={"ram_gib": 2048, "gpu": "H200"}).findings
        assert [f for f in findings if not f.rule_id.startswith("advisory.")] == []


def test_choose_then_render_uses_the_chosen_backend() -> None:
    chosen = run_tool("choose_backend", {"version": "0.22.1", "tiers": ["cpu", "nvme"]})
    assert isinstance(chosen, ChooseBackendResult)
    rendered = render(
        choice=chosen.model_dump(mode="json"),
        version="0.22.1",
        model="Qwen/Qwen3-32B",
        sizes={"kv_offloading_size_gib": 400},
        paths={"disk": ["/mnt/nvme0/kv"]},
        format="vllm_serve",
    )
    text = rendered.files[-1].content
    # 0.22.x registers the filesystem tier as fs_python; fs arrives in 0.23.0.
    assert '"type":"fs_python"' in text and "TieringOffloadingSpec" in text
    assert [
        f
        for f in review(*files_of(rendered), version="0.22.1", host={"ram_gib": 1024}).findings
        if not f.rule_id.startswith("advisory.")
    ] == []
