"""README's performance figures are those of the last stored benchmark run.

Times, unlike answer sizes (tests/test_answer_sizes.py), differ between machines and runs, so they are
not measured here: each benchmark writes its figures with ``--write`` (benchmarks/cold_start.json,
latency.json, review_throughput.json), and README's "Performance" paragraph must state exactly those.
Every ratio (N×), time (N ms) and rate (N lines a second) the paragraph states must be one this test
reads from a stored file, so a figure left from an earlier run fails here until the benchmark is run
again with --write and the paragraph follows.
"""

from __future__ import annotations

import json
import re
from typing import Any

from conftest import REPO

BENCHMARKS = REPO / "benchmarks"


def _stored(name: str) -> dict[str, Any]:
    return dict(json.loads((BENCHMARKS / name).read_text(encoding="utf-8")))


def _performance_paragraph() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Performance", 1)[1].split("\nLayout:", 1)[0]
    return " ".join(section.split())


def _claims() -> dict[str, str]:
    """Each figure README must state, as it must read there, from the stored runs."""
    cold = _stored("cold_start.json")["rows"]
    ours, bare = cold["vllm-caching-mcp"], cold["bare MCPServer (1 tool)"]
    latency = _stored("latency.json")
    review = _stored("review_throughput.json")
    return {
        "tools/list": f"`tools/list` answered in {ours['tools_list_x_bare']:.2f}× a bare `MCPServer`",
        "first call": f"the first tool call in {ours['first_call_x_bare']:.2f}×",
        "tree CPU": f"the whole tree used {ours['tree_cpu_x_bare']:.2f}× the bare server's CPU",
        "tree": f"takes {ours['tree_pss_x_bare']:.2f}× the bare server's memory counted as PSS "
        f"({ours['tree_rss_x_bare']:.2f}× summed RSS",
        "bare memory": f"{bare['tree_pss_mib']:.1f} MiB PSS against {ours['tree_pss_mib']:.1f} MiB",
        "p99": f"a p99 of at most {latency['max_tool_p99_ms']:g} ms "
        f"(the bare server's trivial echo: {latency['rows']['bare echo (baseline)']['p99_ms']:g} ms)",
        "review": f"reads {review['review_lines_per_s']:,} manifest lines a second "
        f"({review['safe_load_all_x_review']:.2f}× the time",
    }


def test_readme_states_the_figures_of_the_stored_benchmark_runs() -> None:
    paragraph = _performance_paragraph()
    missing = {name: claim for name, claim in _claims().items() if claim not in paragraph}
    assert not missing, f"README's Performance paragraph should say: {missing}"


def test_readme_states_no_other_ratio_time_or_rate() -> None:
    """A figure the stored runs do not give (a range from two old runs, "under 5 ms", "23,000 lines")
    fails: every one in the paragraph comes from the claims above or is a count of calls or bytes."""
    paragraph = _performance_paragraph()
    supported = " ".join(_claims().values())
    figures = re.findall(r"\d[\d,.]*(?:–[\d,.]+)?\s?(?:×|ms\b|s\b|manifest lines a second)", paragraph)
    stale = [f for f in figures if f not in supported]
    assert not stale, f"figures the stored benchmark runs do not support: {stale}"


def test_the_stored_runs_are_the_benchmarks_own_output() -> None:
    """Each file has the fields its benchmark writes, and ratios that agree with its own figures."""
    cold = _stored("cold_start.json")
    rows = cold["rows"]
    assert set(rows) >= {"bare MCPServer (1 tool)", "vllm-caching-mcp"}
    bare, ours = rows["bare MCPServer (1 tool)"], rows["vllm-caching-mcp"]
    assert bare["first_call_x_bare"] == bare["tree_pss_x_bare"] == 1.0
    assert abs(ours["tree_pss_mib"] / bare["tree_pss_mib"] - ours["tree_pss_x_bare"]) < 0.01
    assert abs(ours["first_call_ms"] / bare["first_call_ms"] - ours["first_call_x_bare"]) < 0.02
    latency = _stored("latency.json")
    tools = [
        v["p99_ms"] for k, v in latency["rows"].items() if k not in ("bare echo (baseline)", "tools/list (round trip)")
    ]
    assert latency["max_tool_p99_ms"] == max(tools)
    assert {"check_bug_status (offline)", "inspect_image (offline)"} <= set(latency["rows"])
