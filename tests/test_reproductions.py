"""The failure reproductions the knowledge records (issue 28): each runs here and shows what the pitfall says.

pitfall.offload-tier-over-shm-unchecked says vLLM 0.27.x stops at start-up with OSError(14, 'Bad address')
when its CPU tier does not fit in /dev/shm: scripts/reproductions/shm_prefault.py makes SharedOffloadRegion's
calls (O_EXCL create, ftruncate, MAP_SHARED mmap, madvise MADV_POPULATE_WRITE) on a 16 MiB tmpfs it mounts
(as root, or in a user namespace), and the verifier's --reproduce re-runs it from the knowledge.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from conftest import REPO
from test_verify_knowledge import _verifier
from vllm_caching_mcp.knowledge import Knowledge, Pitfall

SCRIPT = REPO / "scripts" / "reproductions" / "shm_prefault.py"
SKIPPED = 77


def _mount_and_run(*args: str) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), "--mount", *args], capture_output=True, text=True, timeout=120)
    if done.returncode == SKIPPED:
        pytest.skip(f"this machine cannot mount a tmpfs: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_region_larger_than_the_tmpfs_fails_its_pre_fault_with_efault() -> None:
    assert _mount_and_run("--tmpfs-mib", "16", "--region-mib", "64") == "OSError(14, 'Bad address')"
    # Workers pre-faulting their own slots of every row touch every page between them: the same errno.
    assert _mount_and_run("--tmpfs-mib", "16", "--region-mib", "64", "--ranks", "2") == "OSError(14, 'Bad address')"


def test_a_region_that_fits_is_populated() -> None:
    assert _mount_and_run("--tmpfs-mib", "128", "--region-mib", "64") == "populated"
    assert _mount_and_run("--tmpfs-mib", "128", "--region-mib", "64", "--ranks", "4") == "populated"


def test_the_verifier_reruns_the_recorded_reproduction(knowledge: Knowledge) -> None:
    _verifier()
    reproduce = importlib.import_module("verifier.reproduce")
    results = {r.entry_id: r for r in reproduce.rerun(knowledge, REPO)}
    recorded = [p.id for p in knowledge.pitfalls if p.reproduction is not None]
    assert "pitfall.offload-tier-over-shm-unchecked" in recorded and sorted(results) == sorted(recorded)
    result = results["pitfall.offload-tier-over-shm-unchecked"]
    if result.status == "not_run":
        pytest.skip(result.observed)
    assert result.status == "reproduced" and result.observed == "OSError(14, 'Bad address')"


def test_the_verifier_reports_a_reproduction_that_no_longer_shows_the_failure(
    knowledge: Knowledge, tmp_path: Path
) -> None:
    _verifier()
    reproduce = importlib.import_module("verifier.reproduce")
    fits = knowledge.model_copy(
        update={
            "pitfalls": tuple(
                p.model_copy(
                    update={
                        "reproduction": p.reproduction.model_copy(update={"args": ("--mount", "--tmpfs-mib", "128")})
                    }
                )
                for p in knowledge.pitfalls
                if p.reproduction is not None
            )
        }
    )
    (result,) = reproduce.rerun(fits, REPO)
    if result.status == "not_run":
        pytest.skip(result.observed)
    assert result.status == "differs" and "got 'populated'" in result.observed


def test_a_reproduced_failure_needs_its_reproduction() -> None:
    entry = yaml.safe_load((REPO / "knowledge" / "pitfalls.yaml").read_text())["pitfalls"]
    unchecked = next(p for p in entry if p["id"] == "pitfall.offload-tier-over-shm-unchecked")
    del unchecked["reproduction"]
    with pytest.raises(ValidationError, match="failure 'reproduced' and a reproduction go together"):
        Pitfall.model_validate(unchecked)
