"""Fetch the real-deployment corpus: every `source` of tests/data/real_deployments/EXPECTATIONS.yaml.

    python scripts/fetch_real_deployments.py --corpus CORPUS

Each file is read from ``{base-url}/{repository}/{commit}/{path}`` (GitHub's raw file host by
default) and written byte for byte to ``CORPUS/<key>``; keep CORPUS outside the repository, since
the files are third-party. A file that cannot be fetched is reported on standard error with its key
and why, and the rest are still fetched. Exit status: 0 when every file arrived, 1 when any did not,
2 on bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import urllib.parse
from pathlib import Path, PurePosixPath
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
DEFAULT_EXPECTATIONS = REPO / "tests" / "data" / "real_deployments" / "EXPECTATIONS.yaml"
DEFAULT_BASE_URL = "https://raw.githubusercontent.com"
MAX_FILE_BYTES = 4 << 20  # far above any deployment file; a body past it is not one


class ExpectationsError(Exception):
    """The expectations file cannot give the sources; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class Source:
    key: str
    repository: str
    path: str
    commit: str

    def url(self, base_url: str) -> str:
        quoted = "/".join(urllib.parse.quote(part, safe="") for part in (*self.repository.split("/"), self.commit))
        return f"{base_url.rstrip('/')}/{quoted}/{urllib.parse.quote(self.path)}"


def safe_key(key: str) -> bool:
    """A key names a file under the corpus: relative, without `..`, so no entry writes outside it."""
    parts = PurePosixPath(key).parts
    return bool(parts) and not PurePosixPath(key).is_absolute() and ".." not in parts and "\\" not in key


def source_of(key: str, entry: Any) -> Source:
    source = entry.get("source") if isinstance(entry, dict) else None
    if not safe_key(key):
        raise ExpectationsError(f"files: {key!r}: a key must be a relative path inside the corpus")
    if not isinstance(source, dict):
        raise ExpectationsError(f"files.{key}.source: missing")
    fields: dict[str, str] = {}
    for name in ("repository", "path", "commit"):
        value = source.get(name)
        if not isinstance(value, str) or not value:
            raise ExpectationsError(f"files.{key}.source.{name}: must be a non-empty string")
        fields[name] = value
    return Source(key=key, **fields)


def load_sources(path: Path) -> list[Source]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ExpectationsError(f"{path}: cannot read it ({exc})") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        raise ExpectationsError(f"{path}: files: must map each key to its expectations")
    try:
        return [source_of(str(key), entry) for key, entry in files.items()]
    except ExpectationsError as exc:
        raise ExpectationsError(f"{path}: {exc}") from None


def download(client: httpx.Client, url: str) -> bytes:
    """The body of a 200 answer, at most MAX_FILE_BYTES; anything else raises with the reason."""
    with client.stream("GET", url) as response:
        if response.status_code != 200:
            raise FetchError(f"HTTP {response.status_code} from {url}")
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > MAX_FILE_BYTES:
                raise FetchError(f"{url} is larger than {MAX_FILE_BYTES:,} bytes")
        return bytes(body)


class FetchError(Exception):
    pass


def fetch_one(client: httpx.Client, source: Source, base_url: str, corpus: Path, timeout: float) -> str | None:
    """Fetch and write one file; None when it arrived, otherwise why not."""
    url = source.url(base_url)
    try:
        data = download(client, url)
        target = corpus / source.key
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    except FetchError as exc:
        return str(exc)
    except httpx.TimeoutException:
        return f"no answer from {url} within {timeout:g} s"
    except httpx.HTTPError as exc:
        return f"{url}: {type(exc).__name__}: {exc}"
    except OSError as exc:
        return f"cannot write {corpus / source.key}: {exc.strerror or exc}"
    return None


def fetch_all(sources: list[Source], corpus: Path, base_url: str, timeout: float) -> list[tuple[str, str]]:
    """Every source fetched into the corpus; the (key, reason) of each that failed."""
    failed = []
    headers = {"User-Agent": "vllm-caching-mcp fetch_real_deployments"}
    with httpx.Client(timeout=timeout, follow_redirects=True, headers=headers) as client:
        for source in sources:
            why = fetch_one(client, source, base_url, corpus, timeout)
            if why is not None:
                failed.append((source.key, why))
                print(f"fetch_real_deployments: {source.key}: {why}", file=sys.stderr)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--corpus", required=True, type=Path, help="directory to write each file under its key")
    parser.add_argument("--expectations", type=Path, default=DEFAULT_EXPECTATIONS, help="EXPECTATIONS.yaml")
    parser.add_argument("--base-url", default=DEFAULT_BASE_URL, help=f"raw file host (default {DEFAULT_BASE_URL})")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default 30)")
    args = parser.parse_args(argv)
    try:
        sources = load_sources(args.expectations)
    except ExpectationsError as exc:
        print(f"fetch_real_deployments: {exc}", file=sys.stderr)
        return 2
    failed = fetch_all(sources, args.corpus, args.base_url, args.timeout)
    print(f"fetched {len(sources) - len(failed)} of {len(sources)} files into {args.corpus}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
