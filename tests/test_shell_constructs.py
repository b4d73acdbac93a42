"""Shell that bash runs like a plain `vllm serve` line is reviewed like one; what the review cannot follow
fails closed.

An attack run found five ways to write a launch that bash runs exactly like a line the review calls
an error, each reviewed clean under `--allow-empty --fail-on error` (how the hook and the Action
run): ANSI-C quoting of a value, of a flag (the flag silently dropped) and of the command itself, a
subshell `( … )`, a group `{ …; }`, and a Deployment of the vLLM image running `sh -c "( … )"`.
Each now gives the plain line's configuration findings. A launch the readers still cannot follow
(a command read from a file at run time, one Python starts) is "NOT REVIEWED" with its line, and a gate fails
on it: never an empty clean review of a file that starts vLLM.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_caching_mcp.advice.deployment.shell import _ansi_c_quoted, tokenize_shell
from vllm_caching_mcp.tools import run_tool

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
PLAIN = f"vllm serve {MODEL} --kv-offloading-size 1600 --kv-offloading-backend native"


def configuration_findings(name: str, text: str) -> list[tuple[str, str]]:
    result = run_tool("review_deployment", {"documents": [{"name": name, "text": text}], "version": "0.20.2"})
    data = result.model_dump(mode="json")
    assert not data["not_reviewed"], data["not_reviewed"]
    return sorted((f["rule_id"], f["severity"]) for f in data["findings"] if not f["rule_id"].startswith("advisory."))


def manifest(command: str) -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm}}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.20.2
        command: ["sh", "-c", {json.dumps(command)}]
"""


SAME_AS_PLAIN = {
    "ANSI-C quoted value": f"vllm serve {MODEL} --kv-offloading-size $'1600' --kv-offloading-backend native",
    "ANSI-C quoted flag": f"vllm serve {MODEL} $'--kv-offloading-size' 1600 --kv-offloading-backend native",
    "ANSI-C escapes in a flag": f"vllm serve {MODEL} $'--kv\\x2doffloading-size' 1600 --kv-offloading-backend native",
    "ANSI-C quoted command": f"$'vllm' serve {MODEL} --kv-offloading-size 1600 --kv-offloading-backend native",
    "locale-quoted value": f'vllm serve {MODEL} --kv-offloading-size $"1600" --kv-offloading-backend native',
    "subshell": f"( {PLAIN} )",
    "subshell without spaces": f"({PLAIN})",
    "group": f"{{ {PLAIN}; }}",
    "subshell in a script": f"#!/bin/bash\nset -e\n(\n  {PLAIN} \\\n    --port 8000\n) &\nwait\n",
    "function body": f"start() {{\n  {PLAIN}\n}}\nstart\n",
}


@pytest.mark.parametrize("case", SAME_AS_PLAIN, ids=list(SAME_AS_PLAIN))
def test_what_bash_runs_like_the_plain_line_is_reviewed_like_it(case: str) -> None:
    expected = configuration_findings("serve.sh", PLAIN)
    assert ("pitfall.hma-flag-missing-with-shorthand", "error") in expected
    assert configuration_findings("serve.sh", SAME_AS_PLAIN[case]) == expected


def test_a_vllm_image_running_a_subshell_is_reviewed_like_the_plain_line() -> None:
    expected = configuration_findings("plain.yaml", manifest(PLAIN))
    assert ("pitfall.hma-flag-missing-with-shorthand", "error") in expected
    assert configuration_findings("deploy.yaml", manifest(f"( {PLAIN} )")) == expected
    assert configuration_findings("deploy.yaml", manifest(f"{{ {PLAIN}; }}")) == expected


@pytest.mark.parametrize(
    ("quoted", "value"),
    [
        ("$'plain'", "plain"),
        ("$'a\\nb\\tc'", "a\nb\tc"),
        ("$'it\\'s'", "it's"),
        ("$'\\x41\\101\\u00e9\\U0001F600'", "AAé😀"),
        ("$'\\cA'", "\x01"),
        ("$'\\q'", "\\q"),
        ("$'unterminated", "unterminated"),
    ],
)
def test_ansi_c_quoting_is_decoded_as_bash_decodes_it(quoted: str, value: str) -> None:
    assert _ansi_c_quoted(quoted, 0) == (value, len(quoted))


