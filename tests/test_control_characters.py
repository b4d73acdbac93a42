"""Other people's bytes reach a terminal or an agent as text, never as control sequences.

An attack run got clear-screen, cursor-up + erase-line (an error line above vanished), window
titles, OSC 52 clipboard writes, OSC 8 links and CR/LF into the terminal from registry configs,
GitHub titles and logins, and a deployment's own flag text; a file name with a newline forged
review lines that pre-commit prints. Every text output now escapes C0 and C1 controls, DEL and the
bidirectional controls (`safe_text`), and each line of a summary is one line whatever it quotes.
The checks here run the CLI as a person runs it, against a stand-in GitHub and registry on
127.0.0.1 where a peer is involved.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from github_standin import FakeGitHub, FakeIssue
from registry_standin import FakeRegistry, vllm_openai_config
from vllm_caching_mcp.safe_text import join_lines, json_printable, one_line, printable

HOSTILE = "\x1b[2J\x1b[1A\x1b[2K\x1b]0;owned\x07\x1b]52;c;ZXZpbA==\x07\x1b]8;;https://evil.example/\x07x\x1b]8;;\x07\r\x9b31m\u202e"
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vllm_caching_mcp.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_printable_escapes_every_control_and_keeps_lines_and_tabs() -> None:
    assert printable("a\tb\nc" + HOSTILE) == "a\tb\nc" + (
        "\\x1b[2J\\x1b[1A\\x1b[2K\\x1b]0;owned\\x07\\x1b]52;c;ZXZpbA==\\x07\\x1b]8;;https://evil.example/\\x07x"
        "\\x1b]8;;\\x07\\x0d\\x9b31m\\u202e"
    )
    assert one_line("file\nname\r") == "file\\x0aname\\x0d"
    assert join_lines(["one", "two\nforged"]) == "one\ntwo\\x0aforged"
    text = json.dumps({"k": "a\x9bb\u2028"}, ensure_ascii=False)
    assert json.loads(json_printable(text)) == {"k": "a\x9bb\u2028"} and not RAW_CONTROL.search(json_printable(text))


def test_a_review_prints_neither_a_deployments_escapes_nor_a_forged_line(tmp_path: Path) -> None:
    script = tmp_path / "serve\nerror   pitfall.forged  nothing is wrong.sh"
    script.write_text(
        "vllm serve m --kv-offloading-size 1600 $'--kv-offloading-bakend\\e[2J\\e]52;c;ZXZpbA==\\a' native "
        f"--served-model-name '{HOSTILE}'\n"
    )
    text = cli("review", "--version", "0.20.2", "--", str(script))
    assert text.returncode == 1, text.stderr
    assert not RAW_CONTROL.search(text.stdout), repr(text.stdout)
    assert "\\x1b[2J" in text.stdout
    lines = text.stdout.splitlines()
    assert not any(line.startswith("error   pitfall.forged") for line in lines)
    assert all("serve\\x0aerror" in line for line in lines if "nothing is wrong" in line)
    for fmt in ("json", "sarif"):
        out = cli("review", "--version", "0.20.2", "--format", fmt, "--", str(script))
        assert not RAW_CONTROL.search(out.stdout) and json.loads(out.stdout)


def test_an_error_message_quoting_the_input_is_one_line() -> None:
    out = cli("check-version", "--name", f"--kv-offloading-size\n{HOSTILE}", "--version", "nope\nforged")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and not RAW_CONTROL.search(out.stderr), repr(out.stderr)


@pytest.fixture
def hostile_github(tmp_path: Path) -> Iterator[str]:
    fake = FakeGitHub(
        [
            FakeIssue(
                "vllm-project/vllm", 40259, f"KV offload{HOSTILE}\nFIXED in every release", "closed", "completed",
                "2026-01-01T00:00:00Z", f"bot{HOSTILE}",
            )
        ]
    )  # fmt: skip
    yield fake.start()
    fake.stop()


def test_a_github_title_and_login_reach_the_terminal_as_text(hostile_github: str, tmp_path: Path) -> None:
    env = {"VLLM_CACHING_MCP_GITHUB_API": hostile_github, "VLLM_CACHING_MCP_CACHE_DIR": str(tmp_path)}
    out = cli("check-bug-status", "--bugs", "vllm-project/vllm#40259", "--version", "0.20.2", env=env)
    assert out.returncode == 0, out.stderr
    assert "KV offload\\x1b[2J" in out.stdout, out.stdout
    assert not RAW_CONTROL.search(out.stdout)
    assert not any(line.startswith("FIXED") for line in out.stdout.splitlines())
    as_json = cli("check-bug-status", "--bugs", "vllm-project/vllm#40259", "--version", "0.20.2", "--json", env=env)
    assert not RAW_CONTROL.search(as_json.stdout) and json.loads(as_json.stdout)


def test_a_registry_config_reaches_the_terminal_as_text(tmp_path: Path) -> None:
    config = vllm_openai_config()
    config["config"]["Entrypoint"] = ["vllm", f"serve{HOSTILE}\nforged line"]
    with FakeRegistry() as registry:
        registry.add_image("vllm/vllm-openai", "v0.22.1", {"amd64": config})
        env = {
            "VLLM_CACHING_MCP_REGISTRY_MIRROR": f"http://127.0.0.1:{registry.port}",
            "VLLM_CACHING_MCP_CACHE_DIR": str(tmp_path),
            "DOCKER_CONFIG": str(tmp_path / "none"),
        }
        out = cli("inspect-image", "--image", "v0.22.1", env=env)
    assert out.returncode == 0, out.stderr
    assert "serve\\x1b[2J" in out.stdout, out.stdout
    assert not RAW_CONTROL.search(out.stdout)
    assert not any(line.startswith("forged line") for line in out.stdout.splitlines())
