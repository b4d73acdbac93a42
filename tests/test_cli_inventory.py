"""The `vllm serve` option inventory: the generator on two tiny fake releases, and the shipped file
answering the questions operators ask ("does 0.11.0 take --kv-offloading-size?")."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import REPO, Ran, run_in_process, script_main
from vllm_caching_mcp.knowledge import CliInventory, Knowledge
from vllm_caching_mcp.versions import Version

SCRIPT = REPO / "scripts" / "build_cli_inventory.py"

# A fake vLLM with the file layout the generator follows: serve.py imports make_arg_parser, which
# registers two literal options, the frontend dataclass fields, then the engine args.
SERVE = """\
from vllm.entrypoints.openai.cli_args import make_arg_parser
from vllm.utils import FlexibleArgumentParser


class ServeSubcommand:
    def subparser_init(self, subparsers):
        serve_parser = subparsers.add_parser("serve", usage="vllm serve [model_tag] [options]")
        return make_arg_parser(serve_parser)
"""

CLI_ARGS = """\
from dataclasses import dataclass

from vllm.engine.arg_utils import AsyncEngineArgs


@dataclass
class FrontendArgs:
    host: str | None = None
    port: int = 8000
    disable_fastapi_docs: bool = False

    @staticmethod
    def add_cli_args(parser):
        from vllm.engine.arg_utils import get_kwargs

        frontend_kwargs = get_kwargs(FrontendArgs)
        frontend_group = parser.add_argument_group(title="Frontend")
        for key, value in frontend_kwargs.items():
            frontend_group.add_argument(f"--{key.replace('_', '-')}", **value)
        return parser


def make_arg_parser(parser):
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--headless", action="store_true")
    parser = FrontendArgs.add_cli_args(parser)
    parser = AsyncEngineArgs.add_cli_args(parser)
    return parser
"""

CACHE_CONFIG = """\
from dataclasses import dataclass
from typing import Literal, Optional

CacheDType = Literal["auto", "fp8"]


@dataclass
class CacheConfig:
    block_size: int = 16
    cache_dtype: CacheDType = "auto"
    enable_prefix_caching: Optional[bool] = None
    swap_space: float = 4
"""

ARG_UTILS = """\
import argparse

from vllm.config import CacheConfig


def get_kwargs(cls):
    raise NotImplementedError("only read statically here")


class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        cache_kwargs = get_kwargs(CacheConfig)
        cache_group = parser.add_argument_group(title="CacheConfig")
        cache_group.add_argument("--block-size", **cache_kwargs["block_size"])
        cache_group.add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])
        cache_group.add_argument("--enable-prefix-caching", **cache_kwargs["enable_prefix_caching"])
        cache_group.add_argument("--swap-space", **cache_kwargs["swap_space"])
        for arg in ["--old-flag"]:
            parser.add_argument(arg, type=str, deprecated=True)
        parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
        return parser


class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser):
        parser = EngineArgs.add_cli_args(parser)
        parser.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction)
        return parser
"""

PARSER = """\
import argparse


class FlexibleArgumentParser(argparse.ArgumentParser):
    pass
"""

# The second release pairs --enable-X with --disable-X, as vLLM 0.33.0 does.
PARSER_WITH_PAIRS = """\
import argparse
from argparse import BooleanOptionalAction


class EnableDisableAction(BooleanOptionalAction):
    _inverse_prefixes = {"--enable-": "--disable-", "--disable-": "--enable-"}


