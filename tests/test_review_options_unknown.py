"""A vLLM server whose command the files do not hold (a script in the image, a Dockerfile not given, an
entrypoint that runs a program of its own): its container is read and judged, its options are not.

Only rules whose every condition reads none of the server's options may fire for it; the others are not
checked, and the answer says so once for the workload rather than once for each rule.
"""

from __future__ import annotations

import pytest

from reading import KNOWLEDGE, read, review
from vllm_caching_mcp.advice.deployment.read import NothingToReview
from vllm_caching_mcp.advice.review_conditions import OPTION_FREE_KEYS
from vllm_caching_mcp.knowledge import Condition

SCRIPT_RUN = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
spec:
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec:
      containers:
        - name: server
          image: vllm/vllm-openai:v0.11.0
          command: [/usr/local/bin/serve.sh]
          env:
            - {name: HF_TOKEN, value: hf_abcdefghijklmnopqrstuvwxyz012345}
            - {name: VLLM_ATTENTION_BACKEND, value: FLASH_ATTN}
            - {name: VLLM_ATTENTION_BACKEND, value: FLASHINFER}
"""

BUILT_ELSEWHERE = """services:
  db:
    image: neo4j:5.26.0
    environment:
      - NEO4J_AUTH=neo4j/password123
  vllm:
    build: {context: ../services/vllm}
    ports: ['8001:8001']
    environment:
      - VLLM_MODEL=org/model
"""


def _leaf_keys(condition: Condition) -> set[str]:
    parts = [*(condition.all_ or ()), *(condition.any_ or ()), *((condition.not_,) if condition.not_ else ())]
    return {condition.key} | {key for part in parts for key in _leaf_keys(part)}


def _option_free(rule_id: str) -> bool:
    rule = next(p for p in KNOWLEDGE.pitfalls if p.id == rule_id)
    assert rule.when is not None
    return _leaf_keys(rule.when) <= OPTION_FREE_KEYS


def test_a_container_running_a_script_of_its_image_is_read_with_its_options_unknown() -> None:
    deployment = read(("deploy.yaml", SCRIPT_RUN))
    [workload] = deployment.workloads
    assert deployment.unread == [] and workload.flags == [] and workload.model is None
    assert workload.options_unknown is not None and "/usr/local/bin/serve.sh" in workload.options_unknown
    assert [e.name for e in workload.env] == ["HF_TOKEN", "VLLM_ATTENTION_BACKEND", "VLLM_ATTENTION_BACKEND"]


def test_only_rules_that_read_no_option_fire_for_a_server_of_unknown_options() -> None:
    result = review(("deploy.yaml", SCRIPT_RUN))
    found = {f.rule_id for f in result.findings if f.rule_id.startswith("pitfall.")}
    # its secret, its env written twice: the container's own; nothing about flags it may or may not pass
    assert {"pitfall.secret-in-plain-text", "pitfall.duplicate-yaml-key"} <= found
    assert all(_option_free(rule_id) for rule_id in found), found
    assert not any(n.rule_id.startswith("pitfall.") for n in result.not_checked)  # said once, in the note
    assert any("serve.sh" in n and "only what reads none of its vLLM options was checked" in n for n in result.notes)
    # the same container with its command in the files gets the rules that read options
    given = review(("deploy.yaml", SCRIPT_RUN.replace("command: [/usr/local/bin/serve.sh]", "args: [--model, m]")))
    assert any(not _option_free(f.rule_id) for f in given.findings if f.rule_id.startswith("pitfall."))


def test_a_vllm_service_built_from_a_dockerfile_not_given_is_judged_by_its_container() -> None:
    deployment = read(("compose.yaml", BUILT_ELSEWHERE))
    [workload] = deployment.workloads
    assert (
        workload.options_unknown is not None
        and "that Dockerfile is not among the documents" in workload.options_unknown
    )
    result = review(("compose.yaml", BUILT_ELSEWHERE))
    secrets = [f for f in result.findings if f.rule_id == "pitfall.secret-in-plain-text"]
    assert [f.location.line for f in secrets] == [5] and "service db: NEO4J_AUTH" in secrets[0].message
    # VLLM_MODEL may be read by the script the Dockerfile runs: not said to do nothing
    assert "pitfall.vllm-env-unread" not in {f.rule_id for f in result.findings}
    with pytest.raises(NothingToReview):  # a service not named for vLLM is no server of it
        read(("compose.yaml", BUILT_ELSEWHERE.replace("vllm:", "web:")))
