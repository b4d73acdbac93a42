"""A heavy call neither stalls the server nor runs for ever: offline tools run in worker processes, each call
under a CPU budget (--call-cpu-seconds) that ends it with one clear line.

Before, the offline tools ran on the event loop: one large review held `/healthz` and every other
client until it finished, and nothing could stop it. The heavy input here is a review of a
900-Deployment manifest and a 1.9 MB values file (2.7 MB of JSON, under the SDK's 4 MiB body
limit): seconds of CPU, several times the half-second budget the servers here are given.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from conftest import running_server
from vllm_caching_mcp.tool_workers import ToolWorkers, WorkerSettings

BUDGET = "0.5"
_DEPLOYMENT = """---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm-{i}}}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.22.1
        args: [{args}]
"""
_VALUE = "- name: c{i}\n  image: vllm/vllm-openai:v0.22.1\n  args: ['--kv-offloading-size', '64']\n"
CHEAP = ("check_version", {"name": "--kv-offloading-size", "version": "0.22.1"})


def heavy_review() -> dict[str, Any]:
    args = ", ".join(f'"--kv-offloading-size", "{i}"' for i in range(20))
    manifest = "".join(_DEPLOYMENT.format(i=i, args=args) for i in range(900))
    values = "".join(_VALUE.format(i=i) for i in range(21_000))
    return {"documents": [{"name": "deploy.yaml", "text": manifest}, {"name": "values.yaml", "text": values}]}


def budget_error(seconds: str) -> str:
    return (
        f"review_deployment: the call used more than {seconds} s of CPU time and was stopped; "
        "send a smaller input, or ask the server's operator to raise --call-cpu-seconds"
    )


pytestmark = pytest.mark.anyio


async def test_a_heavy_call_leaves_the_server_to_everyone_else_and_ends_at_its_budget(tmp_path: Path) -> None:
    with running_server("--call-cpu-seconds", BUDGET, log=tmp_path / "server.log") as url:
        async with Client(f"{url}/mcp") as heavy, Client(f"{url}/mcp") as other, httpx.AsyncClient() as probe:
            heavy_result: list[Any] = []
            waits: list[float] = []

            async def run_heavy() -> None:
                heavy_result.append(await heavy.call_tool("review_deployment", heavy_review()))

            started = time.monotonic()
            async with anyio.create_task_group() as group:
                group.start_soon(run_heavy)
                # /healthz and another client's cheap call, over and over while the heavy call runs.
                while not heavy_result:
                    sent = time.monotonic()
                    assert (await probe.get(f"{url}/healthz", timeout=60)).status_code == 200
                    assert not (await other.call_tool(*CHEAP)).is_error
                    waits.append(time.monotonic() - sent)
                    await anyio.sleep(0.05)
            heavy_seconds = time.monotonic() - started
            [result] = heavy_result
            assert result.is_error and result.content[0].text == budget_error(BUDGET)
            # On the event loop, a probe waited out the whole review (most of the heavy call's time);
            # now each is a couple of round trips, however long the heavy call takes.
            assert len(waits) >= 2 and max(waits) < heavy_seconds / 2, (waits, heavy_seconds)

            # The server goes on serving: the stopped worker is replaced.
            again = await heavy.call_tool(*CHEAP)
            assert not again.is_error and again.structured_content is not None
            assert (await probe.get(f"{url}/healthz")).json() == {"status": "ok"}
    assert "Traceback" not in (tmp_path / "server.log").read_text()


@pytest.mark.parametrize("module", ["vllm_caching_mcp.serve", "vllm_caching_mcp.mcp_server"])
async def test_the_budget_holds_over_stdio_too(module: str) -> None:
    """Both ways to start it: the installed command (serve.py, whose zygote is forked before the SDK is
    imported) and mcp_server.py (zygote spawned)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", module, "--call-cpu-seconds", BUDGET])
    async with Client(params) as client:
        result = await client.call_tool("review_deployment", heavy_review())
        assert result.is_error and result.content[0].text == budget_error(BUDGET)
        assert not (await client.call_tool(*CHEAP)).is_error


