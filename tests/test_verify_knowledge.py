"""scripts/verify_knowledge.py on small released-source trees built here (no download, no GPU).

Three fake vLLM releases (0.1.0, 0.2.0, 0.3.0) and one LMCache release, each with the files the
probes read: the flag definitions, a config class with a Literal alias, the connector factory, a
connector that gains SupportsHMA in 0.3.0, envs.py and a metrics logger. The knowledge written
next to them states most facts right and two wrong: a default port of 5601 (the code says 5600)
and a metric introduced in 0.3.0 (the code has it from 0.2.0).

The verifier's main() runs in-process; one test runs the script as documented, and every script
in scripts/ has its --help run that way.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import importlib.util
import io
import os
import subprocess
import sys
import typing
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from conftest import REPO
from vllm_caching_mcp.advice.common import cite, resolve_version
from vllm_caching_mcp.knowledge import FILES, Verification, load_knowledge
from vllm_caching_mcp.knowledge_files import knowledge_dir
from vllm_caching_mcp.verification import load_verification, newest_verified, verification_state
from vllm_caching_mcp.versions import Version

SCRIPTS = REPO / "scripts"
SCRIPT = SCRIPTS / "verify_knowledge.py"


def _verifier() -> ModuleType:
    """scripts/verifier as the script imports it: by its own name, from the directory next to it."""
    directory = SCRIPTS / "verifier"
    spec = importlib.util.spec_from_file_location(
        "verifier", directory / "__init__.py", submodule_search_locations=[str(directory)]
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["verifier"] = module
    spec.loader.exec_module(module)
    return module


_verifier()
cli = importlib.import_module("verifier.cli")
download = importlib.import_module("verifier.download")
report_module = importlib.import_module("verifier.report")
run_module = importlib.import_module("verifier.run")

ARG_UTILS = {
    "0.1.0": 'parser.add_argument("--old-flag", type=int)\n',
    "0.2.0": (
        "class EngineArgs:\n"
        "    kv_offloading_size: float | None = None\n"
        "    kv_offloading_backend: KVOffloadingBackend | None = CacheConfig.kv_offloading_backend\n"
        "\n"
        'cache_group.add_argument("--kv-offloading-size", type=float)\n'
        'cache_group.add_argument("--kv-offloading-backend", **cache_kwargs["kv_offloading_backend"])\n'
    ),
}
ARG_UTILS["0.3.0"] = ARG_UTILS["0.2.0"]
CACHE_CONFIG = {
    "0.1.0": "class CacheConfig:\n    block_size: int = 16\n",
    "0.2.0": (
        'KVOffloadingBackend = Literal["native", "lmcache"]\n\n'
        "class CacheConfig:\n    block_size: int = 16\n"
        "    kv_offloading_backend: KVOffloadingBackend | None = None\n"
    ),
    "0.3.0": (
        'KVOffloadingBackend = Literal["native", "lmcache"]\n\n'
        "class CacheConfig:\n    block_size: int = 16\n"
        '    kv_offloading_backend: KVOffloadingBackend = "native"\n'
    ),
}
CONNECTOR = {
    "0.1.0": "class OffloadingConnector(KVConnectorBase_V1):\n    pass\n",
    "0.2.0": "class OffloadingConnector(KVConnectorBase_V1):\n    pass\n",
    "0.3.0": "class OffloadingConnector(KVConnectorBase_V1, SupportsHMA):\n    pass\n",
}
METRICS = {
    "0.1.0": "",
    "0.2.0": 'gauge = Gauge(name="vllm:kv_offload_usage", documentation="x")\n',
    "0.3.0": 'gauge = Gauge(name="vllm:kv_offload_usage", documentation="x")\n',
}


def build_vllm(root: Path, version: str) -> Path:
    tree = root / f"vllm-{version}"
    files = {
        "vllm/engine/arg_utils.py": ARG_UTILS[version],
        "vllm/config/cache.py": "from typing import Literal\n\n" + CACHE_CONFIG[version],
        "vllm/distributed/kv_transfer/kv_connector/factory.py": (
            "KVConnectorFactory.register_connector(\n"
            '    "OffloadingConnector",\n'
            '    "vllm.distributed.kv_transfer.kv_connector.v1.offloading_connector",\n'
            '    "OffloadingConnector",\n'
            ")\n"
        ),
        "vllm/distributed/kv_transfer/kv_connector/v1/base.py": (
            "class KVConnectorBase_V1:\n    pass\n\nclass SupportsHMA:\n    pass\n"
        ),
        "vllm/distributed/kv_transfer/kv_connector/v1/offloading_connector.py": (
            "from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1, SupportsHMA\n\n"
            + CONNECTOR[version]
        ),
        "vllm/envs.py": (
            "import os\n\nenvironment_variables = {\n"
            '    "VLLM_SIDE_PORT": lambda: int(os.getenv("VLLM_SIDE_PORT", "5600")),\n'
            "}\n"
        ),
        "vllm/v1/metrics/loggers.py": METRICS[version],
    }
    for path, text in files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    return tree


def build_lmcache(root: Path, version: str) -> None:
    path = root / f"lmcache-{version}" / "lmcache" / "v1" / "config.py"
    path.parent.mkdir(parents=True)
    path.write_text('_CONFIG_DEFINITIONS = {\n    "chunk_size": {"type": int, "default": 256},\n}\n')


FACTS = {
    "releases.yaml": """
