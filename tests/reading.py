"""How tests read documents: ``read`` what the readers make of them, ``review`` what the tool answers.

One helper for every test file, so a test says only its documents, given as ``(name, text)`` pairs;
the name picks the reader as it does for a user (``.yaml``, ``.env``, ``kustomization.yaml``).
"""

from __future__ import annotations

from typing import Any

from vllm_caching_mcp.advice.deployment import Deployment, Document, Effective, Workload, parse_documents, resolve
from vllm_caching_mcp.advice.review import ReviewRequest, ReviewResult, review_deployment
from vllm_caching_mcp.knowledge import Knowledge, load_knowledge
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


def review(*documents: str | tuple[str, str], knowledge: Knowledge | None = None, **request: Any) -> ReviewResult:
    """The review tool's answer (every finding at its own place unless ``detail`` says otherwise).

    A document is ``(name, text)``, or a text alone, named ``serve0.sh``, ``serve1.sh``, ... by its
    place; ``knowledge`` reviews against other knowledge than the shipped one (a test's edited copy).
    """
    named = [d if isinstance(d, tuple) else (f"serve{i}.sh", d) for i, d in enumerate(documents)]
    arguments = {"documents": [{"name": n, "text": t} for n, t in named], "detail": "full", **request}
    if knowledge is not None:
        return review_deployment(ReviewRequest.model_validate(arguments), knowledge)
    result = run_tool("review_deployment", arguments)
    assert isinstance(result, ReviewResult)
    return result


def known_moving_tag(finding: Any) -> bool:
    """The LMCache helpers a render starts run from LMCache's own image at its nightly tag (recipes.yaml
    lmcache_image: no release-tagged image of it is known), which the render says to pin; a review of the
    render rightly calls that tag moving, and nothing else of the render may be found."""
    image = load_knowledge().recipes.facts.lmcache_image.image
    return bool(finding.rule_id == "pitfall.floating-image-tag" and image in finding.message)