def _children(pid: int) -> list[int]:
    return [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads process trees from /proc")
def test_the_installed_command_forks_its_zygote_answers_from_it_and_leaves_no_process_behind() -> None:
    import subprocess

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from stdio_session import StdioSession

    session = StdioSession([sys.executable, "-m", "vllm_caching_mcp.serve"])
    session.initialize()
    result = session.request("tools/call", {"name": CHEAP[0], "arguments": CHEAP[1]})
    assert not result.get("isError") and result["structuredContent"]["matches"][0]["status"] == "available"
    (zygote,) = _children(session.proc.pid)
    # Forked, not spawned: the same command line as the server's, and the worker is the zygote's child.
    with open(f"/proc/{zygote}/cmdline", "rb") as own, open(f"/proc/{session.proc.pid}/cmdline", "rb") as server:
        assert own.read() == server.read()
    workers = _children(zygote)
    assert len(workers) == 1
    assert session.request("tools/list")["tools"]  # the protocol is the server's alone: nothing else wrote to it
    session.close()
    assert session.proc.returncode == 0
    assert _eventually(lambda: not any(map(_running, [zygote, *workers]))), subprocess.run(["ps", "-ef"]).stdout


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has: its state in /proc is Z)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _eventually(condition: Callable[[], bool], seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads process states from /proc")
def test_a_call_its_caller_stops_waiting_for_ends_its_worker_and_the_next_call_gets_a_new_one() -> None:
    workers = ToolWorkers(WorkerSettings(cpu_seconds=60), size=1)

    async def ask() -> Any:
        return await workers.call(*CHEAP)

    async def abandon() -> None:
        with anyio.move_on_after(0.5):
            await workers.call("review_deployment", heavy_review())

    try:
        assert anyio.run(ask).structured["matches"][0]["status"] == "available"
        [first] = workers.worker_pids()
        anyio.run(abandon)
        # Stopped at once, not left computing for the rest of its 60 s budget.
        assert _eventually(lambda: not _running(first)), "the abandoned worker is still running"
        assert anyio.run(ask).structured["matches"][0]["status"] == "available"
        [second] = workers.worker_pids()
        assert second != first and _running(second)
    finally:
        workers.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads process states from /proc")
def test_a_worker_that_ended_while_idle_is_replaced_before_the_next_call() -> None:
    workers = ToolWorkers(WorkerSettings(cpu_seconds=60), size=1)

    async def ask() -> Any:
        return await workers.call(*CHEAP)

    try:
        anyio.run(ask)
        [first] = workers.worker_pids()
        os.kill(first, signal.SIGKILL)  # what the OOM killer or an operator would do
        assert _eventually(lambda: not _running(first))
        assert anyio.run(ask).structured["matches"][0]["status"] == "available"
        assert workers.worker_pids() != [first]
    finally:
        workers.close()


async def test_a_flood_of_heavy_calls_is_bounded_and_a_cheap_call_is_answered_at_once(tmp_path: Path) -> None:
    """16 concurrent heavy reviews on two workers: one runs, the rest wait in a bounded line or are told the
    server is busy, and a one-flag question is answered on the worker kept for small calls meanwhile."""
    args = ("--call-cpu-seconds", "2", "--call-workers", "2")
    with running_server(*args, log=tmp_path / "server.log") as url:
        async with Client(f"{url}/mcp") as flood, Client(f"{url}/mcp") as other:
            results: list[Any] = []
            cheap_waits: list[float] = []

            async def heavy() -> None:
                results.append(await flood.call_tool("review_deployment", heavy_review()))

            async with anyio.create_task_group() as group:
                for _ in range(16):
                    group.start_soon(heavy)
                await anyio.sleep(1.0)  # the flood has arrived
                for _ in range(3):
                    sent = time.monotonic()
                    assert not (await other.call_tool(*CHEAP)).is_error
                    cheap_waits.append(time.monotonic() - sent)
            texts = [r.content[0].text for r in results]
            busy = [t for t in texts if t.startswith("review_deployment: the server is busy: ")]
            stopped = [t for t in texts if t == budget_error("2")]
            assert len(busy) + len(stopped) == 16, texts
            assert len(busy) >= 16 - 1 - 8, texts  # past one running and eight waiting, a call is busy at once
            # Without the kept worker, each cheap call waited for a heavy one to use its 2 s budget.
            assert max(cheap_waits) < 1.5, cheap_waits
    assert "Traceback" not in (tmp_path / "server.log").read_text()
