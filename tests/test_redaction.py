"""The process-wide secret registry (vllm_caching_mcp.redact): what it masks, where it looks, and the logs.

The echoing GitHub and registry of tests/test_faults.py show it end to end; these pin down the
parts: which values become secrets (Secret, derived Basic forms, proxy credentials, issued tokens),
how strings nested in results are found, and that every log record is clean whatever logger made
it and whichever handler prints it.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import logging
import secrets
from pathlib import Path
from typing import NamedTuple

import pytest
from pydantic import BaseModel

from vllm_caching_mcp import redact
from vllm_caching_mcp.http_client import CacheEntry, DiskCache, NetworkPath, Secret
from vllm_caching_mcp.registry import Credentials


def planted(label: str) -> str:
    """A fresh secret: the registry lives as long as the process, so each test plants its own."""
    return f"PLANTED-{label}-{secrets.token_hex(6)}"


def test_a_secret_is_masked_wherever_it_stands_and_the_longest_match_wins() -> None:
    short = planted("short")
    longer = short + "-and-more"
    Secret(short)
    Secret(longer)
    assert redact.redact(f"a {short} b {longer}. {short}{short}") == "a *** b ***. ******"


def test_values_too_short_to_be_secrets_are_not_masked() -> None:
    redact.register("abc")
    assert redact.redact("abc abcd") == "abc abcd"


def test_basic_credentials_register_the_pair_and_its_base64() -> None:
    password = planted("password")
    Credentials("environment", username="ci", password=Secret(password))
    basic = base64.b64encode(f"ci:{password}".encode()).decode()
    assert redact.redact(f"Basic {basic} / ci:{password}") == "Basic *** / ***"


def test_proxy_credentials_are_secrets() -> None:
    password = planted("proxy")
    NetworkPath.from_env({"HTTPS_PROXY": f"http://puller:{password}@proxy.example.com:3128"})
    basic = base64.b64encode(f"puller:{password}".encode()).decode()
    assert password not in redact.redact(password) and basic not in redact.redact(f"Proxy-Authorization: {basic}")


def test_only_the_newest_issued_tokens_are_kept() -> None:
    tokens = [planted(f"issued-{i}") for i in range(redact.MAX_TRANSIENT + 1)]
    for token in tokens:
        redact.register(token, transient=True)
    assert redact.redact(tokens[0]) == tokens[0]  # the oldest made room
    assert redact.redact(tokens[-1]) == "***"


class Link(NamedTuple):
    name: str
    number: int


class Inner(BaseModel):
    text: str
    links: list[Link]


class Outer(BaseModel):
    inner: Inner
    by_name: dict[str, str]
    tags: tuple[str, ...]
    untouched: str


@dataclasses.dataclass(frozen=True)
class Record:
    title: str
    outer: Outer


def test_redact_value_reaches_every_string_and_keeps_what_did_not_change() -> None:
    secret = planted("nested")
    Secret(secret)
    clean_inner = Inner(text="nothing here", links=[Link("plain", 1)])
    value = Record(
        title=f"title {secret}",
        outer=Outer(
            inner=Inner(text=secret, links=[Link(f"pr {secret}", 7)]),
            by_name={secret: "key", "value": secret},
            tags=("a", secret),
            untouched="kept",
        ),
    )
    cleaned = redact.redact_value(value)
    assert secret not in repr(cleaned) and secret in repr(value)  # the original is not modified
    assert cleaned.outer.inner.links == [Link("pr ***", 7)] and isinstance(cleaned.outer.inner.links[0], Link)
    assert cleaned.outer.by_name == {"***": "key", "value": "***"} and cleaned.outer.tags == ("a", "***")
    assert cleaned.outer.untouched is value.outer.untouched
    assert redact.redact_value(clean_inner) is clean_inner


def test_every_log_record_is_redacted_whatever_logger_made_it_and_handler_prints_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = planted("log")
    Secret(secret)
    stream = io.StringIO()
    late_handler = logging.StreamHandler(stream)  # a handler added after the secret existed
    late_handler.setFormatter(logging.Formatter("%(message)s"))
    child = logging.getLogger("vllm_caching_mcp_tests.some.child")  # as httpcore logs on httpcore.http11
    child.addHandler(late_handler)
    caplog.set_level(logging.DEBUG)
    try:
        child.debug("headers %s", [(b"X-Echo", f"Bearer {secret}".encode())])
        try:
            raise ValueError(f"the server said {secret}")
        except ValueError:
            child.exception("failed")
    finally:
        child.removeHandler(late_handler)
    for text in (caplog.text, stream.getvalue()):
        assert secret not in text and "Bearer ***" in text and "the server said ***" in text


def test_the_disk_cache_masks_a_secret_before_json_could_escape_it(tmp_path: Path) -> None:
    secret = planted('with"quote\\and-backslash')
    Secret(secret)
    cache = DiskCache(tmp_path)
    cache.put("key", CacheEntry({"title": f"echo {secret}"}, None, 0.0))
    written = (tmp_path / "key.json").read_text()
    assert json.dumps(secret)[1:-1] not in written and secret not in written
    assert json.loads(written)["body"] == {"title": "echo ***"}
