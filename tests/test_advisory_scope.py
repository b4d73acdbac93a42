"""Advisory findings belong to the workloads that run vLLM: one finding for each advisory, file and release,
naming every workload that shares it; none on a file of LMCache configs alone; one no release fixes gives
its mitigation, and `--ignore-unfixed` leaves it out of the gate."""

from __future__ import annotations

from collections import Counter

from reading import review
from vllm_caching_mcp.advice.review_models import UNFIXED_MARK, exit_code, unfixed
from vllm_caching_mcp.knowledge import load_knowledge

M = "Qwen/Qwen3-8B"


def deployment(name: str, image: str) -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: 3
  template:
    spec:
      containers:
      - name: vllm
        image: {image}
        args: ["--model", "{M}"]
"""


def advisories(result: object) -> list[tuple[str, str, str]]:
    findings = getattr(result, "findings", [])
    return [(f.rule_id, f.location.file, f.workload) for f in findings if f.rule_id.startswith("advisory.")]


def test_workloads_of_one_release_in_one_file_share_each_advisory_finding() -> None:
    text = (
        deployment("prefill", "vllm/vllm-openai:v0.12.0") + "---\n" + deployment("decode", "vllm/vllm-openai:v0.12.0")
    )
    found = advisories(review(("pd.yaml", text)))
    assert found and all(n == 1 for n in Counter(rule for rule, _, _ in found).values())
    assert {workload for _, _, workload in found} == {
        "Deployment/prefill container vllm, Deployment/decode container vllm"
    }


def test_each_file_and_each_release_has_its_own_finding() -> None:
    one, other = deployment("a", "vllm/vllm-openai:v0.12.0"), deployment("b", "vllm/vllm-openai:v0.12.0")
    found = advisories(review(("a.yaml", one), ("b.yaml", other)))
    per_rule = Counter(rule for rule, _, _ in found)
    assert found and set(per_rule.values()) == {2}
    mixed = deployment("a", "vllm/vllm-openai:v0.12.0") + "---\n" + deployment("b", "vllm/vllm-openai:v0.11.0")
    releases = {
        f.message.split(" ")[1] for f in review(("ab.yaml", mixed)).findings if f.rule_id.startswith("advisory")
    }
    assert releases == {"0.12.0", "0.11.0"}


def test_an_lmcache_config_alone_gets_no_advisory_even_with_a_stated_release() -> None:
    config = "chunk_size: 256\nlocal_cpu: true\nmax_local_cpu_size: 5\n"
    result = review(("lmcache.yaml", config), version="0.12.0")
    assert advisories(result) == []
    assert not [c for c in result.not_checked if c.rule_id.startswith("advisory.")]
    assert not any("security advisories were not checked" in n for n in result.notes)


def test_an_advisory_no_release_fixes_gives_its_mitigation_and_can_be_left_out_of_the_gate() -> None:
    mitigated = {a.id: a.mitigation for a in load_knowledge().advisories.advisories if a.mitigation}
    assert mitigated, "the knowledge gives no mitigation"
    result = review(f"vllm serve {M} --port 8000\n", version="0.33.0")
    unfixed_findings = [f for f in result.findings if unfixed(f)]
    assert unfixed_findings
    for finding in unfixed_findings:
        advisory_id = finding.rule_id.removeprefix("advisory.")
        assert finding.fix.startswith(UNFIXED_MARK)
        if advisory_id in mitigated:
            assert str(mitigated[advisory_id])[1:] in finding.fix
    assert exit_code(result, "info") == 1
    assert exit_code(result, "info", ignore_unfixed=True) == 0


def test_advisories_sit_only_on_the_files_that_run_vllm() -> None:
    simulator = deployment("sim", "ghcr.io/llm-d/llm-d-inference-sim:v0.3.0")  # a container named vllm, as in llm-d
    services = """services:
  cache:
    image: lmcache/standalone:v0.3.9
    command: ["lmcache_server", "0.0.0.0", "65432"]
  router:
    image: lmcache/lmstack-router:latest
    command: ["--service-discovery", "static", "--static-backends", "http://engine:8000"]
"""
    documents = (
        ("serve.sh", f"docker run --gpus all vllm/vllm-openai:v0.12.0 --model {M}\n"),
        ("lmcache.yaml", "chunk_size: 256\nlocal_cpu: true\n"),
        ("sim.yaml", simulator),
        ("compose.yaml", services),
    )
    result = review(*documents)
    assert [w.file for w in result.workloads] == ["serve.sh"]
    assert {file for _, file, _ in advisories(result)} == {"serve.sh"}
