"""README's answer-size figures are what benchmarks/bench_answer_sizes.py measures now.

Sizes, unlike times, are the same on every machine: the benchmark's calls are made here again through
the real SDK client, and the median and maximum must equal both its stored result
(benchmarks/answer_sizes.json) and the sentence README states them in. A change that makes answers
larger or smaller fails here until the benchmark is run with --write and README follows.
"""

from __future__ import annotations

import importlib.util
import json
import re

from conftest import REPO


def test_readme_states_the_answer_sizes_the_benchmark_measures() -> None:
    spec = importlib.util.spec_from_file_location("bench_answer_sizes", REPO / "benchmarks" / "bench_answer_sizes.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    measured = bench.measure()
    stored = json.loads((REPO / "benchmarks" / "answer_sizes.json").read_text(encoding="utf-8"))
    assert measured == stored, "run python benchmarks/bench_answer_sizes.py --write, then update README"
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    stated = re.search(r"for the (\d+) realistic calls .*?median ([\d,]+) bytes, largest ([\d,]+) bytes", readme)
    assert stated is not None, "README no longer states the answer sizes"
    calls, median, largest = (int(g.replace(",", "")) for g in stated.groups())
    assert (calls, median, largest) == (stored["calls"], stored["median_bytes"], stored["max_bytes"])
