"""Who gets a worker: the call queue is fair between clients, keeps a worker for small calls, and is bounded.

An attack run sent 16 concurrent 80 KB reviews: each spent a worker's whole CPU budget, and a
one-flag `check_version` from another client waited 161 s behind them. The queue now gives a free
worker to the least-served line of calls (each client has one for small calls and one for large),
never lets a large call take the last free worker, and answers "busy" at once past its limits or
after waiting too long. These tests drive `CallQueue` directly with calls that hold their slot
until released; the end-to-end case against a real server is in test_call_budget.
"""

from __future__ import annotations

import pickle

import anyio
import pytest

from vllm_caching_mcp import tool_workers
from vllm_caching_mcp.tool_workers import CallBusy, CallQueue

pytestmark = pytest.mark.anyio


class Calls:
    """Calls that take a slot and hold it until released; records the order they got their slots in."""

    def __init__(self, queue: CallQueue, group: anyio.abc.TaskGroup) -> None:
        self.queue = queue
        self.group = group
        self.started: list[str] = []
        self.refused: dict[str, str] = {}
        self._release: dict[str, anyio.Event] = {}

    def send(self, name: str, client: str, *, large: bool = False) -> None:
        self._release[name] = anyio.Event()

        async def call() -> None:
            try:
                async with self.queue.slot(client, large):
                    self.started.append(name)
                    await self._release[name].wait()
            except CallBusy as exc:
                self.refused[name] = str(exc)

        self.group.start_soon(call)

    def release(self, name: str) -> None:
        self._release[name].set()

    def release_all(self) -> None:
        for event in self._release.values():
            event.set()


async def settle() -> None:
    for _ in range(5):
        await anyio.sleep(0)
    await anyio.sleep(0.01)


async def test_a_small_call_gets_the_worker_kept_from_a_flood_of_large_ones() -> None:
    async with anyio.create_task_group() as group:
        calls = Calls(CallQueue(size=2, max_wait=30), group)
        for i in range(6):
            calls.send(f"review {i}", "http:10.0.0.1", large=True)
        await settle()
        assert calls.started == ["review 0"]  # the second worker stays free for small calls
        calls.send("check_version", "http:10.0.0.1")
        await settle()
        assert calls.started == ["review 0", "check_version"]
        calls.release_all()


async def test_a_free_worker_goes_to_the_least_served_client() -> None:
    async with anyio.create_task_group() as group:
        calls = Calls(CallQueue(size=1, max_wait=30), group)
        calls.send("a1", "a")
        await settle()
        for name in ("a2", "a3", "a4"):
            calls.send(name, "a")
        await settle()
        calls.send("b1", "b")
        calls.send("c1", "c")
        await settle()
        for name in ("a1", "b1", "c1", "a2", "a3"):
            calls.release(name)
            await settle()
        # After a1, the clients that waited once each come before a's second, third and fourth calls.
        assert calls.started == ["a1", "b1", "c1", "a2", "a3", "a4"]
        calls.release_all()


async def test_past_its_line_limit_a_call_is_busy_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_workers, "MAX_WAITING_PER_CLIENT", 3)
    async with anyio.create_task_group() as group:
        calls = Calls(CallQueue(size=1, max_wait=30), group)
        for i in range(5):
            calls.send(f"r{i}", "a", large=True)
        await settle()
        assert calls.started == ["r0"]
        assert list(calls.refused) == ["r4"]
        assert "3 calls like this one from this client are already waiting" in calls.refused["r4"]
        calls.send("other", "b")  # another client's line is not full
        await settle()
        assert "other" not in calls.refused
        calls.release_all()


async def test_past_the_total_limit_a_call_is_busy_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_workers, "MAX_WAITING_CALLS", 4)
    async with anyio.create_task_group() as group:
        calls = Calls(CallQueue(size=1, max_wait=30), group)
        for i in range(6):
            calls.send(f"c{i}", f"client {i}")
        await settle()
        assert calls.started == ["c0"] and list(calls.refused) == ["c5"]
        assert calls.refused["c5"].startswith("the call: the server is busy: 4 calls are waiting for a worker")
        calls.release_all()


async def test_a_call_that_waits_too_long_is_busy_and_leaves_the_line() -> None:
    queue = CallQueue(size=1, max_wait=0.2)
    async with anyio.create_task_group() as group:
        calls = Calls(queue, group)
        calls.send("long", "a")
        await settle()
        calls.send("waiting", "b")
        await anyio.sleep(0.5)
        assert calls.refused["waiting"].startswith("the call: the server is busy: no worker was free for")
        assert queue.waiting == 0
        calls.release("long")
        await settle()
        calls.send("next", "b")  # the slot of the one that left was not lost
        await settle()
        assert calls.started == ["long", "next"]
        calls.release_all()


async def test_a_cancelled_call_gives_its_slot_back() -> None:
    queue = CallQueue(size=1, max_wait=30)
    async with anyio.create_task_group() as group:
        calls = Calls(queue, group)
        calls.send("first", "a")
        await settle()
        with anyio.move_on_after(0.1):  # a caller that stops waiting
            async with queue.slot("b", large=False):
                pytest.fail("no slot was free")
        assert queue.waiting == 0
        calls.release("first")
        await settle()
        calls.send("after", "c")
        await settle()
        assert calls.started == ["first", "after"]
        calls.release_all()


def test_an_answer_over_the_cap_is_refused_in_the_worker_with_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_workers, "MAX_ANSWER_BYTES", 1000)
    small = ("answer", "summary", {"findings": []})
    assert pickle.loads(tool_workers._bounded_reply("review_deployment", small)) == small
    kind, message = pickle.loads(tool_workers._bounded_reply("review_deployment", ("answer", "x" * 5000, {})))
    assert kind == "refused"
    assert message.startswith("review_deployment: the answer would take 5,")
    assert message.endswith("more than the 1,000 one call returns; send fewer or smaller documents at a time")
