"""Re-run the reproductions the knowledge records for failure modes (``reproduction`` on a pitfall).

A pitfall whose ``failure`` is ``reproduced`` names a script under scripts/reproductions/ and the one
line it printed when the failure happened; this runs the script again on this machine and compares.
A script that cannot run here (no way to mount a tmpfs, say) exits 77 and is reported as not run.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from vllm_caching_mcp.knowledge import Knowledge

SKIPPED = 77


@dataclass(frozen=True)
class Rerun:
    entry_id: str
    status: str  # reproduced | differs | not_run
    observed: str

    def line(self) -> str:
        return f"{self.status.upper().replace('_', ' ')} {self.entry_id}: {self.observed}"


def rerun(knowledge: Knowledge, repo: Path, timeout: float = 120) -> list[Rerun]:
    """Every recorded reproduction, run again: what it printed against what the knowledge expects."""
    results: list[Rerun] = []
    for pitfall in knowledge.pitfalls:
        r = pitfall.reproduction
        if r is None:
            continue
        done = subprocess.run(
            [sys.executable, str(repo / r.script), *r.args], capture_output=True, text=True, timeout=timeout
        )
        printed = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        if done.returncode == SKIPPED:
            results.append(Rerun(pitfall.id, "not_run", done.stderr.strip() or f"needs {r.needs}"))
        elif done.returncode == 0 and printed == r.expect:
            results.append(Rerun(pitfall.id, "reproduced", printed))
        else:
            got = printed or done.stderr.strip()[-300:] or f"exit status {done.returncode}"
            results.append(Rerun(pitfall.id, "differs", f"expected {r.expect!r}, got {got!r}"))
    return results
