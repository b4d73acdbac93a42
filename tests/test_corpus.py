"""review_deployment over the corpus of deployment files in tests/data/deployments/.

Each ``<name>.expect.yaml`` says what the review of its file must and must not find: ``must``
(rule id and, where it matters, line), ``must_not`` (rule id, optionally at a line), ``notes``
(text the notes must contain: values the files do not settle, images whose release is unknown),
``connectors`` (KV connectors the workloads run), ``readable: true`` (no "no vLLM server" note).
``file`` names the reviewed file when it is not ``<name>.*``; ``with`` gives the other documents
of the same call (document name → file), such as the `.env` beside a compose file. An expectation
marked ``pending: <why>`` is the correct behaviour of a rule or reader not landed yet: it xfails
with that reason, and passes the day it lands (then the mark is taken off).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reading import review
from vllm_caching_mcp.advice.review import ReviewResult

CORPUS = Path(__file__).parent / "data" / "deployments"
EXPECTATIONS = sorted(CORPUS.glob("*.expect.yaml"))


def reviewed_file(expect_path: Path, expect: dict[str, Any]) -> Path:
    if "file" in expect:
        return CORPUS / expect["file"]
    stem = expect_path.name.removesuffix(".expect.yaml")
    [found] = [p for p in CORPUS.iterdir() if p.name.startswith(stem + ".") and not p.name.endswith(".expect.yaml")]
    return found


def reviewed(expect_path: Path) -> tuple[dict[str, Any], ReviewResult]:
    """The expectation and the review (judged on every finding) of the files it names."""
    expect = yaml.safe_load(expect_path.read_text(encoding="utf-8"))
    main = reviewed_file(expect_path, expect)
    documents = [(main.name, main.read_text(encoding="utf-8"))]
    for name, file in (expect.get("with") or {}).items():
        documents.append((name, (CORPUS / file).read_text(encoding="utf-8")))
    stated = {"version": expect["version"]} if "version" in expect else {}
    return expect, review(*documents, **stated)


def test_the_corpus_has_at_least_thirty_files() -> None:
    assert len(EXPECTATIONS) >= 30


def found_at(result: ReviewResult, rule: str, line: int | None) -> bool:
    return any(f.rule_id == rule and (line is None or f.location.line == line) for f in result.findings)


@pytest.mark.parametrize("expect_path", EXPECTATIONS, ids=lambda p: p.name.removesuffix(".expect.yaml"))
def test_the_review_finds_what_the_corpus_expects(expect_path: Path) -> None:
    expect, result = reviewed(expect_path)
    shown = [(f.rule_id, f.location.line) for f in result.findings if not f.rule_id.startswith("advisory.")]
    pending: list[str] = []

    def check(ok: bool, what: str, entry: dict[str, Any]) -> None:
        if ok:
            return
        if entry.get("pending"):
            pending.append(f"{what} (pending: {entry['pending']})")
            return
        pytest.fail(f"{expect_path.name}: {what}; findings {shown}; notes {result.notes}")

    if expect.get("readable"):
        unread = [n for n in result.notes if "no vLLM server found" in n or "is no manifest" in n]
        main = reviewed_file(expect_path, expect).name
        assert not [n for n in unread if n.startswith(main)], unread
    for entry in expect.get("must") or []:
        check(
            found_at(result, entry["rule"], entry.get("line")), f"{entry['rule']} at {entry.get('line')} missing", entry
        )
    for entry in expect.get("must_not") or []:
        check(not found_at(result, entry["rule"], entry.get("line")), f"{entry['rule']} should not fire", entry)
    for text in expect.get("notes") or []:
        assert any(text in n for n in result.notes), f"{expect_path.name}: no note with {text!r}: {result.notes}"
    connectors = expect.get("connectors")
    if connectors:
        running = {c for w in result.workloads for c in w.connectors}
        check(set(connectors["names"]) <= running, f"connectors {connectors['names']} not in {running}", connectors)
    if pending:
        pytest.xfail("; ".join(pending))
