"""Offline tool calls in worker processes, each call under a CPU-time budget.

A call that runs on the server's event loop stalls every other client, and `/healthz`, for as
long as it runs; a call on a thread cannot be stopped at all. A worker process can be: before
each call the worker arms its CPU-time timer (ITIMER_PROF) with the budget, so the kernel ends it
with SIGPROF as soon as the call has used that much CPU, even inside one long C-level step such
as a regular expression, which no check in Python could interrupt. The server sees the worker
go, answers "<tool>: the call used more than N s of CPU time and was stopped; ...", and the next
call gets a new worker. A wall-clock bound (a few times the budget) also stops a call that waits
instead of computing.

Workers are forked from one "zygote" process (`python -m vllm_caching_mcp.tool_workers`), which
imports every tool and loads the knowledge once (`_preload`) and then only forks, so a
new worker is ready in milliseconds and shares those pages with the others. The zygote is the
workers' parent: it reaps each one when the server asks, and tells it how the worker ended.
(multiprocessing's fork server would re-import the server's `__main__`, and with it the MCP SDK,
in every worker.) The event loop talks to a worker over a socket pair with non-blocking sends and
receives, so a call in progress costs the loop nothing.

At most `size` calls run at once; the others wait in a `CallQueue`, which is fair between clients
(a free worker goes to the waiting client with the fewest calls running), keeps one worker for
small calls (a caller flooding the server with large reviews cannot make a one-flag question wait
behind them), and is bounded: past its limits, or after waiting too long, a call is answered
"busy" at once instead of queueing without end. An answer larger than MAX_ANSWER_BYTES is refused
in the worker, so no request is amplified into an answer the size of a file system.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import json
import logging
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter, deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import anyio
import anyio.to_thread

from .tools import ToolInputError

logger = logging.getLogger(__name__)

# Where a process can be forked and the kernel can end one for its CPU time.
SUPPORTED = hasattr(os, "fork") and sys.platform != "win32"

_HEADER = struct.Struct("!Q")  # every message on a worker's channel: its length, then its bytes
_READY = b"ready"
# The zygote's control socket: a request is one kind byte and a pid (fork: 0, with the channel's fd
# attached); each reply is one signed number (the new worker's pid, or how a worker ended).
_REQUEST = struct.Struct("!cq")
_REPLY = struct.Struct("!q")
_FORK, _WAIT = b"F", b"W"
_UNKNOWN_EXIT = -(2**31)
# A cold zygote imports every tool before its first fork; later workers start in milliseconds.
START_TIMEOUT_S = 120.0
# The wall-clock bound of a call: generous, since on a busy machine a call gets a share of a core.
WALL_FACTOR = 3
WALL_MARGIN_S = 10
# A call whose arguments take more than this is large: large calls never take the last free worker.
LARGE_CALL_BYTES = 16 * 1024
# Calls that may wait for a worker: in all, and of one client.
MAX_WAITING_CALLS = 64
MAX_WAITING_PER_CLIENT = 8
# The most one answer may take (its summary and structured content, as sent to the server).
MAX_ANSWER_BYTES = 4 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class WorkerSettings:
    """What every worker is started with."""

    cpu_seconds: float
    # size_offload's config_path policy (advice.model_config.restrict_config_paths), copied into each worker.
    config_paths_restricted: bool = False
    config_root: str | None = None

    @property
    def wall_seconds(self) -> float:
        return WALL_FACTOR * self.cpu_seconds + WALL_MARGIN_S


class Answer(NamedTuple):
    summary: str
    structured: dict[str, Any]


class CallStopped(Exception):
    """A call ran past its budget and its worker was stopped; the message is one line for the caller."""


class CallBusy(Exception):
    """A call not taken: too many are waiting, or it waited too long; the message is one line for the caller."""


class WorkerStartError(RuntimeError):
    """A worker process could not be started."""


# -- a worker ----------------------------------------------------------------------------------------


def serve_calls(channel: socket.socket, settings: WorkerSettings) -> None:
    """A worker's whole life: answer each call sent over ``channel`` until the server closes it."""
    signal.signal(signal.SIGPROF, signal.SIG_DFL)  # the budget: SIGPROF must end the process
    _copy_config_policy(settings)
    try:
        _send(channel, _READY)
        while (request := _receive(channel)) is not None:
            name, arguments = pickle.loads(request)
            signal.setitimer(signal.ITIMER_PROF, settings.cpu_seconds)
            answer = _answer(name, arguments)
            signal.setitimer(signal.ITIMER_PROF, 0)
            _send(channel, _bounded_reply(name, answer))
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server went away (it exited, or stopped waiting for this call): so does the worker


