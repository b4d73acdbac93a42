"""Check that every `wheel:` and `sdist:` source in the knowledge points at a file and line that exist.

    python scripts/check_sources.py --src-dir ~/.cache/vllm-caching/src [--download]

The source directory holds extracted releases: wheels as ``vllm-0.33.0/vllm/...`` and
``lmcache-0.5.6/lmcache/...``, source distributions (which carry the examples and tests a wheel
leaves out) as ``vllm-0.33.0-sdist/examples/...``. With ``--download`` the releases a source names
but the directory lacks are fetched (wheels with ``pip download --no-deps``; source distributions
from the package index's JSON simple API, checked against its sha256) and their text files
extracted there; keep that directory outside the repository. Exit status 1 when any source does
not resolve.

With ``--pd-proxies`` it also checks every vLLM release that each ``pd_proxies`` entry of
``recipes.yaml`` covers: the script must be at its ``path`` in that release's source distribution
(a release published without one is reported as not checkable, not as a failure). Run it when a
release is added to ``releases.yaml``: proxy scripts have moved between releases before.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

from vllm_caching_mcp.versions import Version, in_range

RELEASE_SOURCE = re.compile(
    r"(?P<kind>wheel|sdist):(?P<pkg>[\w-]+)==(?P<ver>[\w.]+):(?P<path>[\w./-]+)(?::(?P<line>\d+)(?:-(?P<end>\d+))?)?"
)
TEXT_SUFFIXES = (".py", ".txt", ".json", ".cfg", ".toml", ".in", ".sh", ".md", ".yaml", ".yml")


def _is_text(name: str) -> bool:
    """A file the checks read: text by its suffix, or a Dockerfile (the release's image recipe)."""
    return name.endswith(TEXT_SUFFIXES) or name.rsplit("/", 1)[-1] == "Dockerfile"


DEFAULT_INDEX = "https://pypi.org/simple"


@dataclass(frozen=True)
class ReleaseSource:
    file: str
    kind: str  # "wheel" or "sdist"
    package: str
    version: str
    path: str
    last_line: int | None

    def __str__(self) -> str:
        line = f":{self.last_line}" if self.last_line else ""
        return f"{self.kind}:{self.package}=={self.version}:{self.path}{line}"

    def tree(self, src_dir: Path) -> Path:
        suffix = "-sdist" if self.kind == "sdist" else ""
        return src_dir / f"{self.package}-{self.version}{suffix}"


def release_sources(knowledge: Path) -> Iterator[ReleaseSource]:
    for yaml_file in sorted(knowledge.glob("*.yaml")):
        for m in RELEASE_SOURCE.finditer(yaml_file.read_text(encoding="utf-8")):
            last = m.group("end") or m.group("line")
            yield ReleaseSource(
                yaml_file.name,
                m.group("kind"),
                m.group("pkg"),
                m.group("ver"),
                m.group("path"),
                int(last) if last else None,
            )


def download_wheel(package: str, version: str, target: Path) -> None:
    """Fetch one wheel and extract its text files into ``target``."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, f"{package}=={version}"],
            check=True,
        )
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if _is_text(name):
                    archive.extract(name, target)


def download_sdist(package: str, version: str, target: Path, index: str) -> None:
    """Fetch one source distribution, check its sha256, and extract its text files into ``target``
    without the archive's top-level directory."""
    wanted = f"{package}-{version}.tar.gz"
    with httpx.Client(timeout=120, follow_redirects=True) as client:
        listing = client.get(
            f"{index.rstrip('/')}/{package}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
        )
        listing.raise_for_status()
        entry = next((f for f in listing.json()["files"] if f["filename"] == wanted), None)
        if entry is None:
            raise LookupError(f"the index has no {wanted}")
        data = client.get(httpx.URL(listing.url).join(entry["url"])).raise_for_status().content
    expected = entry.get("hashes", {}).get("sha256")
    if expected is None or hashlib.sha256(data).hexdigest() != expected:
        raise ValueError(f"{wanted}: sha256 does not match the index")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:  # all or nothing: a member that would land outside the tree fails the whole archive
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            for member in archive.getmembers():
                _, _, inner = member.name.partition("/")
                if member.isfile() and inner and _is_text(inner):
                    member.name = inner
                    archive.extract(member, staging, filter="data")
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# What fetching a release can fail with: no such file on the index (LookupError), a bad hash
# (ValueError), an unsafe archive (TarError), the network, pip, or the disk.
FETCH_ERRORS = (OSError, tarfile.TarError, httpx.HTTPError, LookupError, ValueError, subprocess.CalledProcessError)


def fetch_release(source: ReleaseSource, tree: Path, index: str) -> None:
    """Download the wheel or sdist ``source`` names and extract it at ``tree``; raises one of FETCH_ERRORS."""
    if source.kind == "sdist":
        download_sdist(source.package, source.version, tree, index)
    else:
        download_wheel(source.package, source.version, tree)


def problems(knowledge: Path, src_dir: Path, *, fetch: bool = False, index: str = DEFAULT_INDEX) -> list[str]:
    found: list[str] = []
    line_counts: dict[Path, int] = {}
    failed: set[Path] = set()
    for source in release_sources(knowledge):
        tree = source.tree(src_dir)
        if not tree.is_dir() and fetch and tree not in failed:
            try:
                fetch_release(source, tree, index)
            except FETCH_ERRORS as exc:
                failed.add(tree)
                found.append(f"{source.file}: {source}: could not fetch the {source.kind}: {exc}")
                continue
        if not tree.is_dir():
            if tree not in failed:
                found.append(f"{source.file}: {source}: no extracted {source.kind} at {tree}")
            continue
        file = tree / source.path
        if not file.is_file():
            found.append(f"{source.file}: {source}: the {source.kind} has no such file")
            continue
        if source.last_line is not None:
            if file not in line_counts:
                line_counts[file] = len(file.read_text(encoding="utf-8", errors="replace").splitlines())
            if source.last_line > line_counts[file]:
                found.append(f"{source.file}: {source}: the file has only {line_counts[file]} lines")
    return found


def proxy_problems(
    knowledge: Path, src_dir: Path, *, fetch: bool = False, index: str = DEFAULT_INDEX
) -> tuple[list[str], list[str], int]:
    """Problems, not-checkable notes and the number of (proxy, release) pairs checked."""
    lines = yaml.safe_load((knowledge / "releases.yaml").read_text(encoding="utf-8"))["lines"]
    releases = [Version(r["version"]) for line in lines if line["package"] == "vllm" for r in line["releases"]]
    proxies = yaml.safe_load((knowledge / "recipes.yaml").read_text(encoding="utf-8")).get("pd_proxies", [])
    found: list[str] = []
    unchecked: list[str] = []
    checked = 0
    failed: dict[Version, BaseException] = {}  # releases whose sdist could not be had, and why
    for proxy in proxies:
        for release in releases:
            if not in_range(proxy["versions"], release):
                continue
            source = ReleaseSource("recipes.yaml", "sdist", "vllm", str(release), proxy["path"], None)
            tree = source.tree(src_dir)
            if not tree.is_dir() and fetch and release not in failed:
                try:
                    fetch_release(source, tree, index)
                except FETCH_ERRORS as exc:
                    failed[release] = exc
            failure = failed.get(release)
            if isinstance(failure, LookupError):
                unchecked.append(f"pd_proxies {proxy['id']}: vllm {release} has no source distribution on the index")
                continue
            if failure is not None:
                found.append(f"pd_proxies {proxy['id']}: could not fetch the vllm {release} sdist: {failure}")
                continue
            if not tree.is_dir():
                found.append(f"pd_proxies {proxy['id']}: no extracted sdist at {tree}")
                continue
            checked += 1
            if not (tree / proxy["path"]).is_file():
                found.append(f"pd_proxies {proxy['id']}: vllm {release} has no {proxy['path']}")
    return found, unchecked, checked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src-dir", type=Path, required=True, help="extracted releases, one directory each")
    parser.add_argument("--knowledge", type=Path, default=Path(__file__).resolve().parents[1] / "knowledge")
    parser.add_argument("--download", action="store_true", help="fetch the wheels and sdists that are missing")
    parser.add_argument("--index-url", default=DEFAULT_INDEX, help="simple API for source distributions")
    parser.add_argument("--pd-proxies", action="store_true", help="check each proxy path in every release it covers")
    args = parser.parse_args(argv)
    args.src_dir.mkdir(parents=True, exist_ok=True)
    found = problems(args.knowledge, args.src_dir, fetch=args.download, index=args.index_url)
    for problem in found:
        print(problem)
    total = sum(1 for _ in release_sources(args.knowledge))
    print(f"{total} release sources checked, {len(found)} do not resolve")
    if not args.pd_proxies:
        return 1 if found else 0
    proxy_found, unchecked, checked = proxy_problems(
        args.knowledge, args.src_dir, fetch=args.download, index=args.index_url
    )
    for line in (*proxy_found, *unchecked):
        print(line)
    print(f"{checked} proxy paths checked, {len(proxy_found)} wrong, {len(unchecked)} not checkable")
    return 1 if found or proxy_found else 0


if __name__ == "__main__":
    sys.exit(main())
