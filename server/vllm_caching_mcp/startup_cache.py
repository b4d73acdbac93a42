"""A per-user cache of an object that is slow to build and fully determined by some input bytes.

The server loads and validates the whole knowledge base at every start-up (so a broken file
fails there, with one line). Parsing the YAML is most of that time; unpickling the object a
previous start-up already validated is an order of magnitude faster. The cache file is used only
when its key — a hash of every input it was built from — matches, and its payload hash checks
out; anything else (missing, stale, corrupt, written by another user, an unwritable directory)
falls back to building, silently. It can make start-up slower by one hash, never an answer wrong.

File layout: MAGIC, then the SHA-256 of the inputs, then the SHA-256 of the payload, then the
pickle. Each install (this package's directory under one Python) has its own file per name
(`file_name`): two installs of one release, in two virtual environments, would otherwise overwrite
each other's entry at every start and each start after the other's would build again. The
directory is the one the HTTP clients cache in (``$VLLM_CACHING_MCP_CACHE_DIR``, else
``$XDG_CACHE_HOME/vllm-caching-mcp``, else ``~/.cache/vllm-caching-mcp``).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

MAGIC = b"vllm-caching-mcp startup cache 1\n"
_DIGEST_SIZE = hashlib.sha256().digest_size

# http_client.default_cache_dir delegates here, so start-up does not import httpx to find the directory.
CACHE_DIR_ENV = "VLLM_CACHING_MCP_CACHE_DIR"
# Set to any non-empty value, start-up neither reads nor writes this cache (the HTTP clients' caches
# are unaffected): to measure what it buys, or to rule it out.
DISABLE_ENV = "VLLM_CACHING_MCP_NO_STARTUP_CACHE"


def cache_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """The per-user cache directory (also the HTTP clients'), or None when there is no home to put it in."""
    env = os.environ if env is None else env
    if env.get(CACHE_DIR_ENV):
        return Path(env[CACHE_DIR_ENV]).expanduser()
    base = env.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no HOME and no passwd entry
            return None
    return Path(base).expanduser() / "vllm-caching-mcp"


def inputs_digest(parts: Iterable[bytes]) -> bytes:
    """One hash over several inputs; each is length-prefixed, so no two lists hash alike by concatenation."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.digest()


def _read(path: Path, key: bytes, expected: type[T]) -> T | None:
    try:
        with path.open("rb") as file:
            if hasattr(os, "getuid") and os.fstat(file.fileno()).st_uid != os.getuid():
                return None  # only unpickle what this user wrote
            data = file.read()
    except OSError:
        return None
    header = len(MAGIC) + 2 * _DIGEST_SIZE
    if len(data) < header or not data.startswith(MAGIC):
        return None
    stored_key = data[len(MAGIC) : len(MAGIC) + _DIGEST_SIZE]
    payload_digest = data[len(MAGIC) + _DIGEST_SIZE : header]
    payload = data[header:]
    if stored_key != key or hashlib.sha256(payload).digest() != payload_digest:
        return None
    try:
        value = pickle.loads(payload)
    except Exception:  # any unpickling failure means "build it again"
        return None
    return value if isinstance(value, expected) else None


def _write(path: Path, key: bytes, value: object) -> None:
    try:
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Written aside and renamed, so a concurrent start-up reads the old file or the new one, never half.
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(MAGIC + key + hashlib.sha256(payload).digest() + payload)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass  # an unwritable cache costs the next start-up time, nothing else


def file_name(name: str) -> str:
    """The cache file of ``name`` for this install: the package's path and the interpreter, hashed."""
    install = f"{Path(__file__).resolve().parent}\0{sys.executable}\0{sys.prefix}".encode()
    return f"{name}-{hashlib.sha256(install).hexdigest()[:16]}.pickle"


def _startup_cache_dir() -> Path | None:
    return None if os.environ.get(DISABLE_ENV) else cache_dir()


def read(name: str, inputs: Iterable[bytes], expected: type[T]) -> T | None:
    """The object cached under ``name`` if it was built from exactly ``inputs``, else None."""
    directory = _startup_cache_dir()
    return None if directory is None else _read(directory / file_name(name), inputs_digest(inputs), expected)


def write(name: str, inputs: Iterable[bytes], value: object) -> None:
    """Cache ``value`` under ``name`` as built from ``inputs``; a failure to write is silent."""
    directory = _startup_cache_dir()
    if directory is not None:
        _write(directory / file_name(name), inputs_digest(inputs), value)


def load_or_build(name: str, inputs: Iterable[bytes], expected: type[T], build: Callable[[], T]) -> T:
    """The object cached under ``name`` if it was built from exactly ``inputs``; else ``build()``, stored."""
    inputs = list(inputs)
    cached = read(name, inputs, expected)
    if cached is not None:
        return cached
    value = build()
    write(name, inputs, value)
    return value
