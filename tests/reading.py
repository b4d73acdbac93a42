"""How tests read documents: ``read`` what the readers make of them, ``review`` what the tool answers.

One helper for every test file, so a test says only its documents, given as ``(name, text)`` pairs;
the name picks the reader as it does for a user (``.yaml``, ``.env``, ``kustomization.yaml``).
"""

from __future__ import annotations

from typing import Any

from vllm_caching_mcp.advice.deployment import Deployment, Document, Effective, Workload, parse_documents, resolve
from vllm_caching_mcp.advice.review import ReviewResult
from vllm_caching_mcp.knowledge import load_knowledge
from vllm_caching_mcp.tools import run_tool
from vllm_caching_mcp.versions import parse_version

KNOWLEDGE = load_knowledge()


def read(*documents: tuple[str, str]) -> Deployment:
    """What the readers make of the documents."""
    return parse_documents([Document(name=n, text=t) for n, t in documents], KNOWLEDGE)


def workloads(*documents: tuple[str, str]) -> tuple[list[Workload], list[str]]:
    """The workloads the readers find in the documents, and their notes."""
    deployment = read(*documents)
    return deployment.workloads, deployment.notes


def flags(workload: Workload) -> dict[str, Any]:
    return {f.name: f.value for f in workload.flags}


def effective(*documents: tuple[str, str], version: str = "0.20.2") -> Effective:
    """The effective configuration of the one workload in the documents, for a stated release."""
    deployment = read(*documents)
    [workload] = deployment.workloads
    return resolve(workload, deployment, KNOWLEDGE, parse_version(version), "stated")


def review(*documents: tuple[str, str], **request: Any) -> ReviewResult:
    """The review tool's answer (every finding at its own place unless ``detail`` says otherwise)."""
    arguments = {"documents": [{"name": n, "text": t} for n, t in documents], "detail": "full", **request}
    result = run_tool("review_deployment", arguments)
    assert isinstance(result, ReviewResult)
    return result