def test_bash_agrees_with_the_ansi_c_decoding() -> None:
    word = "$'--kv\\x2doffloading-size' $'a\\tb' $'\\101' ($'x')"
    out = subprocess.run(["bash", "-c", f"printf '%s\\n' {word}"], capture_output=True, text=True, check=False)
    if out.returncode != 0:  # bash rejects a bare '(' here; the words it would print are the same
        out = subprocess.run(
            ["bash", "-c", "printf '%s\\n' $'--kv\\x2doffloading-size' $'a\\tb' $'\\101' $'x'"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    words = [t.text for t in tokenize_shell(word) if not t.separator and t.text != "("]
    assert words == out.stdout.splitlines()


NOT_READABLE = {
    "started from Python": "#!/bin/sh\npython3 -c 'import subprocess; "
    'subprocess.run(["vllm", "serve", "m", "--kv-offloading-size", "1600"])\'\n',
}


@pytest.mark.parametrize("case", NOT_READABLE, ids=list(NOT_READABLE))
def test_a_launch_the_review_cannot_follow_is_not_reviewed_and_fails_the_gate(case: str, tmp_path: Path) -> None:
    script = tmp_path / "start.sh"
    script.write_text(NOT_READABLE[case])
    run = [sys.executable, "-m", "vllm_caching_mcp.cli", "review", "--allow-empty", "--fail-on", "error"]
    text = subprocess.run([*run, "--", str(script)], capture_output=True, text=True, check=False)
    assert text.returncode == 1, text.stdout + text.stderr
    assert text.stdout.startswith(f"NOT REVIEWED {script}:"), text.stdout
    assert "nothing in it was checked" in text.stdout
    sarif = subprocess.run([*run, "--format", "sarif", "--", str(script)], capture_output=True, text=True, check=False)
    assert sarif.returncode == 1
    [result] = json.loads(sarif.stdout)["runs"][0]["results"]
    assert result["ruleId"] == "review.launch-not-read" and result["level"] == "error"
    never = subprocess.run([*run[:-2], "--fail-on", "never", "--", str(script)], capture_output=True, text=True)
    assert never.returncode == 0


def test_a_file_that_only_mentions_vllm_in_comments_stays_an_empty_clean_review(tmp_path: Path) -> None:
    script = tmp_path / "notes.sh"
    script.write_text("#!/bin/sh\n# run vllm serve by hand first\necho ready\n")
    run = [sys.executable, "-m", "vllm_caching_mcp.cli", "review", "--allow-empty", "--fail-on", "error"]
    text = subprocess.run([*run, "--", str(script)], capture_output=True, text=True, check=False)
    assert text.returncode == 0 and "NOT REVIEWED" not in text.stdout, text.stdout + text.stderr


NAMES_ONLY = {
    "a stop script": '#!/bin/sh\npkill -f "vllm serve" || true\nsudo killall -q "vllm serve"\n',
    "a status script": '#!/bin/sh\nps aux | grep "vllm serve" | grep -v grep\npgrep -af vllm.entrypoints.openai\n',
    "a print of how to start it": '#!/bin/sh\necho "start it with: vllm serve m"\nlogger "vllm serve is down"\n',
}


@pytest.mark.parametrize("case", NAMES_ONLY, ids=list(NAMES_ONLY))
def test_a_script_that_only_stops_finds_or_prints_vllm_is_not_an_unread_launch(case: str, tmp_path: Path) -> None:
    """Found on public deployment scripts: a stop or status script naming `vllm serve` to pkill or grep it was
    NOT REVIEWED and failed every commit; it starts nothing, so there is nothing to review."""
    script = tmp_path / "ops.sh"
    script.write_text(NAMES_ONLY[case])
    run = [sys.executable, "-m", "vllm_caching_mcp.cli", "review", "--allow-empty", "--fail-on", "error"]
    out = subprocess.run([*run, "--", str(script)], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and "NOT REVIEWED" not in out.stdout, out.stdout + out.stderr