lines:
  - package: vllm
    sources: ['pypi:vllm']
    verified_at: 2026-11-30
    releases: [{version: '0.1.0'}, {version: '0.2.0'}, {version: '0.3.0'}]
  - package: lmcache
    sources: ['pypi:lmcache']
    verified_at: 2026-11-30
    releases: [{version: '0.5.6'}]
""",
    "flags.yaml": """
# CLI flags (a comment the update must keep)
settings:
  - id: flag.kv-offloading-size
    kind: cli_flag
    name: '--kv-offloading-size'
    config_path: CacheConfig.kv_offloading_size
    summary: Offload buffer size.
    introduced: '0.2.0'
    defaults:
      - {versions: '>=0.2.0', value: null}
    sources:
      - wheel:vllm==0.2.0:vllm/engine/arg_utils.py:5
    verified_at: 2026-11-01

  - id: flag.kv-offloading-backend
    kind: cli_flag
    name: '--kv-offloading-backend'
    config_path: CacheConfig.kv_offloading_backend
    summary: Which backend.
    introduced: '0.2.0'
    defaults:
      - {versions: '<0.3.0', value: null}
      - {versions: '>=0.3.0', value: native}
    accepted_values:
      - {versions: '', value: [native, lmcache]}
    sources:
      - wheel:vllm==0.2.0:vllm/config/cache.py:7
    verified_at: 2026-11-01

  - id: flag.old-flag
    kind: cli_flag
    name: '--old-flag'
    summary: Gone in 0.2.0.
    removed: '0.2.0'
    sources:
      - wheel:vllm==0.1.0:vllm/engine/arg_utils.py:1
    verified_at: 2026-11-01
""",
    "offloading.yaml": """
settings:
  - id: env.vllm-side-port
    kind: env_var
    name: VLLM_SIDE_PORT
    summary: Side channel port.
    defaults:
      - {versions: '', value: 5601}
    sources:
      - wheel:vllm==0.3.0:vllm/envs.py:4
    verified_at: 2026-11-01
""",
    "lmcache.yaml": """
settings:
  - id: lmcache.chunk_size
    name: LMCACHE_CHUNK_SIZE
    aliases: [chunk_size]
    kind: env_var
    component: lmcache
    summary: Tokens per chunk.
    defaults:
      - {versions: '', value: 256}
    sources:
      - wheel:lmcache==0.5.6:lmcache/v1/config.py:2
    verified_at: 2026-11-01
""",
    "connectors.yaml": """
connectors:
- id: connector.offloading
  name: OffloadingConnector
  summary: Native offload.
  hma:
  - {versions: '<0.3.0', value: 'no'}
  - {versions: '>=0.3.0', value: 'yes'}
  sources:
  - wheel:vllm==0.1.0:vllm/distributed/kv_transfer/kv_connector/factory.py:1
  verified_at: 2026-11-01
""",
    "metrics.yaml": """
metrics:
- id: metric.kv_offload_usage
  name: vllm:kv_offload_usage
  type: gauge
  summary: Stated wrongly as new in 0.3.0.
  introduced: '0.3.0'
  sources:
  - wheel:vllm==0.3.0:vllm/v1/metrics/loggers.py:1
  verified_at: 2026-11-01
""",
    "features.yaml": """
features:
- id: feature.unprobed
  name: Something no probe covers
  summary: A capability without a probe.
  sources:
  - wheel:vllm==0.3.0:vllm/envs.py
  verified_at: 2026-11-01
