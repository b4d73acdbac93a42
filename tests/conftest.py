"""Shared fixtures: the real knowledge, a server process on a free loopback port, a fresh install;
and a command's main() run in this process, where the process itself is not what a test asks about."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import importlib.util
import io
import os
import shutil
import socket
import struct
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import venv
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest

from vllm_caching_mcp.advice.model_config import from_knowledge
from vllm_caching_mcp.advice.sizing import SizeOffloadRequest, SizeOffloadResult, _Model, size_offload
from vllm_caching_mcp.knowledge import Knowledge, load_knowledge
from vllm_caching_mcp.knowledge_files import knowledge_dir
from vllm_caching_mcp.versions import Version

REPO = Path(__file__).resolve().parents[1]

# Nothing the suite runs (the knowledge start-up cache, the HTTP clients' caches, servers spawned as
# subprocesses) writes into the real user cache: it all goes to one throwaway directory.
_CACHE = tempfile.mkdtemp(prefix="vllm-caching-mcp-tests-")
os.environ["XDG_CACHE_HOME"] = _CACHE
os.environ.pop("VLLM_CACHING_MCP_CACHE_DIR", None)
# The stand-in servers are on loopback; a proxy or CA bundle set for the machine must not reroute
# or distrust them (tests that want a proxy set one themselves).
for _name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR"):
    os.environ.pop(_name, None)
    os.environ.pop(_name.lower(), None)
# No test asks the real Hugging Face Hub, nor sends a token the machine has: a model named by Hub id goes to a
# closed loopback port unless a test points HF_ENDPOINT at its stand-in (tests/hub_standin.py).
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
os.environ["HF_HOME"] = os.path.join(_CACHE, "huggingface")
for _name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE"):
    os.environ.pop(_name, None)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """The server runs on asyncio; anyio's own fixture would also run every async test on trio when
    trio happens to be installed, whatever its version."""
    return "asyncio"


@pytest.fixture(scope="session")
def knowledge() -> Knowledge:
    return load_knowledge()


def size_offload_of(knowledge: Knowledge, **fields: object) -> SizeOffloadResult:
    """size_offload for a request written as keyword fields; vLLM 0.33.0 unless `version` is given."""
    fields.setdefault("version", "0.33.0")
    return size_offload(SizeOffloadRequest.model_validate(fields), knowledge)


def sizing_model(knowledge: Knowledge, model: str, gpu: str = "gpu.h100-sxm", version: str = "0.33.0") -> _Model:
    """What size_offload's steps take as the model: a knowledge entry's layout on a GPU in a release."""
    entry = knowledge.find_model(model)
    assert entry is not None
    found = knowledge.hardware.find_gpu(gpu)
    assert found is not None
    return _Model(arch=from_knowledge(entry), gpu=found, version=Version(version), hma=True)


def exact_budget(**fields: object) -> dict[str, object]:
    """A request whose per-rank KV budget is exactly gpu_memory_gib."""
    return {"gpu_memory_utilization": 1.0, "weights_gib_per_gpu": 0, "activation_reserve_gib": 0, **fields}


@pytest.fixture
def knowledge_copy(tmp_path: Path) -> Path:
    """A writable copy of the real knowledge files, for tests that break one."""
    target = tmp_path / "knowledge"
    shutil.copytree(knowledge_dir(), target, ignore=shutil.ignore_patterns("templates", "*.md"))
    return target


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclasses.dataclass(frozen=True)
class Ran:
    """What a command did: its exit status and what it printed (as subprocess.CompletedProcess has them)."""

    returncode: int
    stdout: str
    stderr: str


def run_in_process(main: Callable[[list[str]], int], *args: str) -> Ran:
    """``main(args)`` run as its console script runs it, but in this process: a second interpreter
    costs the suite most of a second each time. For tests of what a command says and does; the ones
    about the process itself (that it starts, how it exits) start one."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exited:  # argparse's refusals, and `raise SystemExit("message")`
            if isinstance(exited.code, str):
                print(exited.code, file=sys.stderr)
            code = 1 if isinstance(exited.code, str) else (exited.code or 0)
    return Ran(code, out.getvalue(), err.getvalue())


