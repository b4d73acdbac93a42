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


# A function that does not fit on two screens is two functions (CONTRIBUTING.md).
LONGEST_FUNCTION = 150


def test_no_function_is_longer_than_two_screens() -> None:
    import ast

    too_long = []
    for path in sorted([*(REPO / "server").rglob("*.py"), *(REPO / "scripts").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > LONGEST_FUNCTION:
                    too_long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    assert too_long == [], f"split these into functions of at most {LONGEST_FUNCTION} lines: {too_long}"
