"""Check that every `wheel:` source in the knowledge points at a file and line that exist.

    python scripts/check_sources.py --src-dir ~/.cache/vllm-caching/src [--download]

The source directory holds extracted wheels as ``vllm-0.33.0/vllm/...`` and
``lmcache-0.5.6/lmcache/...``. With ``--download`` the wheels a source names but the directory
lacks are fetched with ``pip download --no-deps`` and their text files extracted there; keep that
directory outside the repository. Exit status 1 when any source does not resolve.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

WHEEL_SOURCE = re.compile(
    r"wheel:(?P<pkg>[\w-]+)==(?P<ver>[\w.]+):(?P<path>[\w./-]+)(?::(?P<line>\d+)(?:-(?P<end>\d+))?)?"
)
TEXT_SUFFIXES = (".py", ".txt", ".json", ".cfg", ".toml", ".in")


@dataclass(frozen=True)
class WheelSource:
    file: str
    package: str
    version: str
    path: str
    last_line: int | None

    def __str__(self) -> str:
        line = f":{self.last_line}" if self.last_line else ""
        return f"wheel:{self.package}=={self.version}:{self.path}{line}"


def wheel_sources(knowledge: Path) -> Iterator[WheelSource]:
    for yaml_file in sorted(knowledge.glob("*.yaml")):
        for m in WHEEL_SOURCE.finditer(yaml_file.read_text(encoding="utf-8")):
            last = m.group("end") or m.group("line")
            yield WheelSource(
                yaml_file.name, m.group("pkg"), m.group("ver"), m.group("path"), int(last) if last else None
            )


def download(package: str, version: str, src_dir: Path) -> None:
    """Fetch one wheel and extract its text files into ``src_dir/package-version``."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, f"{package}=={version}"],
            check=True,
        )
        wheel = next(Path(tmp).glob("*.whl"))
        target = src_dir / f"{package}-{version}"
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.endswith(TEXT_SUFFIXES):
                    archive.extract(name, target)


def problems(knowledge: Path, src_dir: Path, *, fetch: bool = False) -> list[str]:
    found: list[str] = []
    line_counts: dict[Path, int] = {}
    for source in wheel_sources(knowledge):
        tree = src_dir / f"{source.package}-{source.version}"
        if not tree.is_dir() and fetch:
            download(source.package, source.version, src_dir)
        if not tree.is_dir():
            found.append(f"{source.file}: {source}: no extracted wheel at {tree}")
            continue
        file = tree / source.path
        if not file.is_file():
            found.append(f"{source.file}: {source}: the wheel has no such file")
            continue
        if source.last_line is not None:
            if file not in line_counts:
                line_counts[file] = len(file.read_text(encoding="utf-8", errors="replace").splitlines())
            if source.last_line > line_counts[file]:
                found.append(f"{source.file}: {source}: the file has only {line_counts[file]} lines")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src-dir", type=Path, required=True, help="extracted wheels, one directory per release")
    parser.add_argument("--knowledge", type=Path, default=Path(__file__).resolve().parents[1] / "knowledge")
    parser.add_argument("--download", action="store_true", help="pip download wheels that are missing")
    args = parser.parse_args(argv)
    args.src_dir.mkdir(parents=True, exist_ok=True)
    found = problems(args.knowledge, args.src_dir, fetch=args.download)
    for problem in found:
        print(problem)
    total = sum(1 for _ in wheel_sources(args.knowledge))
    print(f"{total} wheel sources checked, {len(found)} do not resolve")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
