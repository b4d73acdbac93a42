"""A non-editable install into a fresh virtual environment finds and loads the knowledge."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from conftest import REPO


def test_wheel_install_ships_the_knowledge(fresh_install: Path, tmp_path: Path) -> None:
    env_dir = fresh_install
    python = env_dir / "bin" / "python"
    probe = (
        "import importlib.metadata, json, vllm_caching_mcp, vllm_caching_mcp.knowledge as k;"
        "kn = k.load_knowledge();"
        "print(json.dumps({'module': vllm_caching_mcp.__file__, 'dir': kn.directory,"
        " 'newest': str(kn.newest()), 'version': vllm_caching_mcp.__version__,"
        " 'installed': importlib.metadata.version('vllm-caching-mcp')}))"
    )
    out = subprocess.run([str(python), "-c", probe], check=True, capture_output=True, text=True, cwd=tmp_path)
    found = json.loads(out.stdout)
    assert found["module"].startswith(str(env_dir)), found
    assert found["dir"].startswith(str(env_dir)), found
    assert found["version"] == found["installed"]  # the wheel's metadata is read from __init__.py
    cli = env_dir / "bin" / "vllm-caching"
    answer = subprocess.run(
        [str(cli), "check-version", "--name", "--kv-offloading-size", "--version", "0.11.1"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert "available in vLLM 0.11.1" in answer.stdout
    # The README's first command, after its install step, run as a newcomer would run it.
    first = README_COMMANDS[0].split(" && ", 1)[1].split()
    assert first[0] == "vllm-caching"
    main_job = subprocess.run(
        [str(env_dir / "bin" / first[0]), *first[1:]], check=True, capture_output=True, text=True, cwd=tmp_path
    )
    assert re.search(r"\d+ changes \(\d+ entries\) between 0.22.1 and 0.23.0", main_job.stdout), main_job.stdout
    assert "--kv-offloading-backend" in main_job.stdout


README_COMMANDS = [
    block.strip().splitlines()[0] for block in (REPO / "README.md").read_text().split("```bash")[1:3] if block.strip()
]


def test_readme_starts_with_the_install_and_run_and_the_test_commands() -> None:
    assert README_COMMANDS[0].startswith("python -m pip install . && vllm-caching ")
    assert README_COMMANDS[1] == "python -m pip install -e '.[test]' && python -m pytest -q -n auto"
    ci = (REPO / ".ci" / "run").read_text()
    # CI installs, then runs exactly the README's test command.
    assert "python -m pip install -q -e '.[test]'" in ci
    assert ci.strip().splitlines()[-1] == README_COMMANDS[1].split(" && ", 1)[1]
    # CONTRIBUTING.md sets up with the same command; tests/test_contributing.py checks the others it shows.
    assert README_COMMANDS[1] in (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8").splitlines()