class FlexibleArgumentParser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", BooleanOptionalAction, EnableDisableAction)
"""


def write_release(src: Path, version: str, *, newer: bool) -> None:
    """The older fake release has --swap-space; the newer one drops it and adds --kv-offloading-size."""
    cache_config, arg_utils = CACHE_CONFIG, ARG_UTILS
    if newer:
        cache_config = cache_config.replace("swap_space: float = 4", "kv_offloading_size: float | None = None")
        arg_utils = arg_utils.replace(
            '"--swap-space", **cache_kwargs["swap_space"]',
            '"--kv-offloading-size", **cache_kwargs["kv_offloading_size"]',
        )
    files = {
        "vllm/__init__.py": "",
        "vllm/entrypoints/__init__.py": "",
        "vllm/entrypoints/cli/__init__.py": "",
        "vllm/entrypoints/cli/serve.py": SERVE,
        "vllm/entrypoints/openai/__init__.py": "",
        "vllm/entrypoints/openai/cli_args.py": CLI_ARGS,
        "vllm/engine/__init__.py": "",
        "vllm/engine/arg_utils.py": arg_utils,
        "vllm/config/__init__.py": "from vllm.config.cache import CacheConfig\n",
        "vllm/config/cache.py": cache_config,
        "vllm/utils/__init__.py": PARSER_WITH_PAIRS if newer else PARSER,
    }
    for path, text in files.items():
        target = src / f"vllm-{version}" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def write_releases(path: Path, versions: list[str]) -> None:
    listed = [{"version": v, "date": "2026-01-01"} for v in versions]
    lines = [{"package": "vllm", "sources": ["pypi:vllm"], "verified_at": "2026-11-30", "releases": listed}]
    path.write_text(yaml.safe_dump({"lines": lines}))


def run_generator(tmp_path: Path, versions: list[str]) -> Ran:
    """scripts/build_cli_inventory.py over the fake sources in ``tmp_path``, run in this process."""
    write_releases(tmp_path / "releases.yaml", versions)
    return run_in_process(
        script_main(SCRIPT),
        "--src-dir",
        str(tmp_path / "src"),
        "--releases",
        str(tmp_path / "releases.yaml"),
        "--out",
        str(tmp_path / "cli_inventory.yaml"),
    )


@pytest.fixture
def fake_inventory(tmp_path: Path) -> tuple[CliInventory, str]:
    write_release(tmp_path / "src", "0.1.0", newer=False)
    write_release(tmp_path / "src", "0.2.0", newer=True)
    out = run_generator(tmp_path, ["0.1.0", "0.2.0"])
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "cli_inventory.yaml").read_text()
    return CliInventory.model_validate(yaml.safe_load(text)), text


# Written out by hand from the fake sources above.
OLDER = {
    "-h": False,  # argparse adds -h/--help to the serve subparser
    "--help": False,
    "--headless": False,  # store_true
    "--host": True,  # frontend dataclass fields, one option each
    "--port": True,
    "--disable-fastapi-docs": False,  # bool field -> BooleanOptionalAction -> also --no-...
    "--no-disable-fastapi-docs": False,
    "--block-size": True,
    "--kv-cache-dtype": True,  # Literal alias, takes a value
    "--enable-prefix-caching": False,  # Optional[bool] field
    "--no-enable-prefix-caching": False,
    "--swap-space": True,
    "--old-flag": True,  # from the loop over a literal list
    "--tensor-parallel-size": True,
    "-tp": True,
    "--enable-log-requests": False,  # explicit BooleanOptionalAction
    "--no-enable-log-requests": False,
}
NEWER_ADDS = {
    "--kv-offloading-size": True,
    # the inverse spellings the registered EnableDisableAction adds
    "--enable-fastapi-docs": False,
    "--disable-prefix-caching": False,
    "--disable-log-requests": False,
}


def test_fake_releases_list_every_option_of_each(fake_inventory: tuple[CliInventory, str]) -> None:
    inventory, _ = fake_inventory
    older = set(OLDER)
    newer = (older - {"--swap-space"}) | set(NEWER_ADDS)
    assert inventory.accepted(Version("0.1.0")) == older
    assert inventory.accepted(Version("0.2.0")) == newer


def test_fake_releases_record_lifecycles_and_switches(fake_inventory: tuple[CliInventory, str]) -> None:
    inventory, _ = fake_inventory
    by_flag = {f.flag: f for f in inventory.flags}
    assert (by_flag["--swap-space"].introduced, by_flag["--swap-space"].removed) == (None, Version("0.2.0"))
    size = by_flag["--kv-offloading-size"]
    assert (size.introduced, size.removed) == (Version("0.2.0"), None)
    assert (by_flag["--port"].introduced, by_flag["--port"].removed) == (None, None)
    assert {f: by_flag[f].takes_value for f in OLDER} == OLDER
    assert {f: by_flag[f].takes_value for f in NEWER_ADDS} == NEWER_ADDS


def test_fake_output_is_sorted_cited_and_marked_generated(fake_inventory: tuple[CliInventory, str]) -> None:
    inventory, text = fake_inventory
    flags = [f.flag for f in inventory.flags]
    assert flags == sorted(flags)
    assert text.startswith("# Every option `vllm serve` accepts")
    assert "GENERATED" in text.splitlines()[0]
    assert "wheel:vllm==0.2.0:vllm/engine/arg_utils.py" in inventory.sources
    assert "wheel:vllm==0.1.0:vllm/engine/arg_utils.py" in inventory.sources
    assert "wheel:vllm==0.2.0:vllm/entrypoints/openai/cli_args.py" in inventory.sources
    assert str(inventory.verified_at) == "2026-11-30"


def test_a_release_without_extracted_source_is_an_error(tmp_path: Path) -> None:
    write_release(tmp_path / "src", "0.1.0", newer=False)
    out = run_generator(tmp_path, ["0.1.0", "0.2.0"])
    assert out.returncode == 1
    assert "vllm 0.2.0" in out.stderr and "no extracted wheel" in out.stderr
    assert not (tmp_path / "cli_inventory.yaml").exists()


# ---------------------------------------------------------------------------
# The shipped inventory, as operators ask


def accepts(knowledge: Knowledge, flag: str, version: str) -> bool:
    return flag in knowledge.cli_inventory.accepted(Version(version))


def test_kv_offloading_size_arrived_in_0_11_1(knowledge: Knowledge) -> None:
    assert not accepts(knowledge, "--kv-offloading-size", "0.11.0")
    assert accepts(knowledge, "--kv-offloading-size", "0.11.1")
    assert accepts(knowledge, "--kv-offloading-size", "0.33.0")


def test_calculate_kv_scales_is_gone_in_0_28_0(knowledge: Knowledge) -> None:
    assert accepts(knowledge, "--calculate-kv-scales", "0.27.1")
    assert not accepts(knowledge, "--calculate-kv-scales", "0.28.0")


def test_swap_space_is_gone_in_0_18_0(knowledge: Knowledge) -> None:
    assert accepts(knowledge, "--swap-space", "0.17.1")
    assert not accepts(knowledge, "--swap-space", "0.18.0")


def test_prefix_caching_can_be_switched_off(knowledge: Knowledge) -> None:
    for version in ("0.11.0", "0.22.0", "0.33.0"):
        assert accepts(knowledge, "--no-enable-prefix-caching", version)
    # the --disable-X spelling only exists once the parser pairs enable/disable (0.33.0)
    assert not accepts(knowledge, "--disable-prefix-caching", "0.32.0")
    assert accepts(knowledge, "--disable-prefix-caching", "0.33.0")
    (entry,) = knowledge.cli_inventory.entries("--enable-prefix-caching")
    assert entry.takes_value is False


def test_tensor_parallel_and_port_in_every_release(knowledge: Knowledge) -> None:
    for version in knowledge.release_versions():
        accepted = knowledge.cli_inventory.accepted(version)
        assert {"--tensor-parallel-size", "-tp", "--port", "--host", "--api-key"} <= accepted, version
    (tp,) = knowledge.cli_inventory.entries("-tp")
    assert tp.takes_value is True


def test_an_option_that_left_and_came_back_has_two_entries(knowledge: Knowledge) -> None:
    # --disable-log-requests: deprecated flag removed in 0.17.0, back in 0.33.0 as the inverse
    # of --enable-log-requests.
    runs = [(e.introduced, e.removed) for e in knowledge.cli_inventory.entries("--disable-log-requests")]
    assert runs == [(None, Version("0.17.0")), (Version("0.33.0"), None)]
    assert accepts(knowledge, "--disable-log-requests", "0.16.0")
    assert not accepts(knowledge, "--disable-log-requests", "0.17.0")
    assert accepts(knowledge, "--disable-log-requests", "0.33.0")


def test_inventory_versions_are_releases(knowledge: Knowledge) -> None:
    releases = set(knowledge.release_versions())
    for entry in knowledge.cli_inventory.flags:
        for version in (entry.introduced, entry.removed):
            assert version is None or version in releases, entry


def test_flag_entries_agree_with_the_inventory(knowledge: Knowledge) -> None:
    """flags.yaml lifecycles were checked by hand; the generated inventory must say the same.

    A setting's own name must be accepted exactly from `introduced` up to `removed`; its CLI
    aliases (negations, short forms) only inside that span, since some arrived later (0.33.0's
    --disable-X pairs, recorded there as changes).
    """
    versions = knowledge.release_versions()
    disagreements = []
    for setting in knowledge.settings:
        if setting.component != "vllm" or not setting.name.startswith("--"):
            continue
        lo = setting.introduced or versions[0]
        hi = setting.removed
        in_span = {v for v in versions if lo <= v and (hi is None or v < hi)}
        having = {v for v in versions if setting.name in knowledge.cli_inventory.accepted(v)}
        if having != in_span:
            disagreements.append(f"{setting.id}: {setting.name}")
        for alias in (a for a in setting.aliases if a.startswith("-")):
            alias_having = {v for v in versions if alias in knowledge.cli_inventory.accepted(v)}
            if not alias_having or not alias_having <= in_span:
                disagreements.append(f"{setting.id}: alias {alias}")
    assert disagreements == []


def test_the_per_release_option_cache_stays_bounded_under_arbitrary_versions(knowledge: Knowledge) -> None:
    inventory = knowledge.cli_inventory
    expected = inventory.accepted(Version("0.22.1"))
    for patch in range(1000):  # a shared server sees whatever versions callers type
        inventory.accepted(Version(f"0.22.1.post{patch}"))
    assert len(inventory._accepted_by_version) <= 256
    assert inventory.accepted(Version("0.22.1")) == expected
