"""Release versions and version ranges, parsed with `packaging`.

Every fact in the knowledge names the releases it applies to either as a lifecycle
(`introduced`, `deprecated`, `removed`: the first release in which each holds) or as a
PEP 440 specifier string (`">=0.23.0"`). This module is the one place that parses them,
so a malformed version is rejected with the same message everywhere.
"""

from __future__ import annotations

import functools

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

__all__ = [
    "InvalidSpecifier",
    "SpecifierSet",
    "Version",
    "as_text",
    "contains",
    "in_range",
    "parse_specifier",
    "parse_version",
]


def parse_version(text: str, *, field: str = "version") -> Version:
    """Parse a release such as ``0.23.0`` (a leading ``v`` is accepted, as in image tags).

    Raises ``ValueError`` naming ``field`` when the text is not a PEP 440 version.
    """
    cleaned = text.strip()
    if cleaned[:1] in ("v", "V"):
        cleaned = cleaned[1:]
    try:
        return Version(cleaned)
    except InvalidVersion:
        raise ValueError(
            f"{field}: {text!r} is not a release version; write it as MAJOR.MINOR.PATCH, e.g. '0.23.0'"
        ) from None


@functools.lru_cache(maxsize=4096)  # a few hundred distinct ranges in the knowledge, asked on every call
def parse_specifier(text: str, *, field: str = "versions") -> SpecifierSet:
    """Parse a PEP 440 range such as ``">=0.22.0,<0.23.0"``; raises ``ValueError`` naming ``field``."""
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise ValueError(f"{field}: {text!r} is not a PEP 440 version range, e.g. '>=0.23.0'") from None


def as_text(version: Version | None) -> str | None:
    """A release as answers show it (text), or None."""
    return None if version is None else str(version)


def contains(spec: SpecifierSet, version: Version) -> bool:
    """Whether ``version`` is in ``spec``; pre-releases count, since nightly builds are common."""
    return spec.contains(version, prereleases=True)


@functools.lru_cache(maxsize=16384)
def in_range(text: str, version: Version) -> bool:
    """Whether ``version`` is in the range written ``text`` (pre-releases count); raises like `parse_specifier`."""
    return contains(parse_specifier(text), version)
