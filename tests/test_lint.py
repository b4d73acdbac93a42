"""The linters the project holds itself to, run as part of the suite so CI enforces them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "ruff", "check", "server", "tests", "scripts", "benchmarks", "evals"],
        [sys.executable, "-m", "ruff", "format", "--check", "server", "tests", "scripts", "benchmarks", "evals"],
        [sys.executable, "-m", "mypy"],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_linter_is_clean(command: list[str]) -> None:
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
