"""A review answers in a few tens of KB whatever it is given: the same finding once, the lists cut and counted.

A review of a 208-workload manifest answered 3.6 MB (584 KB before the advisories were per workload):
each finding once per workload, every workload's report, every rule not checked per workload. The
default answer now groups the findings that say the same thing and cuts every list (the findings
last, the most severe kept) to keep the whole answer, JSON and text, under 32 KB, counting what it
left out; `detail: full` (and the CLI, for SARIF and CI) still has every finding at its own place.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from vllm_caching_mcp.advice.review_brief import MAX_ANSWER_BYTES
from vllm_caching_mcp.tools import run_tool

DEPLOYMENT = """---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm-{name}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: vllm-{name}}}}}
  template:
    metadata: {{labels: {{app: vllm-{name}}}}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.22.1
        args: ["--model", "m", "--kv-offloading-size", "{size}", "--cpu-offload-gb", "10", "--max-num-seqs", "{i}"]
"""
SERVE = "vllm serve m{i} --kv-offloading-size 64 --kv-offloading-backend native --block-szie {i}\n"

INPUTS: dict[str, list[dict[str, str]]] = {
    "208 identical replicas": [
        {"name": "big.yaml", "text": "".join(DEPLOYMENT.format(name=n, i=1, size=64) for n in range(208))}
    ],
    "208 workloads, each its own values": [
        {"name": "big.yaml", "text": "".join(DEPLOYMENT.format(name=i, i=i + 1, size=i + 1) for i in range(208))}
    ],
    "25 scripts of 40 servers with a misspelt flag each": [
        {"name": f"serve-{n}.sh", "text": "".join(SERVE.format(i=n * 40 + i) for i in range(40))} for n in range(25)
    ],
}


def size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


@pytest.mark.parametrize("shape", INPUTS, ids=list(INPUTS))
def test_the_answer_is_bounded_and_says_what_it_left_out(shape: str) -> None:
    documents = INPUTS[shape]
    brief = run_tool("review_deployment", {"documents": documents}).model_dump(mode="json")
    full = run_tool("review_deployment", {"documents": documents, "detail": "full"}).model_dump(mode="json")
    assert size(brief) <= MAX_ANSWER_BYTES < 32 * 1024, size(brief)
    assert size(full) > 10 * size(brief)
    listed = sum(f["occurrences"] for f in brief["findings"])
    assert listed + brief["findings_left_out"] >= len(full["findings"]) or brief["findings_left_out"] > 0
    assert len(brief["workloads"]) + brief["workloads_left_out"] == len(full["workloads"])
    if brief["findings_left_out"]:  # cut most severe first: what is cut is never more severe than what is kept
        order = {"error": 0, "warning": 1, "info": 2}
        ranks = [order[f["severity"]] for f in brief["findings"]]
        assert ranks == sorted(ranks)
    text = run_tool("review_deployment", {"documents": documents}).summary()
    assert size(brief) + len(text.encode()) <= 32 * 1024 and "detail: full lists them" in text


def test_the_same_finding_in_every_replica_is_one_finding_with_its_places() -> None:
    documents = INPUTS["208 identical replicas"]
    brief = run_tool("review_deployment", {"documents": documents}).model_dump(mode="json")
    full = run_tool("review_deployment", {"documents": documents, "detail": "full"}).model_dump(mode="json")
    [weights] = [f for f in brief["findings"] if f["rule_id"] == "pitfall.cpu-offload-gb-is-weights"]
    assert weights["occurrences"] == 208 == sum(f["rule_id"] == weights["rule_id"] for f in full["findings"])
    assert len(weights["also_at"]) == 5 and weights["also_at"][0]["workload"] != weights["workload"]
    listed, every = {f["rule_id"] for f in brief["findings"]}, {f["rule_id"] for f in full["findings"]}
    assert listed <= every and len(every - listed) == brief["findings_left_out"]  # one group a rule here


def test_the_command_line_reviews_in_full_for_ci(tmp_path: Any) -> None:
    import subprocess
    import sys

    path = tmp_path / "big.yaml"
    path.write_text(INPUTS["208 identical replicas"][0]["text"])
    out = subprocess.run(
        [sys.executable, "-m", "vllm_caching_mcp.cli", "review", "--format", "json", "--", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    findings = json.loads(out.stdout)["findings"]
    assert sum(f["rule_id"] == "pitfall.cpu-offload-gb-is-weights" for f in findings) == 208