def _copy_config_policy(settings: WorkerSettings) -> None:
    if settings.config_paths_restricted:
        from .advice.model_config import restrict_config_paths

        restrict_config_paths(Path(settings.config_root) if settings.config_root is not None else None)


def _answer(name: str, arguments: dict[str, Any]) -> tuple[Any, ...]:
    from .tools import json_strings_parsed, run_tool

    try:
        result = run_tool(name, json_strings_parsed(name, arguments))
        return ("answer", result.summary(), result.structured())
    except ToolInputError as exc:
        return ("refused", str(exc))
    except Exception:  # reported to the server's log; the caller gets the SDK's generic message
        return ("failed", traceback.format_exc())


def _bounded_reply(name: str, answer: tuple[Any, ...]) -> bytes:
    reply = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
    if len(reply) > MAX_ANSWER_BYTES:
        refusal = (
            f"{name}: the answer would take {len(reply):,} bytes, more than the {MAX_ANSWER_BYTES:,} one call "
            "returns; send fewer or smaller documents at a time"
        )
        reply = pickle.dumps(("refused", refusal), protocol=pickle.HIGHEST_PROTOCOL)
    return reply


def _framed(payload: bytes) -> bytes:
    """A message as it goes on a channel: its length, then its bytes."""
    return _HEADER.pack(len(payload)) + payload


def _send(channel: socket.socket, payload: bytes) -> None:
    channel.sendall(_framed(payload))


def _receive(channel: socket.socket) -> bytes | None:
    """The next message, or None once the other end has closed."""
    header = _receive_exactly(channel, _HEADER.size)
    if header is None:
        return None
    return _receive_exactly(channel, _HEADER.unpack(header)[0])


def _receive_exactly(channel: socket.socket, size: int) -> bytes | None:
    buffer = bytearray(size)
    view = memoryview(buffer)
    received = 0
    while received < size:
        count = channel.recv_into(view[received:])
        if count == 0:
            return None
        received += count
    return bytes(buffer)


# -- the zygote --------------------------------------------------------------------------------------


def _zygote(control: socket.socket, settings: WorkerSettings) -> None:
    """Load everything once, then fork a worker for each request and reap one when asked."""
    import resource

    _preload()

    # The server decides when the zygote and its workers end: ^C in a terminal reaches the whole group.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))  # budget kills
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, _REQUEST.size, 1)
        except ConnectionResetError:
            return
        if not data:
            return  # the server is gone; its workers see their channels close and end too
        data += _receive_exactly(control, _REQUEST.size - len(data)) or b""
        kind, pid = _REQUEST.unpack(data)
        if kind == _FORK:
            control.sendall(_REPLY.pack(_fork_worker(control, socket.socket(fileno=fds[0]), settings)))
        else:
            control.sendall(_REPLY.pack(_reap(pid)))


def _preload() -> None:
    """Load every tool and the knowledge here, once: each worker forked from this process starts with
    them in memory, shared page by page with its siblings, instead of loading its own copy."""
    from .knowledge import load_knowledge
    from .tools import all_tools

    try:
        all_tools()
        load_knowledge()
    except Exception:  # a worker loads on its own call, and reports what is wrong there
        logger.debug("preloading the tools failed", exc_info=True)
        return
    # Lives as long as every worker: kept out of the collector's sight, so a collection in a
    # worker neither walks it nor writes to (and so copies) the pages it shares.
    gc.freeze()


