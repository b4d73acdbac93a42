"""scripts/check_sources.py against a small extracted-wheel tree built here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO

SCRIPT = REPO / "scripts" / "check_sources.py"


def test_reports_missing_files_lines_and_wheels(tmp_path: Path) -> None:
    knowledge = tmp_path / "knowledge"
    knowledge.mkdir()
    (knowledge / "flags.yaml").write_text(
        "settings:\n"
        "  - sources:\n"
        "      - wheel:vllm==0.33.0:vllm/config/cache.py:3\n"
        "      - wheel:vllm==0.33.0:vllm/config/cache.py:2-40\n"
        "      - wheel:vllm==0.33.0:vllm/config/gone.py\n"
        "      - wheel:vllm==0.32.0:vllm/config/cache.py\n"
    )
    src = tmp_path / "src"
    (src / "vllm-0.33.0" / "vllm" / "config").mkdir(parents=True)
    (src / "vllm-0.33.0" / "vllm" / "config" / "cache.py").write_text("a = 1\nb = 2\nc = 3\n")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--src-dir", str(src), "--knowledge", str(knowledge)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert any("cache.py:40: the file has only 3 lines" in line for line in lines)
    assert any("gone.py: the wheel has no such file" in line for line in lines)
    assert any("vllm==0.32.0" in line and "no extracted wheel" in line for line in lines)
    assert lines[-1] == "4 wheel sources checked, 3 do not resolve"
