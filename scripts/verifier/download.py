"""Where a release's wheel (or extracted tree) is, and fetching the ones that are missing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from vllm_caching_mcp.http_client import default_cache_dir


def wheel_name(package: str) -> str:
    return re.sub(r"[-_.]+", "_", package).lower()


def locate(package: str, version: str, directories: list[Path]) -> Path | None:
    """An extracted tree (``DIR/vllm-0.33.0``) or a wheel (``DIR/vllm-0.33.0-*.whl``) for a release."""
    for directory in directories:
        tree = directory / f"{package}-{version}"
        if (tree / package).is_dir():
            return tree
        wheels = sorted(directory.glob(f"{wheel_name(package)}-{version}-*.whl"))
        if wheels:
            return wheels[0]
    return None


def download(package: str, version: str, directory: Path) -> Path | None:
    directory.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q"]
    subprocess.run([*command, "-d", str(directory), f"{package}=={version}"], check=False)
    return locate(package, version, [directory])


def default_src() -> Path:
    """``--src`` when none is given: the user's cache (``$XDG_CACHE_HOME/vllm-caching-mcp/wheels``)."""
    return default_cache_dir() / "wheels"