def _fork_worker(control: socket.socket, channel: socket.socket, settings: WorkerSettings) -> int:
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            control.close()
            serve_calls(channel, settings)
        except BaseException:
            traceback.print_exc()
            status = 1
        finally:
            os._exit(status)
    channel.close()
    return pid


def _reap(pid: int) -> int:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return _UNKNOWN_EXIT
    return os.waitstatus_to_exitcode(status)


def _zygote_main(argv: list[str]) -> int:
    control = socket.socket(fileno=int(argv[0]))
    _zygote(control, WorkerSettings(**json.loads(argv[1])))
    return 0


def _forked_zygote(ours: socket.socket, theirs: socket.socket, settings: WorkerSettings) -> NoReturn:
    """The zygote, in a child forked from the server (see `_Zygote`); it never returns."""
    status = 0
    try:
        ours.close()
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)  # over stdio the server's standard input and output are the protocol, not ours
        os.dup2(null, 1)
        _zygote(theirs, settings)
    except BaseException:
        traceback.print_exc()
        status = 1
    finally:
        os._exit(status)


class _ForkedChild:
    """What `_Zygote` uses of a `subprocess.Popen`, for a zygote forked from this process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                self.returncode = _UNKNOWN_EXIT
            else:
                if done:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("tool worker zygote", timeout or 0.0)
            time.sleep(0.01)
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


class _Zygote:
    """The server's handle on the zygote: one request at a time, each answered before the next.

    Spawned as its own interpreter by default. With ``fork``, forked from this process instead, which
    must have no thread but the main one (a thread holding a lock at the fork would leave it held in
    the child): the zygote then starts with the modules already imported here (pydantic, the tool
    registry) in pages it shares with this process, and without an interpreter's start-up."""

    def __init__(self, settings: WorkerSettings, *, fork: bool = False) -> None:
        ours, theirs = socket.socketpair()
        if fork:
            pid = os.fork()
            if pid == 0:
                _forked_zygote(ours, theirs, settings)
            theirs.close()
            self.process: subprocess.Popen[bytes] | _ForkedChild = _ForkedChild(pid)
            ours.settimeout(START_TIMEOUT_S)
            self.control = ours
            self._lock = threading.Lock()
            return
        package_parent = str(Path(__file__).resolve().parents[1])  # this copy of the package, not another
        path = os.pathsep.join(p for p in (package_parent, os.environ.get("PYTHONPATH")) if p)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-P", "-m", __name__, str(theirs.fileno()), json.dumps(dataclasses.asdict(settings))],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # over stdio, the server's standard output is the protocol
                env={**os.environ, "PYTHONPATH": path},
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.settimeout(START_TIMEOUT_S)
        self.control = ours
        self._lock = threading.Lock()

    def alive(self) -> bool:
        return self.process.poll() is None

    def fork(self, channel: socket.socket) -> int:
        with self._lock:
            socket.send_fds(self.control, [_REQUEST.pack(_FORK, 0)], [channel.fileno()])
            return self._reply()

    def wait(self, pid: int) -> int:
        """How worker ``pid`` ended (an exit status, or minus the signal); it must be ending or ended."""
        with self._lock:
            try:
                self.control.sendall(_REQUEST.pack(_WAIT, pid))
                return self._reply()
            except (OSError, WorkerStartError):
                return _UNKNOWN_EXIT

    def _reply(self) -> int:
        data = _receive_exactly(self.control, _REPLY.size)
        if data is None:
            raise WorkerStartError(f"the tool worker zygote ended (exit code {self.process.poll()})")
        return int(_REPLY.unpack(data)[0])

    def close(self) -> None:
        self.control.close()  # the zygote ends when it reads the end of its control socket
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# -- the server's side -------------------------------------------------------------------------------