- id: feature.hma-offload
  name: HMA with native offload
  summary: Checked by a text probe.
  introduced: '0.3.0'
  probes:
  - {kind: text, target: 'class OffloadingConnector\\([^)]*SupportsHMA', files: ['vllm/distributed/*.py']}
  sources:
  - wheel:vllm==0.3.0:vllm/distributed/kv_transfer/kv_connector/v1/offloading_connector.py:3
  verified_at: 2026-11-01
""",
}


def _empty(model: type) -> dict[str, object]:
    """The smallest valid content of a knowledge file the test does not care about."""
    content: dict[str, object] = {}
    for name, info in model.model_fields.items():
        if not info.is_required():
            continue
        if name == "sources":
            content[name] = ["pypi:vllm"]
        elif name == "verified_at":
            content[name] = "2026-11-30"
        elif typing.get_origin(info.annotation) is dict:
            content[name] = {}
        else:
            content[name] = []
    return content


def _recipes() -> dict[str, object]:
    """recipes.yaml without recipes or proxies. The rest (one entry per tier kind, the render facts)
    must be there: it is the shipped file's, each tier's feature pointed at this world's unprobed one."""
    shipped = yaml.safe_load((knowledge_dir() / "recipes.yaml").read_text())
    tiers = [{**tier, "feature": "feature.unprobed"} if "feature" in tier else tier for tier in shipped["tier_types"]]
    return {**shipped, "recipes": [], "tier_types": tiers, "pd_proxies": []}


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """(knowledge directory, source directory) for the fake releases."""
    knowledge = tmp_path / "knowledge"
    knowledge.mkdir()
    for name, model in FILES.items():
        text = FACTS.get(name)
        if text is None:
            text = yaml.safe_dump(_recipes() if name == "recipes.yaml" else _empty(model))
        (knowledge / name).write_text(text)
    src = tmp_path / "src"
    for version in ("0.1.0", "0.2.0", "0.3.0"):
        build_vllm(src, version)
    build_lmcache(src, "0.5.6")
    return knowledge, src


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def run(knowledge: Path, *args: str) -> Ran:
    """The verifier's main() on ``knowledge``, offline; an argument error is exit status 2, as from the shell."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(["--knowledge", str(knowledge), "--no-download", *args])
        except SystemExit as exited:
            code = exited.code if isinstance(exited.code, int) else 2
    return Ran(code, out.getvalue(), err.getvalue())


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    """``python scripts/verify_knowledge.py ...`` exactly as the README and VERIFICATION.md show it."""
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def verdicts(knowledge: Path, src: Path) -> dict[str, typing.Any]:
    k = load_knowledge(str(knowledge))
    found, missing = run_module.verify(k, {"vllm": Version("0.3.0"), "lmcache": Version("0.5.6")}, [src], fetch=False)
    assert not missing
    return {v.entry.id: v for v in found}


def test_a_wrong_default_and_a_wrong_introduction_are_contradicted_with_file_and_line(
    world: tuple[Path, Path],
) -> None:
    knowledge, src = world
    out = run(knowledge, "--vllm", "0.3.0", "--lmcache", "0.5.6", "--src", str(src))
    assert out.returncode == 1, out.stdout + out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("CONTRADICTED")]
    assert len(lines) == 2, out.stdout
    port = next(line for line in lines if "env.vllm-side-port" in line)
    assert "the knowledge says 5601, the wheel has 5600" in port
    metric = next(line for line in lines if "metric.kv_offload_usage" in line)
    # the last release before the stated introduction already has it
    assert "on vllm 0.2.0: the knowledge says absent, the wheel has present" in metric
    assert "9 facts: 6 verified, 2 contradicted, 1 not checkable" in out.stdout


def test_each_probe_runs_on_both_sides_of_every_boundary(world: tuple[Path, Path]) -> None:
    knowledge, src = world
    found = verdicts(knowledge, src)

    size = found["flag.kv-offloading-size"]
    assert size.status == "verified"
    flag_runs = {(str(c.version), c.expected) for c in size.checks if c.probe.kind == "flag"}
    # absent in 0.1.0 (last release before), present in 0.2.0 (first inside) and 0.3.0 (newest)
    assert flag_runs == {("0.1.0", False), ("0.2.0", True), ("0.3.0", True)}
    assert size.newest_evidence().observed.where == "vllm/engine/arg_utils.py:5"

    backend = found["flag.kv-offloading-backend"]
    assert backend.status == "verified"
    defaults = {(str(c.version), c.expected) for c in backend.checks if c.probe.kind == "default"}
    assert defaults == {("0.2.0", None), ("0.3.0", "native")}  # EngineArgs copies CacheConfig's default
    literal = [c for c in backend.checks if c.probe.kind == "literal"]
    assert {c.observed.value for c in literal} == {("native", "lmcache")}  # through the Literal alias

    hma = [c for c in found["connector.offloading"].checks if c.probe.kind == "subclass"]
    assert {(str(c.version), c.observed.value) for c in hma} == {("0.1.0", False), ("0.2.0", False), ("0.3.0", True)}

    assert found["flag.old-flag"].status == "verified"
    assert found["lmcache.chunk_size"].status == "verified"
    assert found["feature.hma-offload"].status == "verified"
    assert found["feature.unprobed"].status == "not_checkable"


def test_wheels_are_read_in_place_without_extracting(world: tuple[Path, Path], tmp_path: Path) -> None:
    knowledge, src = world
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version in ("0.1.0", "0.2.0", "0.3.0"):
        tree = src / f"vllm-{version}"
        with zipfile.ZipFile(wheels / f"vllm-{version}-cp38-abi3-manylinux1_x86_64.whl", "w") as archive:
            for path in tree.rglob("*.py"):
                archive.write(path, str(path.relative_to(tree)))
    out = run(knowledge, "--vllm", "0.3.0", "--wheel-dir", str(wheels))  # --src's older spelling, kept working
    # without --lmcache the LMCache fact is not checkable
    assert "9 facts: 5 verified, 2 contradicted, 2 not checkable" in out.stdout, out.stdout + out.stderr


def test_missing_wheels_without_download_are_reported_not_guessed(world: tuple[Path, Path], tmp_path: Path) -> None:
    """Run as the documentation shows it: the script finds its package and the installed project itself."""
    knowledge, _ = world
    out = run_script("--vllm", "0.3.0", "--knowledge", str(knowledge), "--no-download", "--src", str(tmp_path / "e"))
    assert out.returncode == 2, out.stderr
    assert "missing vllm wheels (their checks are not checkable): 0.1.0, 0.2.0, 0.3.0" in out.stdout


@pytest.mark.parametrize("script", sorted(p.name for p in SCRIPTS.glob("*.py")))
def test_every_script_runs_as_documented_without_touching_the_import_path(script: str) -> None:
    source = (SCRIPTS / script).read_text()
    assert "sys.path" not in source  # it imports the installed vllm_caching_mcp and its own package
    out = subprocess.run([sys.executable, str(SCRIPTS / script), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("usage: "), out.stderr


def test_a_source_directory_inside_the_repository_is_refused(world: tuple[Path, Path]) -> None:
    knowledge, _ = world
    out = run(knowledge, "--vllm", "0.3.0", "--src", str(REPO / "wheels"))
    assert out.returncode == 2
    assert out.stderr.splitlines()[-1].endswith(
        f"error: --src: {REPO / 'wheels'} is inside the repository; give a directory outside it for the wheels"
    )
    assert not (REPO / "wheels").exists()


def test_without_src_the_wheels_go_to_the_user_cache() -> None:
    # conftest points XDG_CACHE_HOME at a throwaway directory for the whole suite
    assert download.default_src() == Path(os.environ["XDG_CACHE_HOME"]) / "vllm-caching-mcp" / "wheels"
    assert not download.default_src().resolve().is_relative_to(REPO)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--vllm", "abc"], "argument --vllm: 'abc' is not a release version (MAJOR.MINOR.PATCH, e.g. 0.33.0)"),
        (["--vllm", "0.3.0", "--lmcache", "0.5"], "error: --lmcache: 0.5 is not a lmcache release in knowledge/"),
    ],
)
def test_a_bad_release_is_one_line_naming_the_option(world: tuple[Path, Path], args: list[str], expected: str) -> None:
    knowledge, src = world
    out = run(knowledge, *args, "--src", str(src))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert expected in out.stderr.splitlines()[-1], out.stderr


def test_a_broken_knowledge_file_is_one_line_not_a_traceback(world: tuple[Path, Path]) -> None:
    knowledge, src = world
    (knowledge / "releases.yaml").write_text("lines:\n  - package: vllm\n")
    out = run(knowledge, "--vllm", "0.3.0", "--src", str(src))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("verify_knowledge: knowledge/releases.yaml: ") and out.stderr.count("\n") == 1


def test_update_refreshes_verified_facts_only_and_keeps_the_layout(world: tuple[Path, Path], tmp_path: Path) -> None:
    knowledge, src = world
    report = tmp_path / "VERIFICATION.md"
    report.write_text("# Verification\n\nHand-written fixes.\n\n" + report_module.REPORT_MARKER + "\nold body\n")
    out = run(
        knowledge, "--vllm", "0.3.0", "--lmcache", "0.5.6", "--src", str(src),
        "--update", "--report", str(report), "--date", "2026-12-24",
    )  # fmt: skip
    assert out.returncode == 1

    flags = (knowledge / "flags.yaml").read_text()
    assert flags.startswith("\n# CLI flags (a comment the update must keep)\n")
    assert flags.count("verified_at: 2026-12-24") == 3
    # the size flag cited only 0.2.0, a boundary witness: the 0.3.0 pointer is added, the old one kept
    assert (
        "      - wheel:vllm==0.2.0:vllm/engine/arg_utils.py:5\n      - wheel:vllm==0.3.0:vllm/engine/arg_utils.py:5\n"
        in flags
    )
    offloading = (knowledge / "offloading.yaml").read_text()
    assert "verified_at: 2026-11-01" in offloading  # the contradicted port keeps its date

    load_knowledge.cache_clear()
    assert load_knowledge(str(knowledge)).by_id["flag.old-flag"].verified_at == dt.date(2026, 12, 24)

    record = Verification.model_validate(yaml.safe_load((knowledge / "verification.yaml").read_text()))
    assert (str(record.vllm), str(record.lmcache), record.checked_at) == ("0.3.0", "0.5.6", dt.date(2026, 12, 24))
    status = {f.id: f.status for f in record.facts}
    assert status["env.vllm-side-port"] == "contradicted"
    assert status["connector.offloading"] == "verified"

    text = report.read_text()
    assert text.startswith("# Verification\n\nHand-written fixes.\n")
    assert "old body" not in text
    assert "### Contradicted (2)" in text and "`env.vllm-side-port`" in text
    assert str(src) not in text and str(tmp_path) not in text  # where the wheels were read is this machine's


def test_the_server_reports_verification_state_and_warns_past_the_newest_verified(
    world: tuple[Path, Path],
) -> None:
    knowledge, _ = world
    (knowledge / "verification.yaml").write_text(
        "checked_at: 2026-12-24\nvllm: '0.2.0'\nlmcache: '0.5.6'\nfacts:\n"
        "- {id: flag.kv-offloading-size, status: verified, versions: ['0.1.0', '0.2.0'],"
        " evidence: 'wheel:vllm==0.2.0:vllm/engine/arg_utils.py:5'}\n"
        "- {id: env.vllm-side-port, status: contradicted, detail: 'the wheel has 5600'}\n"
    )
    directory = str(knowledge)
    load_verification.cache_clear()
    state = verification_state("flag.kv-offloading-size", directory)
    assert (state.status, state.newest_verified, state.checked_at) == ("verified", "0.2.0", dt.date(2026, 12, 24))
    assert verification_state("env.vllm-side-port", directory).status == "contradicted"
    assert verification_state("metric.kv_offload_usage", directory).status == "not_yet_run"
    assert newest_verified("vllm", directory) == (Version("0.2.0"), dt.date(2026, 12, 24))

    k = load_knowledge(directory)
    _, context = resolve_version(k, "0.3.0")
    assert any("newer than 0.2.0, the newest release the knowledge was machine-verified" in w for w in context.warnings)
    _, context = resolve_version(k, "0.2.0")
    assert not any("machine-verified" in w for w in context.warnings)


def test_answers_from_the_real_knowledge_carry_the_verdict() -> None:
    k = load_knowledge()
    citation = cite("flag.kv-offloading-size", k.by_id["flag.kv-offloading-size"], k)
    record = load_verification(k.directory)
    if record is None:
        assert citation.verification.status == "not_yet_run"
    else:
        assert citation.verification.status == "verified"
        assert citation.verification.newest_verified == str(record.vllm)


# ---------------------------------------------------------------------------
# Advisories whose range end was read in the wheels: probes on the vulnerable code

MOONCAKE = "vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py"
RUN_SCRIPT = "lmcache/v1/internal_api_server/common/run_script_api.py"
UNGUARDED = '@router.post("/run_script")\nasync def run_script(request):\n    form = await request.form()\n'
GUARDED = (
    '@router.post("/run_script")\nasync def run_script(request):\n'
    "    if not _is_run_script_enabled(request):\n        return None\n    form = await request.form()\n"
)
HANDLER = r"async def run_script\(request\):\s*\n\s*form = await request\.form\(\)"
DUPLICATE = r"self\._reqs_need_send\[request\.request_id\] = \(request, \[\]\)"


def _advisory(identifier: str, package: str, ranges: str, sources: str = "") -> str:
    return (
        f"  - cve: {identifier}\n    package: {package}\n    title: t\n    severity: high\n"
        f"    ranges:\n{ranges}    applies: a\n    published: 2026-09-21\n"
        f"    sources:\n      - https://example.org/{identifier}\n{sources}    verified_at: 2026-12-01\n"
    )


ADVISORIES = "checked_at: 2026-12-01\nadvisories:\n" + "".join(
    (
        _advisory(  # the producer still takes a duplicate transfer_id in 0.3.0
            "CVE-2026-00001",
            "vllm",
            "      - affected: '<=0.2.0'\n        open_ended: true\n        unfixed_through: '0.3.0'\n"
            f"        probes:\n          - {{kind: text, target: '{DUPLICATE}', files: ['{MOONCAKE}']}}\n",
            f"      - wheel:vllm==0.3.0:{MOONCAKE}:2\n",
        ),
        _advisory(  # stated fixed in 0.3.0, but the code there still has it
            "CVE-2026-00002",
            "vllm",
            "      - affected: '<0.3.0'\n        fixed_in: '0.3.0'\n"
            f"        probes:\n          - {{kind: text, target: '{DUPLICATE}', files: ['{MOONCAKE}']}}\n",
        ),
        _advisory(  # derived: 0.5.6 checks run_script_api_enabled before reading the script
            "CVE-2026-00003",
            "lmcache",
            "      - affected: '<=0.5.5'\n        open_ended: true\n        fixed_in: '0.5.6'\n"
            "        fix_basis: derived\n"
            f"        probes:\n          - {{kind: text, target: '{HANDLER}', files: ['{RUN_SCRIPT}']}}\n"
            "          - kind: text\n"
            rf"            target: '\A(?![\s\S]*if not _is_run_script_enabled\(request\):)'"
            "\n"
            f"            files: ['{RUN_SCRIPT}']\n",
            f"      - wheel:lmcache==0.5.6:{RUN_SCRIPT}:3\n",
        ),
        _advisory(  # derived, with no probe yet
            "CVE-2026-00004",
            "lmcache",
            "      - {affected: '<=0.5.5', open_ended: true, fixed_in: '0.5.6', fix_basis: derived}\n",
            f"      - wheel:lmcache==0.5.6:{RUN_SCRIPT}:3\n",
        ),
        _advisory(  # published and unprobed: not the verifier's business
            "CVE-2026-00005", "lmcache", "      - {affected: '<0.5.6', fixed_in: '0.5.6'}\n"
        ),
    )
)


@pytest.fixture
def advisory_world(world: tuple[Path, Path]) -> tuple[Path, Path]:
    knowledge, src = world
    releases = knowledge / "releases.yaml"
    releases.write_text(
        releases.read_text().replace(
            "releases: [{version: '0.5.6'}]", "releases: [{version: '0.5.5'}, {version: '0.5.6'}]"
        )
    )
    build_lmcache(src, "0.5.5")
    for version, text in (("0.5.5", UNGUARDED), ("0.5.6", GUARDED)):
        (src / f"lmcache-{version}" / RUN_SCRIPT).parent.mkdir(parents=True)
        (src / f"lmcache-{version}" / RUN_SCRIPT).write_text(text)
    for version in ("0.2.0", "0.3.0"):
        path = src / f"vllm-{version}" / MOONCAKE
        path.parent.mkdir(parents=True)
        path.write_text("if ok:\n    self._reqs_need_send[request.request_id] = (request, [])\n")
    (knowledge / "advisories.yaml").write_text(ADVISORIES)
    load_knowledge.cache_clear()
    return knowledge, src


def test_advisory_probes_run_on_both_sides_of_the_fix_and_through_unfixed_through(
    advisory_world: tuple[Path, Path],
) -> None:
    found = verdicts(*advisory_world)
    assert "CVE-2026-00005" not in found  # a published fix with no probe is taken as published

    unfixed = found["CVE-2026-00001"]
    assert unfixed.file == "advisories.yaml"
    assert unfixed.status == "verified"
    # present in the last release the published range covers and in unfixed_through
    assert {(str(c.version), c.expected) for c in unfixed.checks} == {("0.2.0", True), ("0.3.0", True)}
    assert unfixed.newest_evidence().observed.where == f"{MOONCAKE}:2"

    derived = found["CVE-2026-00003"]
    assert derived.status == "verified", derived.detail()
    runs = {(c.probe.target[:5], str(c.version), c.expected) for c in derived.checks}
    assert runs == {
        (HANDLER[:5], "0.5.5", True), (HANDLER[:5], "0.5.6", False),
        (r"\A(?!", "0.5.5", True), (r"\A(?!", "0.5.6", False),
    }  # fmt: skip

    wrong = found["CVE-2026-00002"]
    assert wrong.status == "contradicted"
    assert "on vllm 0.3.0: the knowledge says absent, the wheel has present" in wrong.detail()

    unprobed = found["CVE-2026-00004"]
    assert (unprobed.status, unprobed.detail()) == (
        "not_checkable",
        "the range's end was read in the wheels but has no probe",
    )


def test_a_fix_probe_on_a_file_that_is_gone_is_not_checkable(advisory_world: tuple[Path, Path]) -> None:
    knowledge, src = advisory_world
    (src / "lmcache-0.5.6" / RUN_SCRIPT).unlink()
    derived = verdicts(knowledge, src)["CVE-2026-00003"]
    assert derived.status == "verified"  # the 0.5.5 side still holds
    assert f"none of {RUN_SCRIPT} is in 0.5.6" in derived.detail()
    assert {str(c.version) for c in derived.checks if c.status == "pass"} == {"0.5.5"}


def test_only_runs_the_chosen_facts_and_update_merges_them(advisory_world: tuple[Path, Path]) -> None:
    knowledge, src = advisory_world
    before = yaml.safe_dump(
        {"checked_at": "2026-11-30", "vllm": "0.3.0", "lmcache": "0.5.6", "facts": [
            {"id": "flag.old-flag", "status": "verified", "versions": ["0.1.0", "0.2.0"]},
            {"id": "CVE-2026-00003", "status": "not_checkable"},
            {"id": "gpu.x", "status": "not_checkable", "detail": "a gpu: not a claim about released code"},
        ]},
        sort_keys=False,
    )  # fmt: skip
    (knowledge / "verification.yaml").write_text(before)
    advisories = (knowledge / "advisories.yaml").read_text()
    out = run(
        knowledge, "--vllm", "0.3.0", "--lmcache", "0.5.6", "--src", str(src),
        "--only", "CVE-2026-0000[13]", "--update", "--date", "2026-12-24",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 facts: 2 verified, 0 contradicted, 0 not checkable" in out.stdout
    assert (knowledge / "advisories.yaml").read_text() == advisories  # the advisory entries stay as written
    record = Verification.model_validate(yaml.safe_load((knowledge / "verification.yaml").read_text()))
    assert record.checked_at == dt.date(2026, 11, 30)  # the rest is still the older run's
    facts = [(f.id, f.status, tuple(map(str, f.versions))) for f in record.facts]
    assert facts == [
        ("flag.old-flag", "verified", ("0.1.0", "0.2.0")),
        ("CVE-2026-00003", "verified", ("0.5.5", "0.5.6")),
        ("CVE-2026-00001", "verified", ("0.2.0", "0.3.0")),
        ("gpu.x", "not_checkable", ()),
    ]


def test_probes_on_a_range_need_an_end_and_a_presence_kind() -> None:
    from vllm_caching_mcp.knowledge import AffectedRange

    probe = {"kind": "text", "target": "x", "files": ["vllm/a.py"]}
    assert AffectedRange(affected="<0.2.0", fixed_in="0.2.0", probes=[probe]).probes[0].kind == "text"
    with pytest.raises(ValueError, match="need fixed_in or unfixed_through"):
        AffectedRange(affected="<=0.2.0", open_ended=True, probes=[probe])
    with pytest.raises(ValueError, match="presence kinds"):
        AffectedRange(affected="<0.2.0", fixed_in="0.2.0", probes=[{"kind": "default", "target": "A.b"}])


def test_the_shipped_advisory_probes_cover_the_wheel_read_range_ends() -> None:
    k = load_knowledge()
    probed = {a.id for a in k.advisories.advisories if any(r.probes for r in a.ranges)}
    assert {"CVE-2026-94627", "CVE-2026-107204", "CVE-2026-10813"} <= probed
    record = load_verification(k.directory)
    if record is not None:
        status = {f.id: f.status for f in record.facts}
        assert all(status.get(i) == "verified" for i in ("CVE-2026-94627", "CVE-2026-107204", "CVE-2026-10813"))


def test_an_advisory_flaw_read_before_its_range_is_checked_on_both_sides(knowledge: object) -> None:
    """flaw_present_from: the vulnerable code is there in that release and not in the known release before it."""
    from vllm_caching_mcp.knowledge import Knowledge

    assert isinstance(knowledge, Knowledge)
    plan_module = importlib.import_module("verifier.plan")
    advisory = next(a for a in knowledge.advisories.advisories if a.id == "GHSA-8wr5-jm2h-8r4f")
    releases = {"vllm": list(knowledge.release_versions("vllm"))}
    checks = plan_module.advisory_plan(plan_module.AdvisoryFact(advisory), releases)
    planned = {str(c.version): c.expected for c in checks}
    newest = str(releases["vllm"][-1])
    assert planned == {"0.16.0": False, "0.17.0": True, "0.23.0": True, "0.24.0": False, newest: False}


def test_a_release_with_only_a_source_distribution_is_read_from_its_extracted_sdist(tmp_path: Path) -> None:
    """LMCache 0.3.0 has no wheel: the verifier reads the tree check_sources.py extracts, DIR/lmcache-0.3.0-sdist."""
    sdist = tmp_path / "lmcache-0.3.0-sdist"
    (sdist / "lmcache" / "v1").mkdir(parents=True)
    (sdist / "lmcache" / "v1" / "config.py").write_text("chunk_size: int = 256\n")
    assert download.locate("lmcache", "0.3.0", [tmp_path]) == sdist
    # A wheel, where there is one, is read first.
    wheel = tmp_path / "lmcache-0.3.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("lmcache/v1/config.py", "chunk_size: int = 256\n")
    assert download.locate("lmcache", "0.3.0", [tmp_path]) == wheel
    source = importlib.import_module("verifier.source")
    tree = source.SourceTree("lmcache", "0.3.0", sdist)
    assert tree.paths == ["lmcache/v1/config.py"]


def test_each_releases_metadata_is_read_in_its_wheel_and_a_wrong_record_is_contradicted(tmp_path: Path) -> None:
    from vllm_caching_mcp.knowledge import Release, ReleaseLine

    plan_module = importlib.import_module("verifier.plan")
    source = importlib.import_module("verifier.source")
    shipped = {"0.1.0": (">=3.9", "==2.8.0"), "0.2.0": ("<3.15,>=3.10", "==2.9.0")}
    for version, (python, torch) in shipped.items():
        dist_info = tmp_path / f"vllm-{version}" / f"vllm-{version}.dist-info"
        dist_info.mkdir(parents=True)
        (dist_info / "METADATA").write_text(
            f"Metadata-Version: 2.4\nName: vllm\nVersion: {version}\nRequires-Python: {python}\n"
            f"Requires-Dist: torch{torch}\nRequires-Dist: torch==1.0; extra == 'old'\n\n"
            "Requires-Python: >=2.7 is only the description from here on\n"
        )
    recorded = ReleaseLine(
        package="vllm",
        sources=("pypi:vllm",),
        verified_at=dt.date(2026, 12, 3),
        releases=(
            Release(version="0.1.0", requires_python=">=3.9", requires={"torch": "==2.8.0"}),
            Release(version="0.2.0", requires_python=">=3.11,<3.15", requires={"torch": "==2.9.0"}),
        ),
    )
    releases = {"vllm": [Version("0.1.0"), Version("0.2.0")]}
    outcome = {}
    for field in ("requires_python", "requires"):
        fact = plan_module.ReleaseMetadataFact(recorded, field)
        for check in plan_module.plan(fact, releases):
            tree = source.SourceTree("vllm", str(check.version), tmp_path / f"vllm-{check.version}")
            run_module.run_check(check, tree)
            outcome[(fact.id, str(check.version))] = (check.status, check.observed.where if check.observed else None)
    assert outcome == {
        ("release.vllm.requires-python", "0.1.0"): ("pass", "vllm-0.1.0.dist-info/METADATA:4"),
        # the record says 3.11; the wheel admits 3.10 (the clauses' order does not matter)
        ("release.vllm.requires-python", "0.2.0"): ("fail", "vllm-0.2.0.dist-info/METADATA:4"),
        ("release.vllm.requires-dist", "0.1.0"): ("pass", "vllm-0.1.0.dist-info/METADATA:5"),
        ("release.vllm.requires-dist", "0.2.0"): ("pass", "vllm-0.2.0.dist-info/METADATA:5"),
    }
