"""The engine oracle's cases remove the shared-memory regions they created, and only those (issue 14).

vLLM's SharedOffloadRegion keeps the CPU tier of the offloading specs in /dev/shm/vllm_offload_<engine id>.mmap
(and .mmap.<n> segments); the scheduler side of the tiering spec creates and fills it, and nothing unlinks it when
the process is killed or leaves through os._exit. A case of scripts/engine_oracle/rules.py that hung left two such
files behind holding 18 GB of RAM. These tests need no vLLM: the driver's side is plain processes and files.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType

import pytest

ORACLE_DIR = Path(__file__).resolve().parents[1] / "scripts" / "engine_oracle"


def _load(name: str) -> ModuleType:
    """A module of scripts/engine_oracle (no package), as rules.py imports its siblings: by name."""
    if str(ORACLE_DIR) not in sys.path:
        sys.path.insert(0, str(ORACLE_DIR))
    spec = importlib.util.spec_from_file_location(name, ORACLE_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def shm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in /dev/shm: the oracle's modules look there instead."""
    offload = _load("offload")
    monkeypatch.setattr(offload, "SHM_DIR", tmp_path)
    return tmp_path


def _regions(shm: Path, engine_id: str) -> list[Path]:
    paths = [shm / f"vllm_offload_{engine_id}.mmap", shm / f"vllm_offload_{engine_id}.mmap.1"]
    for path in paths:
        path.write_bytes(b"\0" * 16)
    return paths


def test_remove_shm_regions_takes_the_engines_files_and_leaves_the_others(shm: Path) -> None:
    offload = sys.modules["offload"]
    mine, theirs = _regions(shm, "0f1e-mine"), _regions(shm, "9a8b-theirs")
    unrelated = shm / "torch_12345"
    unrelated.write_bytes(b"x")
    removed = offload.remove_shm_regions({"0f1e-mine"})
    assert sorted(removed) == sorted(p.name for p in mine)
    assert not any(p.exists() for p in mine)
    assert all(p.exists() for p in theirs) and unrelated.exists()
    # An engine id that would reach outside the directory names nothing.
    assert offload.shm_region_paths("../x") == [] and offload.shm_region_paths("") == []


def test_a_killed_case_leaves_no_region_behind(shm: Path) -> None:
    """A case that announces its engine, creates its region and hangs is killed, and its region removed."""
    rules = _load("rules")
    theirs = _regions(shm, "another-helpers-engine")
    hung = textwrap.dedent(
        f"""
        import pathlib, time
        print({rules.SHM_MARK!r} + "hung-engine", flush=True)
        pathlib.Path({str(shm)!r}, "vllm_offload_hung-engine.mmap").write_bytes(b"0" * 16)
        time.sleep(600)
        """
    )
    started = time.monotonic()
    code, stdout, _ = rules.run_case_process([sys.executable, "-c", hung], env=None, timeout=3)
    assert code is None  # killed at the deadline
    assert time.monotonic() - started < 60
    assert "hung-engine" in stdout
    assert not (shm / "vllm_offload_hung-engine.mmap").exists()
    assert all(p.exists() for p in theirs)


def test_a_finished_case_that_left_its_region_has_it_removed(shm: Path) -> None:
    rules = _load("rules")
    done = textwrap.dedent(
        f"""
        import os, pathlib
        print({rules.SHM_MARK!r} + "exited-engine", flush=True)
        pathlib.Path({str(shm)!r}, "vllm_offload_exited-engine.mmap.3").write_bytes(b"0")
        os._exit(0)
        """
    )
    code, _, _ = rules.run_case_process([sys.executable, "-c", done], env=None, timeout=60)
    assert code == 0
    assert not list(shm.iterdir())
