"""What the generators of knowledge/*_inventory.yaml, engine_schema.yaml and model_registry.yaml share: the
error a source of the wrong shape raises, the releases knowledge/releases.yaml lists, and the compression of
per-release readings into runs of consecutive releases read.

A package rather than a module next to the scripts, so that every ``scripts/*.py`` stays a command that
answers ``--help``; the scripts import it by name, as ``verify_knowledge.py`` imports ``verifier``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from vllm_caching_mcp.versions import Version

SOURCE = Path(__file__)  # a generator that pins its own sha256 pins this file's too


class ExtractionError(Exception):
    """The source does not have the shape the script understands; the message says where."""


def released(releases_file: Path, package: str) -> list[str]:
    """The releases of ``package`` that ``releases_file`` lists, oldest first."""
    raw = yaml.safe_load(releases_file.read_text(encoding="utf-8"))
    for line in raw["lines"]:
        if line["package"] == package:
            return sorted((str(r["version"]) for r in line["releases"]), key=Version)
    raise ExtractionError(f"{releases_file}: no {package} release line")


@dataclass(frozen=True)
class Run:
    """One name over one run of consecutive releases read that have it: ``indexes`` into the releases read;
    ``introduced`` is the run's first release unless that is the oldest read, ``removed`` the first release
    read after the run (None: the run reaches the newest)."""

    name: str
    indexes: list[int]
    introduced: str | None
    removed: str | None


def runs(per_release: Mapping[str, Collection[str]], order: Callable[[str], str] = str) -> Iterator[Run]:
    """The runs of every name ``per_release`` (release -> the names it has, oldest release first) holds,
    sorted by name (``order`` the sort key), a name's runs oldest first."""
    versions = list(per_release)
    names = {name for found in per_release.values() for name in found}
    for name in sorted(names, key=order):
        present = [i for i, v in enumerate(versions) if name in per_release[v]]
        for _, run in itertools.groupby(enumerate(present), key=lambda t: t[1] - t[0]):
            indexes = [i for _, i in run]
            first, last = indexes[0], indexes[-1]
            yield Run(
                name,
                indexes,
                introduced=versions[first] if first > 0 else None,
                removed=versions[last + 1] if last + 1 < len(versions) else None,
            )
