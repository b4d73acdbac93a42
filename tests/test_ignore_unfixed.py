"""`--fail-on … --ignore-unfixed`: a gate that fails only on what its user can act on.

An advisory that no vLLM release fixes (GHSA-98f3-hwg4-4rf7 in the stored snapshot: every release
from 0 on, any server open to untrusted callers) is still reported with its mitigation, but with
--ignore-unfixed it does not fail the gate; an advisory that an upgrade fixes still does, and so does
every configuration finding. Run through the CLI, as CI runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_caching_mcp.advice.review_models import UNFIXED_ADVISORY_FIX, Finding, unfixed, unfixed_fix
from vllm_caching_mcp.knowledge import load_knowledge

SERVE = "vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8000\n"


def review(tmp_path: Path, version: str, *options: str, fmt: str = "json") -> tuple[int, str]:
    script = tmp_path / "serve.sh"
    script.write_text(SERVE, encoding="utf-8")
    command = [sys.executable, "-m", "vllm_caching_mcp.cli", "review", "--version", version, "--format", fmt]
    done = subprocess.run([*command, *options, str(script)], capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, done.stdout


def test_an_unfixed_advisory_is_reported_but_left_out_of_the_gate(tmp_path: Path) -> None:
    status, out = review(tmp_path, "0.33.0", "--fail-on", "warning")
    findings = [Finding.model_validate(f) for f in json.loads(out)["findings"]]
    assert findings and all(unfixed(f) for f in findings), [f.rule_id for f in findings]
    assert status == 1
    status, out = review(tmp_path, "0.33.0", "--fail-on", "warning", "--ignore-unfixed")
    assert status == 0
    assert [f["fix"] for f in json.loads(out)["findings"]] == [f.fix for f in findings]  # still there
    # GHSA-98f3-hwg4-4rf7's mitigation in the knowledge, in place of an upgrade
    [advisory] = [a for a in load_knowledge().advisories.advisories if a.id == "GHSA-98f3-hwg4-4rf7"]
    assert advisory.mitigation and [f.fix for f in findings] == [unfixed_fix(advisory.mitigation)]
    status, page = review(tmp_path, "0.33.0", "--fail-on", "warning", "--ignore-unfixed", fmt="markdown")
    assert "passes --fail-on warning --ignore-unfixed" in page.splitlines()[0] and page.startswith("✅")


def test_an_advisory_an_upgrade_fixes_still_fails_the_gate(tmp_path: Path) -> None:
    status, out = review(tmp_path, "0.20.0", "--fail-on", "error", "--ignore-unfixed")
    findings = [Finding.model_validate(f) for f in json.loads(out)["findings"]]
    fixable = [f for f in findings if f.severity == "error" and not unfixed(f)]
    assert fixable and all(f.fix.startswith("Upgrade vLLM to") for f in fixable)
    assert status == 1


@pytest.mark.parametrize("rule_id", ["pitfall.offload-tier-over-shm", "advisory.GHSA-98f3-hwg4-4rf7"])
def test_only_an_advisory_with_the_unfixed_mark_counts_as_unfixed(rule_id: str) -> None:
    base = {"severity": "error", "title": "t", "message": "m", "location": {"file": "f"}, "workload": "w"}
    finding = Finding.model_validate(
        base | {"rule_id": rule_id, "fix": UNFIXED_ADVISORY_FIX, "why": "y", "sources": []}
    )
    assert unfixed(finding) == rule_id.startswith("advisory.")
    assert not unfixed(finding.model_copy(update={"fix": "Upgrade vLLM to 0.34.0 or later."}))
    assert unfixed(finding.model_copy(update={"fix": unfixed_fix("Reject list prompts at the proxy.")})) == (
        rule_id.startswith("advisory.")
    )
