"""The response cache is read only where this user alone could have written it, and what a digest names is
checked again when it comes from the cache.

An attack run planted entries in the cache directory: files of another owner or with group/other write
bits were read, and an entry stored under a blob's digest key came back, labelled `source: live`,
without its bytes being hashed again. Now a planted file is a miss (the answer is asked live, a warning
says why once), and a cached blob whose bytes no longer hash to its digest is fetched again.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from pathlib import Path

import pytest

from registry_standin import FakeRegistry, vllm_openai_config
from test_inspect_image import REPO, ask, use_registry
from vllm_caching_mcp.http_client import CacheEntry, DiskCache
from vllm_caching_mcp.knowledge import Knowledge


def stored(directory: Path) -> tuple[DiskCache, str]:
    cache = DiskCache(directory)
    key = DiskCache.key("GET", "https://example.invalid/x")
    cache.put(key, CacheEntry({"answer": 1}, None, time.time()))
    return cache, key


def test_an_entry_this_user_wrote_is_read(tmp_path: Path) -> None:
    cache, key = stored(tmp_path / "cache")
    entry = cache.get(key)
    assert entry is not None and entry.body == {"answer": 1}


@pytest.mark.parametrize("mode", [0o666, 0o620, 0o602])
def test_an_entry_others_could_have_written_is_a_miss(
    tmp_path: Path, mode: int, caplog: pytest.LogCaptureFixture
) -> None:
    cache, key = stored(tmp_path / "cache")
    (tmp_path / "cache" / f"{key}.json").chmod(mode)
    with caplog.at_level(logging.WARNING):
        assert cache.get(key) is None
    assert "another user could have written" in caplog.text


def test_a_directory_others_can_write_to_is_not_read(tmp_path: Path) -> None:
    cache, key = stored(tmp_path / "cache")
    (tmp_path / "cache").chmod(0o777)
    assert cache.get(key) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_an_entry_owned_by_another_user_is_a_miss(tmp_path: Path) -> None:
    cache, key = stored(tmp_path / "cache")
    os.chown(tmp_path / "cache" / f"{key}.json", 12345, -1)
    assert cache.get(key) is None


def test_a_link_in_place_of_an_entry_is_a_miss(tmp_path: Path) -> None:
    cache, key = stored(tmp_path / "cache")
    target = tmp_path / "elsewhere.json"
    (tmp_path / "cache" / f"{key}.json").rename(target)
    (tmp_path / "cache" / f"{key}.json").symlink_to(target)
    assert cache.get(key) is None


def test_a_planted_blob_under_its_digest_is_fetched_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knowledge: Knowledge
) -> None:
    with FakeRegistry() as registry:
        registry.add_image(REPO, "v0.22.1", {"amd64": vllm_openai_config()})
        use_registry(monkeypatch, {"VLLM_CACHING_MCP_REGISTRY_MIRROR": f"http://127.0.0.1:{registry.port}"}, tmp_path)
        first = ask(knowledge, image="v0.22.1")
        planted = vllm_openai_config(cuda="99.9.9")
        raw = base64.b64encode(json.dumps(planted).encode()).decode()
        blobs = 0
        for path in tmp_path.glob("*.json"):
            entry = json.loads(path.read_text())
            if isinstance(entry.get("body"), dict) and "raw" in entry["body"]:
                entry["body"]["raw"] = raw
                path.write_text(json.dumps(entry))
                blobs += 1
        assert blobs, "no digest-keyed entry was cached"
        before = len(registry.requests)
        again = ask(knowledge, image="v0.22.1")
    assert first.cuda_version.value == again.cuda_version.value != "99.9.9"
    assert len(registry.requests) > before  # the planted bytes did not hash to the digest: asked again
