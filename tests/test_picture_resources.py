"""size_offload's pictures from the command line (--plot) and over MCP (the resource links an answer carries)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.extension import advertise
from mcp.shared.exceptions import MCPError

from conftest import run_in_process
from vllm_caching_mcp import cli
from vllm_caching_mcp.mcp_server import build_server
from vllm_caching_mcp.reports.mcp_pictures import APPS_EXTENSION, MCP_APP_MIME, SVG_MIME
from vllm_caching_mcp.reports.sizing_pictures import plot_svg
from vllm_caching_mcp.tools import run_tool

ARGUMENTS = {
    "model": "llama-3.1-70b",
    "gpu": "H200",
    "tensor_parallel_size": 8,
    "host_ram_gib": 2048,
    "version": "0.33.0",
}
OPTIONS = ["--model", "llama-3.1-70b", "--gpu", "H200", "--tensor-parallel-size", "8", "--host-ram-gib", "2048"]
OPTIONS += ["--version", "0.33.0"]


def picture(kind: str = "both", p99: int | None = None) -> str:
    return plot_svg(run_tool("size_offload", ARGUMENTS), kind, p99)  # type: ignore[arg-type]


def test_plot_writes_the_picture_and_prints_the_same_answer(tmp_path: Path) -> None:
    plain = run_in_process(cli.main, "size-offload", *OPTIONS)
    out = tmp_path / "sizing.svg"
    plotted = run_in_process(cli.main, "size-offload", *OPTIONS, "--plot", str(out), "--p99-context-tokens", "32768")
    assert plotted.returncode == 0 and plotted.stdout == plain.stdout and plotted.stderr == ""
    assert out.read_text(encoding="utf-8") == picture("both", 32_768)
    memory = tmp_path / "memory.svg"
    run_in_process(cli.main, "size-offload", *OPTIONS, "--plot", str(memory), "--plot-kind", "memory")
    assert memory.read_text(encoding="utf-8") == picture("memory")


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (["--plot", "no/such/dir/x.svg"], "--plot: cannot write 'no/such/dir/x.svg' (No such file or directory)"),
        (["--plot", "x.svg", "--p99-context-tokens", "0"], "--p99-context-tokens: must be a positive number"),
    ],
)
def test_plot_refuses_with_one_line(extra: list[str], error: str, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    done = run_in_process(cli.main, "size-offload", *OPTIONS, *extra)
    assert done.returncode == 2 and error in done.stderr and done.stderr.count("\n") == 1


async def _call(extensions: list[Any] | None = None) -> tuple[Any, Any]:
    async with Client(build_server(), extensions=extensions or []) as client:
        answer = await client.call_tool("size_offload", ARGUMENTS)
        templates = await client.list_resource_templates()
        read = {}
        for link in answer.content[1:]:
            read[link.uri] = (await client.read_resource(link.uri)).contents[0]
        read["p99"] = (
            await client.read_resource(answer.content[1].uri.replace("/both/", "/capacity/") + "?p99=32768")
        ).contents[0]
        return answer, (templates, read)


def test_an_answer_links_its_picture_and_reading_the_link_draws_it() -> None:
    answer, (templates, read) = anyio.run(_call)
    assert [c.type for c in answer.content] == ["text", "resource_link"]  # no page link: the client shows no Apps
    link = answer.content[1]
    assert link.uri.startswith("picture://size_offload/both/") and link.mime_type == SVG_MIME
    assert len(link.uri) < 200  # the arguments at their defaults are left out of the key
    assert {t.uri_template for t in templates.resource_templates} >= {
        "picture://size_offload/{kind}/{key}{?p99}",
        "ui://size_offload/{key}{?p99}",
    }
    svg = read[link.uri]
    assert svg.mime_type == SVG_MIME and svg.text == picture()
    assert read["p99"].text == picture("capacity", 32_768)
    assert answer.structured_content == run_tool("size_offload", ARGUMENTS).structured()


def test_a_client_that_shows_mcp_apps_also_gets_the_page() -> None:
    answer, (_, read) = anyio.run(_call, [advertise(APPS_EXTENSION, {"mimeTypes": [MCP_APP_MIME]})])
    page_link = answer.content[2]
    assert page_link.uri.startswith("ui://size_offload/") and page_link.mime_type == MCP_APP_MIME
    page = read[page_link.uri].text
    assert page.startswith("<!DOCTYPE html>") and picture() in page and "<script" not in page


@pytest.mark.parametrize(
    ("uri", "error"),
    [
        ("picture://size_offload/both/%%%", "key: not a picture key"),
        ("picture://size_offload/both/WzFd", "key: not a picture key"),  # a JSON list, not the arguments
        ("picture://size_offload/pie/eyJtb2RlbCI6ImxsYW1hLTMuMS03MGIifQ", "kind: 'pie' is not one of"),
        ("picture://size_offload/both/eyJtb2RlbCI6ImxsYW1hLTMuMS03MGIifQ?p99=-1", "p99: '-1' is not a positive"),
        ("picture://size_offload/both/eyJtb2RlbCI6Im5vLXN1Y2gtbW9kZWwifQ", "model:"),  # the tool's own refusal
    ],
)
def test_a_bad_picture_uri_is_refused_naming_the_part(uri: str, error: str) -> None:
    async def read() -> str:
        async with Client(build_server()) as client:
            try:
                await client.read_resource(uri)
            except MCPError as exc:
                return str(exc)
        return "no error"

    assert error in anyio.run(read)
