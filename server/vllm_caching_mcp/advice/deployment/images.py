"""What a workload's image says: the vLLM release of an official image, and the release notes of
others."""

from __future__ import annotations

import datetime as dt
import re

from .bounds import clip
from .hygiene import floating_tag
from .model import Workload

# A release as a tag writes it: 0.22.1, 0.9.0.1, 0.8.5.post1 (a leading v is matched before it).
_RELEASE = r"(?P<version>\d+\.\d+\.\d+(\.\d+)?(\.post\d+)?)"
# The official image names its vLLM release in the tag (v0.22.1, v0.22.1-cu130); other images
# (lmcache/vllm-openai, private builds) tag their own versions, so only this repository counts.
_OFFICIAL_IMAGE = re.compile(r"(^|/)vllm/vllm-openai(-[a-z0-9]+)?:v?" + _RELEASE + r"(-[\w.-]+)?$")
# A build derived from it that keeps its name and leads its tag with the release it was built from
# (aibrix/vllm-openai-aibrix-kvcache:v0.10.2-20251022, aibrix/vllm-openai:v0.10.0-cu128-nixl-v0.4.1-lmcache-0.3.2,
# whose later parts name what was added); lmcache/vllm-openai, whose tags are LMCache's, is not.
_DERIVED_IMAGE = re.compile(r"(^|/)(?P<repo>[\w.-]+)/[\w.-]*vllm-openai[\w.-]*:v?" + _RELEASE + r"(-[\w.-]+)?$")
# An image named vllm whose tag leads with the release, as the vendors' builds of vLLM tag it (AWS's Deep
# Learning Containers <account>.dkr.ecr.<region>.amazonaws.com/vllm:0.11.0-gpu-py312-cu128-ubuntu22.04-ec2,
# intel/vllm:0.10.2-xpu); NVIDIA's nvcr.io/nvidia/vllm:25.09-py3 tags its container release (two numbers).
_NAMED_VLLM_IMAGE = re.compile(r"(^|/)(?P<repo>[\w.-]+)/vllm:v?" + _RELEASE + r"(-[\w.-]+)?$")


# lmcache/vllm-openai is built on vLLM's nightly or its latest release when the image is built, and
# its version tags are LMCache's ("lmcache/vllm-openai:{version} - Specific version (e.g., v0.1.0)",
# LMCache/LMCache docker/README.md, Published Images; the Dockerfile's image-build target installs
# vLLM nightly, image-release the stable vLLM of the day): no tag names the vLLM release inside.
_LMCACHE_IMAGE = re.compile(r"(^|/)lmcache/vllm-openai:v?" + _RELEASE + "$")


def image_release_note(image: str) -> str | None:
    """Why the image's tag does not say which vLLM release it runs; None when it does (vllm/vllm-openai:vX.Y.Z)."""
    if image_version(image) is not None:
        return None
    lmcache = _LMCACHE_IMAGE.search(image.strip())
    if lmcache is not None:
        return (
            f"the image {image} carries LMCache {lmcache['version']} (its tag) with a vLLM release the tag does not "
            "name (LMCache builds it on the vLLM of the day)"
        )
    return (
        f"the tag of the image {clip(image, 80)} does not name a vLLM release (vllm/vllm-openai:vX.Y.Z, a build "
        "named after it, or an image named vllm tagged X.Y.Z-… do)"
    )


def image_notes(workloads: list[Workload]) -> list[str]:
    """One note for each image whose tag leaves the vLLM release unknown, so that no one reads the release
    the review falls back on (the stated one, else the newest known) as the image's."""
    notes: dict[str, str] = {}
    for workload in workloads:
        if workload.image and floating_tag(workload.image) is not None:
            continue  # the floating-image-tag finding says so, with the release the review took
        why = image_release_note(workload.image) if workload.image else None
        if why is not None and workload.image not in notes:
            notes[workload.image or ""] = (
                f"{workload.image_location or workload.location}: {why}; the vLLM release is unknown, so it is "
                "reviewed for the stated version, else the newest known: give version to review the one it runs"
            )
    return list(notes.values())


# Its nightly builds are tagged with their date (lmcache/vllm-openai:2025-05-27-v1).
_LMCACHE_DATED_IMAGE = re.compile(r"(^|/)lmcache/vllm-openai:(?P<date>\d{4}-\d{2}-\d{2})(-[\w.]+)?$")


def lmcache_image_date(image: str | None) -> dt.date | None:
    """The build date an lmcache/vllm-openai nightly tag names (its code is LMCache's of that day)."""
    m = _LMCACHE_DATED_IMAGE.search(image.strip()) if image else None
    if m is None:
        return None
    try:
        return dt.date.fromisoformat(m["date"])
    except ValueError:
        return None


def lmcache_image_version(image: str | None) -> str | None:
    """The LMCache release an lmcache/vllm-openai:vX.Y.Z tag names (its tags are LMCache's versions)."""
    m = _LMCACHE_IMAGE.search(image.strip()) if image else None
    return m.group("version") if m else None


def image_version(image: str | None) -> str | None:
    """The vLLM release an image's tag names: the official image's, or a derived build's (see derived_image)."""
    if not image:
        return None
    text = image.strip()
    m = _OFFICIAL_IMAGE.search(text) or _DERIVED_IMAGE.search(text) or _NAMED_VLLM_IMAGE.search(text)
    if m is None or m.groupdict().get("repo") == "lmcache":
        return None
    return m.group("version")


def derived_image(image: str | None) -> bool:
    """Whether the release was read from a build derived from vllm/vllm-openai, not from the official image."""
    return bool(image) and image_version(image) is not None and _OFFICIAL_IMAGE.search((image or "").strip()) is None