class _Worker:
    def __init__(self, pid: int, channel: socket.socket, zygote: _Zygote) -> None:
        self.pid = pid
        self.channel = channel  # non-blocking: read and written from the event loop
        self.zygote = zygote

    async def exchange(self, request: bytes) -> bytes | None:
        """Send one call and wait for its reply; None if the worker went away first."""
        loop = asyncio.get_running_loop()
        try:
            await loop.sock_sendall(self.channel, _framed(request))
            header = await _receive_async(loop, self.channel, _HEADER.size)
            if header is None:
                return None
            return await _receive_async(loop, self.channel, _HEADER.unpack(header)[0])
        except (BrokenPipeError, ConnectionResetError):
            return None

    def idle_and_alive(self) -> bool:
        """An idle worker sends nothing: anything to read on its channel is the end of it."""
        try:
            self.channel.recv(1, socket.MSG_PEEK)  # b"" (it ended) or bytes (it is not idle)
        except BlockingIOError:
            return True  # nothing to read: alive and waiting
        except OSError:
            pass
        return False

    def exit_code(self) -> int:
        """How the worker ended, once its channel has closed (killed first: the zygote must not wait for ever)."""
        self._kill()
        return self.zygote.wait(self.pid)

    def stop(self, *, wait: bool = False) -> None:
        """End the worker; the zygote reaps it on a thread, or before this returns with ``wait``."""
        self.channel.close()
        self._kill()
        if wait:
            self.zygote.wait(self.pid)
        else:
            threading.Thread(target=self.zygote.wait, args=(self.pid,), daemon=True).start()

    def _kill(self) -> None:
        # The pid stays this worker's until the zygote reaps it, so the signal reaches no other process;
        # one that has already ended keeps the status it ended with.
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


async def _receive_async(loop: asyncio.AbstractEventLoop, channel: socket.socket, size: int) -> bytes | None:
    buffer = bytearray(size)
    view = memoryview(buffer)
    received = 0
    while received < size:
        count = await loop.sock_recv_into(channel, view[received:])
        if count == 0:
            return None
        received += count
    return bytes(buffer)


class _Waiter:
    __slots__ = ("event", "large")

    def __init__(self, large: bool) -> None:
        self.event = anyio.Event()
        self.large = large


