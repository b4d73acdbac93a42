"""The answer-quality eval runs in CI and must score 100 %; its runner must also catch a wrong answer."""

from __future__ import annotations

from pathlib import Path

import yaml

from conftest import REPO, Ran, run_in_process, script_main

RUNNER = REPO / "evals" / "run_eval.py"
QUESTIONS = REPO / "evals" / "questions.yaml"


def run_eval(*args: str) -> Ran:
    """The runner, run in this process; it starts its own server over stdio and asks it every question."""
    return run_in_process(script_main(RUNNER), *args)


def test_the_eval_covers_every_tool_with_sixty_questions_or_more() -> None:
    from vllm_caching_mcp.tools import TOOL_NAMES

    questions = yaml.safe_load(QUESTIONS.read_text(encoding="utf-8"))["questions"]
    assert len(questions) >= 60
    assert {q["tool"] for q in questions} == set(TOOL_NAMES)
    for q in questions:
        assert q["question"] and q["checked"], q["id"]
        assert all(call["tool"] in TOOL_NAMES for call in q["calls"]), q["id"]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert f"scores {len(questions)} operator questions" in readme, "README states another count of questions"


def test_every_question_passes_through_the_mcp_client() -> None:
    out = run_eval()
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    last = out.stdout.strip().splitlines()[-1]
    passed, failed = int(last.split()[0]), int(last.split()[2])
    assert failed == 0 and passed >= 60, last
    assert "100.0 %" in out.stdout


def test_a_wrong_expectation_fails_and_says_why(tmp_path: Path) -> None:
    # On 0.20.2 OffloadingConnector has no SupportsHMA (offloading_connector.py:44); expecting "yes" is wrong.
    bad = {
        "questions": [
            {
                "id": "wrong",
                "tool": "check_version",
                "question": "HMA on 0.20.2?",
                "checked": "deliberately wrong",
                "calls": [{"tool": "check_version", "arguments": {"name": "OffloadingConnector", "version": "0.20.2"}}],
                "expect": [
                    {"path": "matches[0].hma_support", "equals": "yes"},
                    {"path": "matches[0].no_such_field", "equals": 1},
                ],
            }
        ]
    }
    path = tmp_path / "questions.yaml"
    path.write_text(yaml.safe_dump(bad), encoding="utf-8")
    out = run_eval("--questions", str(path))
    assert out.returncode == 1
    assert "matches[0].hma_support: expected equals 'yes', got 'no'" in out.stdout
    assert "no field 'no_such_field'" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "0 passed, 1 failed"
