"""review_deployment throughput on a generated 5,000-line multi-document Kubernetes manifest.

    python benchmarks/bench_review_throughput.py [--lines 5000] [--runs 5] [--write]

The manifest repeats tests/data/deployments/tiered-fs-deployment.yaml (a vLLM Deployment with a
tiered offload config) with distinct names until it has ``--lines`` lines. Baseline, measured
in the same run on the same text: `yaml.safe_load_all` (parsing alone, PyYAML's pure-Python
loader, what a naive linter does) and `yaml.load_all` with libyaml's CSafeLoader. Prints lines/s
and the ratio of review time to each baseline. With ``--write`` the figures go to
``review_throughput.json``, which README's figures must agree with (tests/test_performance_figures.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from vllm_caching_mcp.tools import run_tool

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).with_name("review_throughput.json")
SEED = (REPO / "tests" / "data" / "deployments" / "tiered-fs-deployment.yaml").read_text(encoding="utf-8")


def manifest(lines: int) -> str:
    parts, count, i = [], 0, 0
    while count < lines:
        doc = SEED.replace("name: ", f"name: copy{i}-", 1).strip("\n")
        parts.append(doc)
        count += doc.count("\n") + 2
        i += 1
    return "\n---\n".join(parts) + "\n"


def best(runs: int, work: Callable[[], object]) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write", action="store_true", help=f"write the figures to {RESULTS.name}")
    args = parser.parse_args()
    text = manifest(args.lines)
    n_lines, n_docs = text.count("\n"), text.count("\n---\n") + 1
    arguments = {"documents": [{"name": "big.yaml", "text": text}], "version": "0.22.1"}
    # Warm, and count every finding: the default answer groups and cuts the ones it lists.
    result = run_tool("review_deployment", {**arguments, "detail": "full"})
    findings = len(getattr(result, "findings", []))
    review = best(args.runs, lambda: run_tool("review_deployment", arguments))
    pure = best(args.runs, lambda: list(yaml.safe_load_all(text)))
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    libyaml = best(args.runs, lambda: list(yaml.load_all(text, Loader=loader)))
    print(f"review_deployment on {n_lines:,} lines, {n_docs} documents ({findings} findings), median of {args.runs}")
    print(f"{'':34} {'seconds':>8} {'lines/s':>10} {'× review':>9}")
    for label, seconds in (
        ("review_deployment", review),
        ("baseline: yaml.safe_load_all", pure),
        ("baseline: yaml.load_all(CSafeLoader)", libyaml),
    ):
        print(f"{label:34} {seconds:8.3f} {n_lines / seconds:10,.0f} {seconds / review:8.2f}×")
    if args.write:
        figures = {
            "lines": n_lines,
            "runs": args.runs,
            "review_lines_per_s": round(n_lines / review),
            "safe_load_all_x_review": round(pure / review, 2),
            "csafeloader_x_review": round(libyaml / review, 2),
        }
        RESULTS.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