class CallQueue:
    """Who gets the next free worker: fair between clients, one worker kept for small calls, bounded.

    Each client (the peer address over HTTP; the one client over stdio) has two lines of waiting
    calls, one for small calls and one for large ones (see LARGE_CALL_BYTES), so a client's own
    flood of large reviews does not hold up its one-flag questions either. When a worker frees, it
    goes to the first call of the line with the fewest calls running, among equals the one served
    longest ago (or never); a large call is passed over while it would take the last free worker of a pool of two
    or more. A call that finds MAX_WAITING_CALLS waiting, or MAX_WAITING_PER_CLIENT in its line, or
    that waits longer than ``max_wait`` seconds, raises CallBusy.
    """

    def __init__(self, size: int, max_wait: float) -> None:
        self.size = size
        self.max_wait = max_wait
        self._running: Counter[str] = Counter()
        self._waiting: dict[str, deque[_Waiter]] = {}
        # When each line last got a slot (a count of slots handed out), while it has calls running or waiting.
        self._served: dict[str, int] = {}
        self._handed_out = 0

    @property
    def waiting(self) -> int:
        return sum(len(line) for line in self._waiting.values())

    @contextlib.asynccontextmanager
    async def slot(self, client: str, large: bool, tool: str = "the call") -> AsyncIterator[None]:
        """Hold a worker's slot for one call of ``client`` while the block runs; CallBusy names ``tool``."""
        line = f"{client} {'large' if large else 'small'}"
        try:
            waiter = self._join(line, large)
            if waiter is not None:
                await self._wait(line, waiter)
        except CallBusy as exc:
            raise CallBusy(f"{tool}: {exc}") from None
        try:
            yield
        finally:
            self._release(line)

    def _join(self, line_name: str, large: bool) -> _Waiter | None:
        """Take a free slot now (None), or queue a waiter; raises CallBusy when the queue is full."""
        if not self._waiting and self._may_run(large):
            self._start(line_name)
            return None
        if self.waiting >= MAX_WAITING_CALLS:
            raise CallBusy(f"the server is busy: {self.waiting} calls are waiting for a worker; try again shortly")
        line = self._waiting.setdefault(line_name, deque())
        if len(line) >= MAX_WAITING_PER_CLIENT:
            raise CallBusy(
                f"the server is busy: {len(line)} calls like this one from this client are already waiting for "
                "a worker; wait for their answers before sending more"
            )
        waiter = _Waiter(large)
        line.append(waiter)
        self._dispatch()  # a small call may take the worker large ones are kept off
        return waiter

    async def _wait(self, line_name: str, waiter: _Waiter) -> None:
        started = time.monotonic()
        try:
            with anyio.move_on_after(self.max_wait):
                await waiter.event.wait()
        except BaseException:
            if waiter.event.is_set():  # cancelled just as a slot came: give it back
                self._release(line_name)
            raise
        finally:
            if not waiter.event.is_set():  # timed out or cancelled: leave the line
                line = self._waiting.get(line_name)
                if line is not None and waiter in line:
                    line.remove(waiter)
                    if not line:
                        del self._waiting[line_name]
                        self._forget_if_idle(line_name)
        if not waiter.event.is_set():
            raise CallBusy(
                f"the server is busy: no worker was free for {time.monotonic() - started:.0f} s; try again shortly"
            )

    def _may_run(self, large: bool) -> bool:
        running = sum(self._running.values())
        if running >= self.size:
            return False
        return not (large and self.size >= 2 and running + 1 >= self.size)

    def _start(self, line_name: str) -> None:
        self._running[line_name] += 1
        self._handed_out += 1
        self._served[line_name] = self._handed_out

    def _release(self, line_name: str) -> None:
        self._running[line_name] -= 1
        if self._running[line_name] <= 0:
            del self._running[line_name]
            self._forget_if_idle(line_name)
        self._dispatch()

    def _forget_if_idle(self, line_name: str) -> None:
        """A line with nothing running or waiting is forgotten: clients come and go."""
        if line_name not in self._running and line_name not in self._waiting:
            self._served.pop(line_name, None)

    def _dispatch(self) -> None:
        """Hand free slots to waiting calls, the least-served line first."""
        while True:
            eligible = [
                (self._running[name], self._served.get(name, 0), arrival, name)
                for arrival, (name, line) in enumerate(self._waiting.items())
                if self._may_run(line[0].large)
            ]
            if not eligible:
                return
            *_, name = min(eligible)
            line = self._waiting[name]
            waiter = line.popleft()
            if not line:
                del self._waiting[name]
            self._start(name)
            waiter.event.set()


