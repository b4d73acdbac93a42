"""Where a release's wheel (or extracted tree) is, and fetching the ones that are missing.

A release published without a wheel (LMCache 0.3.0 has only a source distribution) is read from its
source distribution instead: the tree ``DIR/lmcache-0.3.0-sdist`` that scripts/check_sources.py
extracts (the package directory sits at its top, as in a wheel), fetched the same way when missing.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from vllm_caching_mcp.http_client import default_cache_dir

SCRIPTS = Path(__file__).resolve().parents[1]


def wheel_name(package: str) -> str:
    return re.sub(r"[-_.]+", "_", package).lower()


def sdist_tree(package: str, version: str, directory: Path) -> Path:
    """Where check_sources.py extracts a release's source distribution (the name it resolves ``sdist:`` in)."""
    return directory / f"{package}-{version}-sdist"


def locate(package: str, version: str, directories: list[Path]) -> Path | None:
    """An extracted tree (``DIR/vllm-0.33.0``), a wheel (``DIR/vllm-0.33.0-*.whl``) or, for a release
    without either, its extracted source distribution (``DIR/lmcache-0.3.0-sdist``)."""
    for directory in directories:
        tree = directory / f"{package}-{version}"
        if (tree / package).is_dir():
            return tree
        wheels = sorted(directory.glob(f"{wheel_name(package)}-{version}-*.whl"))
        if wheels:
            return wheels[0]
    for directory in directories:
        sdist = sdist_tree(package, version, directory)
        if (sdist / package).is_dir():
            return sdist
    return None


def _check_sources() -> ModuleType:
    """scripts/check_sources.py, loaded by its path (it fetches and extracts source distributions)."""
    spec = importlib.util.spec_from_file_location("check_sources", SCRIPTS / "check_sources.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def download(package: str, version: str, directory: Path, index: str | None = None) -> Path | None:
    """The release's wheel, fetched with pip; where the index has none, its source distribution."""
    directory.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q"]
    subprocess.run([*command, "-d", str(directory), f"{package}=={version}"], check=False)
    found = locate(package, version, [directory])
    if found is not None:
        return found
    check_sources = _check_sources()
    target = sdist_tree(package, version, directory)
    try:
        check_sources.download_sdist(package, version, target, index or check_sources.DEFAULT_INDEX)
    except check_sources.FETCH_ERRORS as exc:
        print(f"verify_knowledge: {package}=={version}: no wheel, and its source distribution: {exc}", file=sys.stderr)
        return None
    return locate(package, version, [directory])


def default_src() -> Path:
    """``--src`` when none is given: the user's cache (``$XDG_CACHE_HOME/vllm-caching-mcp/wheels``)."""
    return default_cache_dir() / "wheels"
