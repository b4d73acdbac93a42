"""Which vLLM (and LMCache) release a workload runs, from every place its files state one: the image tag,
then each pip install run before the server starts, in order (a later install replaces what the image
or an earlier install put there), with where it was read and a note wherever two places disagree."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion

from .images import image_version
from .installs import requirement_specifier
from .model import Location, ReleaseClaim, Workload


@dataclass
class Release:
    """The release a workload runs, or None when its files leave it unknown, and how that was read."""

    version: str | None = None
    source: Literal["image-tag", "pip-install"] | None = None
    location: Location | None = None
    notes: list[str] = field(default_factory=list)


def _keeps(installed: str, claim: ReleaseClaim) -> bool:
    """Whether pip leaves ``installed`` in place for this unpinned requirement: it does when the
    installed release satisfies it and no --upgrade (or reinstall) asks for another."""
    if claim.upgrade:
        return False
    try:
        return SpecifierSet(requirement_specifier(claim.requirement)).contains(installed, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


# The newest release whose Requires-Python admits a Python (3.9), when that is older than the newest release.
PythonCap = Callable[[str], str | None]


def _fold(start: Release, claims: list[ReleaseClaim], package: str, cap: PythonCap | None = None) -> Release:
    """The release after each install in turn, from ``start`` (the image's); ``cap`` names the release an
    unpinned install takes in a Python the newest release no longer admits."""
    current = start
    for claim in claims:
        said = f"{claim.location}: pip installs {claim.requirement}"
        if claim.version is not None:
            if current.version is not None and current.version != claim.version:
                before = f"{current.location}" if current.location else "before"
                current.notes.append(
                    f"{said}, which replaces the {package} {current.version} read at {before}: {claim.version} is "
                    "the release that runs"
                )
            current = Release(claim.version, "pip-install", claim.location, current.notes)
        elif current.version is not None and _keeps(current.version, claim):
            current.notes.append(
                f"{said} with no exact version; pip keeps the {package} {current.version} already installed, "
                "which satisfies it"
            )
        elif cap is not None and claim.python is not None and (taken := cap(claim.python)) is not None:
            current.notes.append(
                f"{said} into Python {claim.python}: pip takes the newest {package} release that admits that Python, "
                f"{taken}; newer releases require a newer Python"
            )
            current = Release(taken, "pip-install", claim.location, current.notes)
        else:
            current.notes.append(
                f"{said} with no exact version: it installs whichever {package} release is newest when it runs, so "
                f"the release is not known from the files; pin {claim.package}==X.Y.Z"
            )
            current = Release(notes=current.notes)
    return current


def workload_release(workload: Workload, cap: PythonCap | None = None) -> Release:
    """The vLLM release the workload runs: its image tag's, replaced by each pip install of vLLM before it."""
    tag = image_version(workload.image)
    start = Release(tag, "image-tag", workload.image_location or workload.location) if tag else Release()
    return _fold(start, [c for c in workload.installs if c.package == "vllm"], "vLLM", cap)


def lmcache_release(workload: Workload) -> Release:
    """The LMCache release the workload's pip installs leave (None when none pins one)."""
    return _fold(Release(), [c for c in workload.installs if c.package == "lmcache"], "LMCache")