def script_main(script: Path) -> Callable[[list[str]], int]:
    """The ``main`` of one of the repository's scripts, loaded from its file (scripts/ is no package); its
    directory goes on the import path, as ``python scripts/X.py`` puts it, for the packages it imports."""
    if str(script.parent) not in sys.path:
        sys.path.insert(0, str(script.parent))
    spec = importlib.util.spec_from_file_location(f"script_{script.stem}", script)
    assert spec is not None and spec.loader is not None, script
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # where dataclasses and pickle look a class's module up
    spec.loader.exec_module(module)
    main: Callable[[list[str]], int] = module.main
    return main


def server_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "vllm_caching_mcp.mcp_server", *args]


def _start_server(
    args: tuple[str, ...], env: dict[str, str] | None, err: IO[bytes]
) -> tuple[subprocess.Popen[bytes], int]:
    """The real server on a free loopback port, once it answers /healthz.

    The port is free when chosen but is not held, so another test worker may bind it first; the server
    then exits saying so, and another port is tried.
    """
    for _ in range(5):
        port = free_port()
        mark = err.tell()
        proc = subprocess.Popen(
            server_command("--transport", "streamable-http", "--port", str(port), *args),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, **(env or {})},
        )
        deadline = time.monotonic() + 30
        while proc.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5).status_code == 200:
                    return proc, port
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError("server did not answer /healthz within 30 s")
            time.sleep(0.1)
        err.flush()
        with open(err.name, "rb") as written:
            written.seek(mark)
            said = written.read().decode(errors="replace")
        if "Address already in use" not in said:
            raise AssertionError(said)
    raise AssertionError("no free loopback port after 5 tries")


@contextlib.contextmanager
def running_server(*args: str, env: dict[str, str] | None = None, log: Path) -> Iterator[str]:
    """The real server on a free loopback port with ``args``; yields its base URL; stderr goes to ``log``."""
    with log.open("wb") as err:
        proc, port = _start_server(args, env, err)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="session")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real server over streamable HTTP on 127.0.0.1, shared by the session; yields its endpoint URL."""
    with running_server(log=tmp_path_factory.mktemp("http-server") / "server.log") as url:
        yield f"{url}/mcp"


@contextlib.contextmanager
def run_wide(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """A directory for this test run, held under a lock while the caller looks into it: under
    pytest-xdist the workers' base directories share a parent, so what one worker builds there the
    others find; run without xdist, it is a directory of this session's own."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        yield tmp_path_factory.mktemp(name)
        return
    directory = tmp_path_factory.getbasetemp().parent / name
    directory.mkdir(exist_ok=True)
    with (directory.parent / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield directory


@pytest.fixture(scope="session")
def fresh_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment holding a non-editable install of this checkout, built once a test
    run (the xdist workers share it: they only run what it installed).

    The dependencies (and the build backend, and pip) come from the test runner's own site-packages,
    added as plain paths so nothing is downloaded; a plain path does not run the .pth files in it, so
    the editable install of this checkout stays invisible and only the wheel built here can be imported.
    """
    with run_wide(tmp_path_factory, "fresh-install") as root:
        env_dir = root / "venv"
        if not (root / "installed").exists():
            for half_built in (root / "src", env_dir):  # a worker before this one failed to build it
                shutil.rmtree(half_built, ignore_errors=True)
            _install_fresh(root / "src", env_dir)
            (root / "installed").touch()
    return env_dir


def _install_fresh(source: Path, env_dir: Path) -> None:
    for part in ("server", "knowledge", "pyproject.toml", "README.md"):
        item = REPO / part
        if item.is_dir():
            shutil.copytree(item, source / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(item, source / part)
    venv.create(env_dir, with_pip=False)  # pip comes from the runner's site-packages: ensurepip costs seconds
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    outer = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "test-runner-deps.pth").write_text("\n".join(sorted(outer)) + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", str(source)],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def resetting_server() -> Iterator[str]:
    """Accepts each connection and resets it (RST, not FIN) at once."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.05)  # how often the loop looks at `stop`: the teardown waits this long
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(timeout=2)
    listener.close()
