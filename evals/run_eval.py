"""Answer-quality eval: operators' questions, the tool calls an agent should make, and facts to check.

Starts ONE server process over stdio, drives it with the official MCP client, makes every call listed in
``questions.yaml`` and checks each expected fact against the structured result. Prints one line per
failed fact, a per-tool and total score, and finally ``N passed, M failed`` (questions). Exit status 0
only when every question passes.

Selectors are JSON-path-like: ``matches[0].status``, ``findings[*].rule_id`` (a list of every element's
field), ``findings[rule_id=pitfall.x].severity`` (the first element whose field equals the value),
``findings[rule_id^=pitfall.].rule_id`` (every element whose field starts with the text, as a list),
``files[0].content``. A leading ``$.`` is optional. Checks, one per fact:

- ``equals: V``         the selected value is V (numbers compared exactly)
- ``approx: V`` with optional ``rel`` (default 1e-3): a number within that relative distance of V
- ``contains: V``       a list holding V, or a string holding the substring V
- ``not_contains: V``   the opposite
- ``length: N``         a list or string of length N
- ``error_contains: S`` the call must fail as a tool error whose message holds S (no ``path``)

Bug-status calls should pass ``offline: true``: the runner points the server at an empty cache directory,
so their answers come from the stored snapshot in the knowledge and do not depend on the network.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from vllm_caching_mcp.tools import with_defaults

HERE = Path(__file__).resolve().parent
_MISSING = object()
_SEGMENT = re.compile(r"^(?P<key>[^\[\]]*)(?P<rest>(\[[^\]]*\])*)$")
_CHECKS = ("equals", "approx", "contains", "not_contains", "length", "error_contains")


class SelectorError(ValueError):
    """The selector does not lead anywhere in the result."""


def select(data: Any, selector: str) -> Any:
    """The value at ``selector`` in ``data``; raises SelectorError with the segment that failed."""
    path = selector.removeprefix("$").removeprefix(".")
    current: list[Any] = [data]
    spread = False
    for segment in _split(path):
        match = _SEGMENT.match(segment)
        if match is None:
            raise SelectorError(f"bad segment {segment!r}")
        key, rest = match["key"], match["rest"]
        if key:
            current = [_child(item, key, selector) for item in current]
        for index in re.findall(r"\[([^\]]*)\]", rest):
            if index == "*":
                spread = True
                current = [element for item in current for element in _as_list(item, selector)]
            elif "^=" in index:
                spread = True
                name, prefix = index.split("^=", 1)
                current = [
                    element
                    for item in current
                    for element in _as_list(item, selector)
                    if isinstance(element, dict) and str(element.get(name)).startswith(prefix)
                ]
            elif "=" in index:
                name, wanted = index.split("=", 1)
                current = [_first_where(_as_list(item, selector), name, wanted, selector) for item in current]
            else:
                current = [_index(_as_list(item, selector), int(index), selector) for item in current]
    return current if spread else current[0]


def _split(path: str) -> list[str]:
    """Split on dots outside brackets, so ``[rule_id=pitfall.x]`` stays whole."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(path):
        depth += char == "["
        depth -= char == "]"
        if char == "." and depth == 0:
            parts.append(path[start:i])
            start = i + 1
    parts.append(path[start:])
    return [p for p in parts if p]


def _child(item: Any, key: str, selector: str) -> Any:
    if not isinstance(item, dict) or key not in item:
        raise SelectorError(f"{selector}: no field {key!r}")
    return item[key]


def _as_list(item: Any, selector: str) -> list[Any]:
    if not isinstance(item, list):
        raise SelectorError(f"{selector}: not a list where an index was given")
    return item


def _index(items: list[Any], index: int, selector: str) -> Any:
    if not -len(items) <= index < len(items):
        raise SelectorError(f"{selector}: index {index} out of range (length {len(items)})")
    return items[index]


def _first_where(items: list[Any], name: str, wanted: str, selector: str) -> Any:
    for element in items:
        if isinstance(element, dict) and str(element.get(name)) == wanted:
            return element
    raise SelectorError(f"{selector}: no element with {name} = {wanted}")


@dataclass
class Outcome:
    """What one call returned: structured content, or the error text."""

    data: Any = None
    error: str | None = None