class ToolWorkers:
    """A small pool of worker processes that answer offline tool calls, each under a CPU-time budget."""

    def __init__(self, settings: WorkerSettings, size: int) -> None:
        self.settings = settings
        self.size = size
        self._zygote: _Zygote | None = None
        self._idle: list[_Worker] = []
        self._warming: threading.Thread | None = None
        self._warm_error: BaseException | None = None
        self._queue = CallQueue(size, max_wait=settings.wall_seconds)
        self._closed = False
        self._lock = threading.Lock()  # the zygote and the idle list, which threads also reach

    def start_zygote(self) -> None:
        """Start the zygote now, so that it loads the tools while this process goes on starting: forked
        while this process has one thread (see `_Zygote`), else spawned."""
        with self._lock:
            if self._zygote is None and not self._closed:
                self._zygote = _Zygote(self.settings, fork=threading.active_count() == 1)

    def start_in_background(self, count: int) -> None:
        """Start ``count`` workers on a thread: the server goes on starting meanwhile."""
        self._warming = threading.Thread(target=self._warm, args=(count,), name="tool-workers-start", daemon=True)
        self._warming.start()

    def wait_started(self) -> None:
        """Wait for `start_in_background`; raises WorkerStartError if a worker could not start."""
        if self._warming is not None:
            self._warming.join()
        if self._warm_error is not None:
            raise WorkerStartError(str(self._warm_error)) from self._warm_error

    def _warm(self, count: int) -> None:
        try:
            for _ in range(count):
                self._keep(self._start_one())
        except Exception as exc:  # a call starts its own worker, and says what went wrong there
            self._warm_error = exc

    def _keep(self, worker: _Worker) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(worker)
                return
        worker.stop()

    async def call(self, name: str, arguments: dict[str, Any], client: str = "") -> Answer:
        """Run tool ``name`` for ``client`` in a worker. Raises ToolInputError for bad input, CallStopped past
        the budget, CallBusy when no worker is to be had (see CallQueue)."""
        request = pickle.dumps((name, arguments), protocol=pickle.HIGHEST_PROTOCOL)
        async with self._queue.slot(client, large=len(request) > LARGE_CALL_BYTES, tool=name):
            worker = await self._take()
            reply = None
            try:
                with anyio.move_on_after(self.settings.wall_seconds) as deadline:
                    reply = await worker.exchange(request)
            except BaseException:
                worker.stop()  # the caller stopped waiting mid-call: what the worker is doing is unknown
                raise
            if reply is not None:
                self._keep(worker)
                return _decode(name, reply)
            if deadline.cancelled_caught:
                worker.stop()
                raise CallStopped(self._stopped(name, f"ran for more than {self.settings.wall_seconds:g} s"))
            worker.channel.close()
            code = await anyio.to_thread.run_sync(worker.exit_code)  # reaped, so not stopped again
        if code == -signal.SIGPROF:
            raise CallStopped(self._stopped(name, f"used more than {self.settings.cpu_seconds:g} s of CPU time"))
        raise RuntimeError(f"the worker process answering {name} ended with exit code {code}")

    @staticmethod
    def _stopped(name: str, what: str) -> str:
        return (
            f"{name}: the call {what} and was stopped; send a smaller input, "
            "or ask the server's operator to raise --call-cpu-seconds"
        )

    async def _take(self) -> _Worker:
        warming = self._warming
        if warming is not None and warming.is_alive():
            await anyio.to_thread.run_sync(warming.join)
        while self._idle:
            worker = self._idle.pop()
            if worker.idle_and_alive():
                return worker
            worker.stop()  # ended while idle (the OOM killer, an operator): replaced below
        # Shielded: a caller cancelled while its worker starts would lose the worker with the result; this
        # way the cancellation arrives in `call`, which stops the worker.
        with anyio.CancelScope(shield=True):
            started = await anyio.to_thread.run_sync(self._start_one)
        return started

    def _start_one(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise WorkerStartError("the server is shutting down")
            if self._zygote is None or not self._zygote.alive():
                self._zygote = _Zygote(self.settings)
            zygote = self._zygote
        ours, theirs = socket.socketpair()
        try:
            pid = zygote.fork(theirs)
        except OSError as exc:
            ours.close()
            raise WorkerStartError(f"the tool worker zygote did not answer: {exc}") from None
        finally:
            theirs.close()
        worker = _Worker(pid, ours, zygote)
        ours.settimeout(START_TIMEOUT_S)
        try:
            ready = _receive(ours)
        except OSError:
            ready = None
        if ready != _READY:
            worker.stop()
            raise WorkerStartError("a tool worker process did not start")
        ours.setblocking(False)
        return worker

    def worker_pids(self) -> list[int]:
        """The process ids of the idle workers."""
        return [worker.pid for worker in self._idle]

    def close(self) -> None:
        """Stop the idle workers, any still starting, and the zygote (a running call stops its own)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            zygote, self._zygote = self._zygote, None
        for worker in idle:
            worker.stop(wait=True)
        if zygote is not None:
            zygote.close()


def _decode(name: str, reply: bytes) -> Answer:
    kind, *rest = pickle.loads(reply)
    if kind == "answer":
        return Answer(*rest)
    if kind == "refused":
        raise ToolInputError(rest[0])
    logger.error("%s failed in its worker process:\n%s", name, rest[0])
    raise RuntimeError(f"{name} failed in its worker process")


if __name__ == "__main__":
    sys.exit(_zygote_main(sys.argv[1:]))
