"""Hostile inputs against the deployment and metrics readers, each against an ordinary input of its size.

    python benchmarks/bench_hostile_inputs.py [--runs 3] [--scale 1.0]

Each row is one input an attacker can send to `review_deployment` or `diagnose` (an alias bomb,
nesting that crashed libyaml's composer, megabytes of shell text, a variable prefix that used to
be copied once per variable, a line of path segments a pattern once backtracked on, /metrics lines
full of escaped quotes or labels). The baseline,
measured in the same run, is an ordinary input of the same byte size through the same tool: a
multi-document manifest for YAML, a script of `vllm serve` lines with comments for shell, a
vLLM-shaped /metrics page for metrics. A ratio near 1 or below means the hostile input costs no
more than honest text of its size; every row also says whether the tool answered or refused (and
with which field). ``--scale`` grows or shrinks every input.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from vllm_caching_mcp.tools import ToolInputError, run_tool

VERSION = "0.20.2"
MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm-{i}}}
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.20.2
          args: [serve, m, --max-model-len, "8192", --kv-offloading-size, "64"]
          resources: {{limits: {{nvidia.com/gpu: 1, memory: 200Gi}}}}
"""


def review(text: str) -> dict[str, Any]:
    return {"tool": "review_deployment", "documents": [{"name": "input", "text": text}], "version": VERSION}


def diagnose(text: str) -> dict[str, Any]:
    return {"tool": "diagnose", "symptoms": ["ttft_high"], "metrics_before": text, "version": VERSION}


def sized(unit: Callable[[int], str], size: int) -> str:
    parts, total, i = [], 0, 0
    while total < size:
        part = unit(i)
        parts.append(part)
        total += len(part)
        i += 1
    return "".join(parts)


def manifests(size: int) -> str:
    return sized(lambda i: MANIFEST.format(i=i) + "---\n", size)


def script(size: int) -> str:
    return sized(
        lambda i: (
            f"# step {i}\necho 'starting {i}'\nexport STEP={i}\n"
            + (f"vllm serve m{i} --max-model-len 8192 --kv-offloading-size 10\n" if i % 20 == 0 else "")
        ),
        size,
    )


def metrics_page(size: int) -> str:
    head = "# HELP vllm:prefix_cache_queries Prefix cache queries\n# TYPE vllm:prefix_cache_queries counter\n"
    return head + sized(lambda i: f'vllm:prefix_cache_queries_total{{engine="{i}",model_name="m"}} {i}\n', size)


def alias_bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def hostile_cases(
    scale: float,
) -> list[tuple[str, dict[str, Any], Callable[[int], str], Callable[[str], dict[str, Any]]]]:
    """(label, hostile arguments, the ordinary input maker, how to wrap it)."""
    n = max(1, int(scale * 1_000_000))
    return [
        ("YAML alias bomb, 7 levels", review(alias_bomb(7)), manifests, review),
        ("YAML '[' nested 50,000 deep", review("[" * 50_000), manifests, review),
        ("shell, 1 MB of vllm serve lines", review("vllm serve m --max-model-len 8192\n" * (n // 34)), script, review),
        ("shell, V=x prefix × 30,000", review(" ".join(["V=x"] * (n // 33)) + " vllm serve m\n"), script, review),
        # The P/D proxy-script pattern once re-read every segment from each position: hours for 1 MB.
        ("shell, one line of `a/` segments", review("python " + "a/" * (n // 2) + "\n"), script, review),
        (
            "metrics, label of escaped quotes",
            diagnose('vllm:x_total{a="' + '\\"' * (n // 2) + '"} 1\n'),
            metrics_page,
            diagnose,
        ),
        (
            "metrics, 130,000 labels on a series",
            diagnose("vllm:x_total{" + ",".join(f'l{i}="v"' for i in range(n // 8)) + "} 1\n"),
            metrics_page,
            diagnose,
        ),
    ]


def payload(arguments: dict[str, Any]) -> str:
    """The text the tool reads: the one document, or the metrics dump."""
    return str(arguments["documents"][0]["text"] if "documents" in arguments else arguments["metrics_before"])


def timed(arguments: dict[str, Any], runs: int) -> tuple[float, str]:
    tool = arguments["tool"]
    rest = {k: v for k, v in arguments.items() if k != "tool"}
    samples, outcome = [], ""
    for _ in range(runs):
        start = time.perf_counter()
        try:
            run_tool(tool, rest)
            outcome = "answered"
        except ToolInputError as exc:
            outcome = "refused: " + str(exc).split(":", 1)[0]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    timed(review(manifests(10_000)), 1)  # warm: imports and the knowledge
    print(f"hostile inputs, median of {args.runs}; baseline: an ordinary input of the same size, same tool")
    print(f"{'input':38} {'bytes':>10} {'hostile s':>10} {'baseline s':>11} {'× base':>7}  outcome")
    for label, hostile, ordinary, wrap in hostile_cases(args.scale):
        size = len(payload(hostile))
        hostile_s, outcome = timed(hostile, args.runs)
        base_s, _ = timed(wrap(ordinary(size)), args.runs)
        print(f"{label:38} {size:>10,} {hostile_s:>10.3f} {base_s:>11.3f} {hostile_s / base_s:>6.2f}×  {outcome}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
