"""One release's Python source, read without importing it, and what a probe observed in it."""

from __future__ import annotations

import ast
import fnmatch
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any


class NotCheckable(Exception):
    """The probe cannot say anything about this release (missing file, computed default, ...)."""


class Missing(NotCheckable):
    """The class or field is not in this release at all."""


@dataclass(frozen=True)
class Observation:
    value: Any
    path: str | None = None
    line: int | None = None

    @property
    def where(self) -> str | None:
        if self.path is None:
            return None
        return f"{self.path}:{self.line}" if self.line else self.path


class SourceTree:
    """One release's Python source: an extracted directory or a wheel read in place."""

    def __init__(self, package: str, version: str, location: Path) -> None:
        self.package = package
        self.version = version
        self.location = location
        self._zip = zipfile.ZipFile(location) if location.suffix == ".whl" else None
        self._texts: dict[str, str | None] = {}
        self._modules: dict[str, ast.Module | None] = {}

    @cached_property
    def paths(self) -> list[str]:
        """Every ``.py`` file, as a path inside the package (``vllm/envs.py``)."""
        if self._zip is not None:
            return sorted(n for n in self._zip.namelist() if n.endswith(".py") and n.startswith(f"{self.package}/"))
        root = self.location
        return sorted(str(p.relative_to(root)) for p in (root / self.package).rglob("*.py"))

    def glob(self, patterns: Iterable[str]) -> list[str]:
        found: list[str] = []
        for pattern in patterns:
            if any(ch in pattern for ch in "*?["):
                found.extend(p for p in self.paths if fnmatch.fnmatchcase(p, pattern) and p not in found)
            elif pattern in self.paths and pattern not in found:
                found.append(pattern)
        return found

    def text(self, path: str) -> str | None:
        if path not in self._texts:
            try:
                data = self._zip.read(path) if self._zip is not None else (self.location / path).read_bytes()
                self._texts[path] = data.decode("utf-8", errors="replace")
            except (KeyError, FileNotFoundError, IsADirectoryError):
                self._texts[path] = None
        return self._texts[path]

    def module(self, path: str) -> ast.Module | None:
        if path not in self._modules:
            source = self.text(path)
            try:
                self._modules[path] = ast.parse(source) if source is not None else None
            except SyntaxError:
                self._modules[path] = None
        return self._modules[path]

    def containing(self, patterns: Iterable[str], needle: str) -> list[str]:
        """The files among ``patterns`` whose text contains ``needle`` (a cheap filter before ast)."""
        return [p for p in self.glob(patterns) if needle in (self.text(p) or "")]

    def module_path(self, dotted: str) -> str | None:
        base = dotted.replace(".", "/")
        for candidate in (f"{base}.py", f"{base}/__init__.py"):
            if candidate in self.paths:
                return candidate
        return None

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