def check(fact: dict[str, Any], outcome: Outcome) -> str | None:
    """None when the fact holds, else why not."""
    kinds = [k for k in _CHECKS if k in fact]
    if len(kinds) != 1:
        return f"the fact must have exactly one of {', '.join(_CHECKS)}: {fact}"
    kind = kinds[0]
    expected = fact[kind]
    if kind == "error_contains":
        if outcome.error is None:
            return f"expected a tool error containing {expected!r}, got a result"
        return None if str(expected) in outcome.error else f"error {outcome.error!r} lacks {expected!r}"
    if outcome.error is not None:
        return f"the call failed: {outcome.error}"
    try:
        actual = select(outcome.data, str(fact["path"]))
    except SelectorError as exc:
        return str(exc)
    where = fact["path"]
    if kind == "equals":
        ok = actual == expected
    elif kind == "approx":
        rel = float(fact.get("rel", 1e-3))
        ok = isinstance(actual, int | float) and math.isclose(float(actual), float(expected), rel_tol=rel)
    elif kind in ("contains", "not_contains"):
        if isinstance(actual, str):
            found = str(expected) in actual
        elif isinstance(actual, list):
            found = expected in actual
        else:
            return f"{where}: {actual!r} is neither a list nor a string"
        ok = found if kind == "contains" else not found
    else:  # length
        ok = isinstance(actual, list | str) and len(actual) == expected
    if ok:
        return None
    shown = actual if not isinstance(actual, str) or len(actual) < 300 else actual[:300] + "…"
    return f"{where}: expected {kind} {expected!r}, got {shown!r}"


@dataclass
class Score:
    passed: int = 0
    failed: int = 0
    facts_passed: int = 0
    facts_failed: int = 0
    failures: list[str] = field(default_factory=list)


async def run(questions: list[dict[str, Any]], server: StdioServerParameters) -> dict[str, Score]:
    scores: dict[str, Score] = defaultdict(Score)
    async with Client(server) as client:
        for question in questions:
            outcomes = []
            for call in question["calls"]:
                result = await client.call_tool(call["tool"], call.get("arguments") or {})
                if result.is_error:
                    text = " ".join(getattr(block, "text", "") for block in result.content)
                    outcomes.append(Outcome(error=text))
                else:
                    outcomes.append(Outcome(data=with_defaults(call["tool"], result.structured_content or {})))
            score = scores[question["tool"]]
            problems = []
            for fact in question["expect"]:
                problem = check(fact, outcomes[int(fact.get("call", 0))])
                if problem is None:
                    score.facts_passed += 1
                else:
                    score.facts_failed += 1
                    problems.append(problem)
            if problems:
                score.failed += 1
                score.failures += [f"{question['id']} ({question['question']}): {p}" for p in problems]
            else:
                score.passed += 1
    return scores


def load(path: Path) -> list[dict[str, Any]]:
    questions = yaml.safe_load(path.read_text(encoding="utf-8"))["questions"]
    ids = [q["id"] for q in questions]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise SystemExit(f"{path.name}: duplicate question ids {sorted(duplicates)}")
    for q in questions:
        if not q.get("calls") or not q.get("expect"):
            raise SystemExit(f"{path.name}: question {q['id']} needs calls and expect")
    return questions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Score the tools' answers to operators' questions over MCP.")
    parser.add_argument("--questions", type=Path, default=HERE / "questions.yaml")
    parser.add_argument("--only", action="append", default=[], metavar="ID", help="run only this question (repeat)")
    parser.add_argument(
        "--server",
        nargs="+",
        default=[sys.executable, "-m", "vllm_caching_mcp.mcp_server"],
        help="the server command (default: this Python's vllm_caching_mcp.mcp_server)",
    )
    args = parser.parse_args(argv)
    questions = load(args.questions)
    if args.only:
        questions = [q for q in questions if q["id"] in set(args.only)]
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as cache:
        # An empty cache and no token: bug answers come from the stored snapshot, the same everywhere.
        env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN")}
        env["VLLM_CACHING_MCP_CACHE_DIR"] = cache
        server = StdioServerParameters(command=args.server[0], args=args.server[1:], env=env)
        scores = anyio.run(run, questions, server)
    for score in scores.values():
        for failure in score.failures:
            print(f"FAIL {failure}")
    print(f"{'tool':<20} {'questions':>10} {'facts':>12}")
    total = Score()
    for tool in sorted(scores):
        s = scores[tool]
        total.passed += s.passed
        total.failed += s.failed
        total.facts_passed += s.facts_passed
        total.facts_failed += s.facts_failed
        facts = f"{s.facts_passed:>5}/{s.facts_passed + s.facts_failed:<6}"
        print(f"{tool:<20} {s.passed:>4}/{s.passed + s.failed:<5} {facts}")
    asked = total.passed + total.failed
    facts = total.facts_passed + total.facts_failed
    percent = 100.0 * total.passed / asked if asked else 0.0
    print(
        f"{'total':<20} {total.passed:>4}/{asked:<5} {total.facts_passed:>5}/{facts:<6} "
        f"{percent:.1f} % in {time.monotonic() - started:.1f} s"
    )
    print(f"{total.passed} passed, {total.failed} failed")
    return 0 if total.failed == 0 and asked else 1


if __name__ == "__main__":
    sys.exit(main())
