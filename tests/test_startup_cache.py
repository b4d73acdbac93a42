"""The start-up cache of the validated knowledge: used only when it is exactly what a fresh load gives.

An operator's questions: does the server start faster the second time; does an edited knowledge file,
a half-written or tampered cache file, or a cache directory it cannot write ever change an answer
or stop the server? (No: each of those falls back to loading the files.)
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from pathlib import Path

import pytest

from vllm_caching_mcp import startup_cache
from vllm_caching_mcp.knowledge import Knowledge, load_knowledge
from vllm_caching_mcp.startup_cache import CACHE_DIR_ENV, DISABLE_ENV, MAGIC, inputs_digest, load_or_build

HEADER = len(MAGIC) + 2 * 32  # magic, SHA-256 of the inputs, SHA-256 of the payload


class Builds:
    """A build function that counts its calls."""

    def __init__(self, value: object) -> None:
        self.value = value
        self.calls = 0

    def __call__(self) -> object:
        self.calls += 1
        return self.value


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv(CACHE_DIR_ENV, str(directory))
    return directory


def test_second_load_with_the_same_inputs_is_served_from_the_file(cache_dir: Path) -> None:
    build = Builds({"answer": 42})
    assert load_or_build("thing", [b"a", b"b"], dict, build) == {"answer": 42}
    assert load_or_build("thing", [b"a", b"b"], dict, build) == {"answer": 42}
    assert build.calls == 1
    data = (cache_dir / startup_cache.file_name("thing")).read_bytes()
    assert data.startswith(MAGIC)
    assert data[len(MAGIC) : len(MAGIC) + 32] == inputs_digest([b"a", b"b"])


def test_changed_inputs_make_the_file_stale_and_it_is_rebuilt(cache_dir: Path) -> None:
    load_or_build("thing", [b"old file"], dict, Builds({"v": "old"}))
    build = Builds({"v": "new"})
    assert load_or_build("thing", [b"new file"], dict, build) == {"v": "new"}
    assert build.calls == 1
    # ... and the rebuilt value replaced the stale one.
    assert load_or_build("thing", [b"new file"], dict, Builds({"v": "unused"})) == {"v": "new"}


def test_inputs_are_hashed_as_a_list_not_as_their_concatenation() -> None:
    assert inputs_digest([b"ab", b"c"]) != inputs_digest([b"a", b"bc"])


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[: len(data) // 2], id="truncated"),
        pytest.param(lambda data: data[:-1] + bytes([data[-1] ^ 1]), id="one bit flipped in the payload"),
        pytest.param(lambda data: b"not a cache file at all", id="garbage"),
        pytest.param(lambda data: b"", id="empty"),
        pytest.param(
            lambda data: data[:HEADER] + pickle.dumps({"v": "tampered"}), id="payload swapped, digest not updated"
        ),
    ],
)
def test_a_damaged_file_is_ignored_and_rebuilt(cache_dir: Path, damage: object) -> None:
    load_or_build("thing", [b"x"], dict, Builds({"v": "good"}))
    path = cache_dir / startup_cache.file_name("thing")
    path.write_bytes(damage(path.read_bytes()))  # type: ignore[operator]
    build = Builds({"v": "good"})
    assert load_or_build("thing", [b"x"], dict, build) == {"v": "good"}
    assert build.calls == 1


def test_a_well_formed_file_holding_the_wrong_type_is_rebuilt(cache_dir: Path) -> None:
    load_or_build("thing", [b"x"], list, Builds(["a list"]))
    build = Builds({"v": "a dict"})
    assert load_or_build("thing", [b"x"], dict, build) == {"v": "a dict"}
    assert build.calls == 1


def test_an_unwritable_cache_directory_still_gives_the_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A regular file where the directory should be: mkdir fails even for root, unlike a chmod.
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_DIR_ENV, str(blocker / "cache"))
    build = Builds({"v": 1})
    assert load_or_build("thing", [b"x"], dict, build) == {"v": 1}
    assert load_or_build("thing", [b"x"], dict, build) == {"v": 1}
    assert build.calls == 2  # nothing could be stored, so each load builds


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() == 0, reason="root writes through read-only modes")
def test_a_read_only_cache_directory_still_gives_the_answer(cache_dir: Path) -> None:
    cache_dir.mkdir(mode=0o500)
    try:
        build = Builds({"v": 1})
        assert load_or_build("thing", [b"x"], dict, build) == {"v": 1}
        assert build.calls == 1
        assert list(cache_dir.iterdir()) == []
    finally:
        cache_dir.chmod(0o700)


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to give the file away")
def test_a_file_owned_by_another_user_is_not_unpickled(cache_dir: Path) -> None:
    load_or_build("thing", [b"x"], dict, Builds({"v": "mine"}))
    os.chown(cache_dir / startup_cache.file_name("thing"), 65534, -1)
    build = Builds({"v": "rebuilt"})
    assert load_or_build("thing", [b"x"], dict, build) == {"v": "rebuilt"}
    assert build.calls == 1


def test_no_home_directory_means_no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(startup_cache, "cache_dir", lambda: None)
    build = Builds({"v": 1})
    assert load_or_build("thing", [b"x"], dict, build) == {"v": 1}
    assert build.calls == 1


def test_the_switch_turns_the_cache_off_for_reading_and_writing(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_or_build("thing", [b"x"], dict, Builds({"v": "stored before"}))
    monkeypatch.setenv(DISABLE_ENV, "1")
    build = Builds({"v": "built"})
    assert load_or_build("thing", [b"x"], dict, build) == {"v": "built"}  # the stored one is not read
    assert load_or_build("other", [b"x"], dict, build) == {"v": "built"}
    assert build.calls == 2
    assert sorted(p.name for p in cache_dir.iterdir()) == [startup_cache.file_name("thing")]  # nor is anything written
    monkeypatch.setenv(DISABLE_ENV, "")  # empty: on, as for PYTHONDONTWRITEBYTECODE
    assert load_or_build("thing", [b"x"], dict, build) == {"v": "stored before"}


def test_cache_directory_follows_the_http_clients_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert startup_cache.cache_dir() == tmp_path / "xdg" / "vllm-caching-mcp"
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "explicit"))
    assert startup_cache.cache_dir() == tmp_path / "explicit"


# The knowledge itself -------------------------------------------------------------------------------


def fresh_knowledge() -> Knowledge:
    """What the server loads at start-up, bypassing the in-process memo."""
    return load_knowledge.__wrapped__()


def test_the_cached_knowledge_is_the_knowledge_the_files_give(cache_dir: Path) -> None:
    first = fresh_knowledge()  # validated from the files, then stored
    assert (cache_dir / startup_cache.file_name("knowledge")).is_file()
    second = fresh_knowledge()  # from the file
    assert second == first
    assert second.by_id.keys() == first.by_id.keys()
    assert second.find("--kv-offloading-size") == first.find("--kv-offloading-size")
    assert second.directory == first.directory


def test_a_stale_knowledge_cache_holding_other_facts_is_not_used(cache_dir: Path) -> None:
    real = fresh_knowledge()
    path = cache_dir / startup_cache.file_name("knowledge")
    data = path.read_bytes()
    # The same file layout, but built from other inputs and carrying a different answer.
    doctored = real.model_copy(update={"directory": "/somewhere/else"})
    payload = pickle.dumps(doctored)
    stale_key = inputs_digest([b"knowledge from an older release"])
    path.write_bytes(MAGIC + stale_key + hashlib.sha256(payload).digest() + payload)
    assert fresh_knowledge().directory == real.directory
    key = slice(len(MAGIC), len(MAGIC) + 32)
    assert path.read_bytes()[key] == data[key]  # rewritten from a fresh load


def test_a_corrupt_knowledge_cache_does_not_stop_the_server(cache_dir: Path) -> None:
    real = fresh_knowledge()
    (cache_dir / startup_cache.file_name("knowledge")).write_bytes(MAGIC + b"\x00" * 100)
    assert fresh_knowledge() == real


def test_an_explicit_knowledge_directory_is_never_cached(cache_dir: Path, knowledge_copy: Path) -> None:
    load_knowledge.__wrapped__(str(knowledge_copy))
    assert not cache_dir.exists()


def test_two_installs_keep_their_own_entries(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two virtual environments with the same release overwrote one file at every start (the next start 2.1x)."""
    for prefix, value in (("/venv/a", ["built in a"]), ("/venv/b", ["built in b"])):
        monkeypatch.setattr(sys, "prefix", prefix)
        startup_cache.write("thing", [prefix.encode()], value)
    for prefix, value in (("/venv/a", ["built in a"]), ("/venv/b", ["built in b"])):
        monkeypatch.setattr(sys, "prefix", prefix)
        assert startup_cache.read("thing", [prefix.encode()], list) == value
    assert len(list(cache_dir.glob("thing-*.pickle"))) == 2
