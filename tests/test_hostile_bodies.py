"""Response bodies that are small on the wire and huge once decoded, or encoded in ways nobody asked for.

The clients ask for gzip and deflate only, and inflate what arrives themselves, a bounded step at
a time (`http_client.BoundedDecoder`): a body never takes more memory than the body cap, however
it is compressed, and an encoding stacked on another (`gzip, gzip`: 1 GiB of zeros in 1,827 bytes)
or one not offered is refused before a byte is decoded. The fault matrix (test_faults) serves the
same bodies to both tools; here the decoder is checked on its own and the memory a call takes is
measured.
"""

from __future__ import annotations

import gzip
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest

from github_standin import FakeGitHub, Reply
from standin_http import BOMB_DECODED_BYTES, gzip_bombs
from test_github_client import ISSUE_PATH, client_for, status
from test_github_client import fake as fake  # the stand-in GitHub with one closed issue
from vllm_caching_mcp.github import GitHubError
from vllm_caching_mcp.http_client import ACCEPTED_ENCODINGS, BodyRefused, BoundedDecoder

CAP = 4 * 1024 * 1024
BODY = b'{"state": "closed", "pad": "' + b"x" * 50_000 + b'"}'


def decode(codings: list[str], data: bytes, limit: int = CAP, piece: int = 1000) -> bytes:
    decoder = BoundedDecoder(codings, limit)
    for start in range(0, len(data), piece):
        decoder.feed(data[start : start + piece])
    return decoder.finish()


@pytest.mark.parametrize(
    ("codings", "encode"),
    [
        ([], lambda b: b),
        (["identity"], lambda b: b),
        (["gzip"], gzip.compress),
        (["x-gzip"], gzip.compress),
        (["GZIP"], gzip.compress),
        (["deflate"], zlib.compress),
        (["deflate"], lambda b: zlib.compress(b, wbits=-zlib.MAX_WBITS)),  # raw deflate, as some servers send
    ],
    ids=["none", "identity", "gzip", "x-gzip", "upper case", "deflate", "raw deflate"],
)
def test_the_encodings_asked_for_are_read_whole(codings: list[str], encode: object) -> None:
    assert decode(codings, encode(BODY)) == BODY  # type: ignore[operator]


def test_a_body_of_exactly_the_cap_is_read_and_one_byte_more_is_not() -> None:
    exact = b"a" * 10_000
    assert decode(["gzip"], gzip.compress(exact), limit=10_000) == exact
    with pytest.raises(BodyRefused, match="larger than 9999 bytes once decoded"):
        decode(["gzip"], gzip.compress(exact), limit=9_999)
    with pytest.raises(BodyRefused, match=r"larger than 9999 bytes$"):
        decode([], exact, limit=9_999)


@pytest.mark.parametrize(
    ("codings", "message"),
    [
        (["gzip", "gzip"], r"stacked content encodings \(gzip, gzip\)"),
        (["gzip", "identity", "deflate"], r"stacked content encodings \(gzip, deflate\)"),
        (["br"], r"a content encoding that was not asked for \(br\)"),
        (["zstd"], r"a content encoding that was not asked for \(zstd\)"),
        (["compress"], r"not asked for \(compress\)"),
    ],
)
def test_stacked_and_unasked_encodings_are_refused_before_decoding(codings: list[str], message: str) -> None:
    with pytest.raises(BodyRefused, match=message):
        BoundedDecoder(codings, CAP)


def test_broken_and_truncated_compressed_bodies_are_refused() -> None:
    with pytest.raises(BodyRefused, match="is not valid gzip data"):
        decode(["gzip"], b"this is not gzip")
    with pytest.raises(BodyRefused, match="ends before its gzip data does"):
        decode(["gzip"], gzip.compress(BODY)[:-20])


@pytest.mark.parametrize("bomb", list(gzip_bombs()), ids=list(gzip_bombs()))
def test_a_bomb_is_refused_within_the_cap_in_memory_and_time(bomb: str) -> None:
    body, coding = gzip_bombs()[bomb]
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(BodyRefused):
            decode([c.strip() for c in coding.split(",")], body, piece=65_536)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * CAP, f"{peak:,} bytes held while refusing a {BOMB_DECODED_BYTES:,}-byte body"
    assert time.monotonic() - started < 2.0


def test_the_client_offers_only_what_it_decodes_and_reads_gzip_answers(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.compress = True
    with client_for(fake.base, tmp_path) as client:
        assert status(client).state == "closed"
    assert {seen.headers["accept-encoding"] for seen in fake.requests} == {ACCEPTED_ENCODINGS}


@pytest.mark.parametrize("bomb", list(gzip_bombs()), ids=list(gzip_bombs()))
def test_the_client_refuses_a_bomb_without_inflating_it(bomb: str, fake: FakeGitHub, tmp_path: Path) -> None:
    body, coding = gzip_bombs()[bomb]
    fake.script(ISSUE_PATH, *[Reply(200, body, {"Content-Encoding": coding})] * 3)
    tracemalloc.start()
    try:
        with client_for(fake.base, tmp_path) as client, pytest.raises(GitHubError) as caught:
            status(client)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.reason == "bad_response"
    assert peak < 4 * CAP, f"{peak:,} bytes"
