"""The engine schema: the generator on tiny fake releases, the shipped file against its generator, the checks a
review calls (refused vs silently dropped), and check_version's answers for the names it holds."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass

from conftest import REPO, Ran, run_in_process, script_main
from vllm_caching_mcp.advice import engine_schema
from vllm_caching_mcp.knowledge import EngineSchema, Knowledge, load_knowledge
from vllm_caching_mcp.tools import run_tool
from vllm_caching_mcp.versions import Version

SCRIPT = REPO / "scripts" / "build_engine_schema.py"
SHARED = REPO / "scripts" / "wheel_trees" / "__init__.py"  # the generators' shared module, in the digest too
EXPECTED = REPO / "tests" / "data" / "engine_schema" / "expected.yaml"

# --- a fake vLLM 0.1.0 (plain pydantic dataclass: unknown fields ignored) and 0.2.0 (forbid) ---
KV_TRANSFER_OLD = """\
from dataclasses import field
from typing import Any, Optional
from pydantic.dataclasses import dataclass
from vllm.config.utils import config

@config
@dataclass
class KVTransferConfig:
    kv_connector: Optional[str] = None
    kv_buffer_size: float = 1e9
    kv_connector_extra_config: dict[str, Any] = field(default_factory=dict)
"""
KV_TRANSFER_NEW = """\
from dataclasses import field
from typing import Any, Literal
from vllm.config.utils import config

KVProducer = Literal["kv_producer", "kv_both"]
KVRole = Literal[KVProducer, "kv_consumer", "kv_both"]

@config
class KVTransferConfig:
    kv_connector: str | None = None
    kv_connector_extra_config: dict[str, Any] = field(default_factory=dict)
    kv_load_failure_policy: Literal["recompute", "fail"] = "fail"
    kv_role: KVRole | None = None
"""
KV_EVENTS = "from vllm.config.utils import config\n\n@config\nclass KVEventsConfig:\n    topic: str = ''\n"
UTILS_OLD = "def config(cls):\n    return cls\n"
UTILS_NEW = """\
from typing import overload
from pydantic import ConfigDict

@overload
def config(cls): ...

def config(cls=None, *, config=None):
    merged_config = ConfigDict(extra="forbid")
    return cls
"""
FACTORY = """\
KVConnectorFactory.register_connector(
    "OffloadingConnector", "vllm.distributed.kv_transfer.kv_connector.v1.offloading_connector", "OffloadingConnector"
)
KVConnectorFactory.register_connector(
    "NixlConnector", "vllm.distributed.kv_transfer.kv_connector.v1.nixl", "NixlConnector"
)
KVConnectorFactory.register_connector(
    "LMCacheConnectorV1", "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_connector", "LMCacheConnectorV1"
)
"""
LMCACHE_CONNECTOR = "from lmcache.integration.vllm.adapter import Impl\n"
ADAPTER = """\
def apply(config, vllm_config):
    skip = vllm_config.kv_transfer_config.get_from_extra_config("skip_last_n_tokens", 0)
    for key, value in vllm_config.kv_transfer_config.kv_connector_extra_config.items():
        if key.startswith("lmcache."):
            setattr(config, key[8:], value)
"""
NIXL = """\
DEFAULT_BACKENDS = ["UCX"]
def f(vllm_config):
    backends = vllm_config.kv_transfer_config.get_from_extra_config("backends", DEFAULT_BACKENDS)
    port = vllm_config.kv_transfer_config.kv_connector_extra_config["side_port"]
    model_loader_extra_config.get("not_a_connector_key", 1)
"""
CPU_SPEC = """\
class CPUOffloadingSpec:
    def __init__(self, extra_config):
        self.eviction_policy = self.extra_config.get("eviction_policy", "lru")
        if "cpu_bytes_to_use" in self.extra_config:
            pass
"""
# --- LMCache 0.1.0: the dataclass and from_file; 0.2.0: the key table and its alias resolution ---
LMCACHE_OLD = """\
from dataclasses import dataclass
from typing import Optional

@dataclass
class LMCacheEngineConfig:
    chunk_size: int
    nixl_role: Optional[str]

    @staticmethod
    def from_file(file_path):
        config = {}
        chunk_size = config.get("chunk_size", 256)
        nixl_role = config.get("nixl_role", None)
        if nixl_role is None:
            nixl_role = config.get("nixl_old_role", None)
"""
LMCACHE_NEW = """\
from typing import Optional

_CONFIG_ALIASES = {"nixl_role": "pd_role", "old_chunk": "chunk_size"}
_DEPRECATED_CONFIGS = {"old_chunk": "old_chunk is deprecated, use chunk_size instead"}
_CONFIG_DEFINITIONS = {
    "chunk_size": {"type": int, "default": 256, "env_converter": int},
    "pd_role": {"type": Optional[str], "default": None, "env_converter": str},
}

def _resolve_config_aliases(config_dict: dict, source: str) -> dict:
    resolved = {}
    for key, value in config_dict.items():
        if key in _DEPRECATED_CONFIGS:
            logger.warning(f"{_DEPRECATED_CONFIGS[key]} (source: {source})")
            if key in _CONFIG_ALIASES:
                resolved[_CONFIG_ALIASES[key]] = value
            else:
                resolved[key] = value
        elif key in _CONFIG_DEFINITIONS:
            resolved[key] = value
        else:
            logger.warning("Unknown configuration key: %s (source: %s)", key, source)
    return resolved
"""
V1 = "vllm/distributed/kv_transfer/kv_connector/v1"
# CacheConfig in the one config module of an older layout (0.1.0), then in vllm/config/cache.py (0.2.0): a
# pydantic Field default, a class constant as the default, a computed field (init=False, not recorded)
CACHE_OLD = """\
from dataclasses import dataclass, field
from typing import Literal
from pydantic import Field

BlockSize = Literal[8, 16]

@dataclass
class CacheConfig:
    block_size: BlockSize = Field(default=None)
    num_gpu_blocks: int | None = field(default=None, init=False)
"""
CACHE_NEW = """\
from typing import ClassVar
from pydantic import Field
from vllm.config.utils import config

@config
class CacheConfig:
    DEFAULT_UTILIZATION: ClassVar[float] = 0.92
    block_size: int = Field(None, gt=0)
    gpu_memory_utilization: float = Field(default=DEFAULT_UTILIZATION, gt=0, le=1)
"""
# vllm/envs.py: a parse rule around os.getenv, a helper given the name and the default, a merged table
ENVS_OLD = """\
import os
environment_variables = {
    "VLLM_A": lambda: int(os.getenv("VLLM_A", "0")),
    "VLLM_CHOICE": env_with_choices("VLLM_CHOICE", "auto", ["auto", "x"]),
}
"""
ENVS_NEW = """\
import os
_MORE = {
    "VLLM_B": lambda: os.environ.get("VLLM_B", "").lower() in ("1", "true"),
}
environment_variables = {
    "VLLM_A": lambda: int(os.getenv("VLLM_A", "1")),
    **_MORE,
}
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")


# LMCACHE_* names read outside the key table: a whole name, a prefix, an f-string head, and spellings that are
# none (the table reader's bare prefix, a message that starts like a name, a name inside an f-string)
LMCACHE_ENV = """\
import os
level = os.getenv("LMCACHE_LOG_LEVEL", "INFO")
PREFIX = "LMCACHE_CONTROLLER_"
def name(key): return f"LMCACHE_{key.upper()}"
def ec(key): return f"LMCACHE_EC_{key}"
def said(path): return f"LMCACHE_CONFIG_FILE: {path}"
"""


def _fixture(tmp: Path) -> tuple[Path, Path]:
    src = tmp / "src"
    common = {"vllm/config/kv_events.py": KV_EVENTS, "vllm/distributed/kv_transfer/kv_connector/factory.py": FACTORY}
    _write(
        src / "vllm-0.1.0",
        {**common, "vllm/config/kv_transfer.py": KV_TRANSFER_OLD, "vllm/config/utils.py": UTILS_OLD,
         f"{V1}/nixl/worker.py": NIXL, "vllm/config.py": CACHE_OLD, "vllm/envs.py": ENVS_OLD},
    )  # fmt: skip
    _write(
        src / "vllm-0.2.0",
        {**common, "vllm/config/kv_transfer.py": KV_TRANSFER_NEW, "vllm/config/utils.py": UTILS_NEW,
         f"{V1}/nixl/worker.py": NIXL, "vllm/v1/kv_offload/cpu/spec.py": CPU_SPEC,
         f"{V1}/lmcache_connector.py": LMCACHE_CONNECTOR, "vllm/config/cache.py": CACHE_NEW,
         "vllm/envs.py": ENVS_NEW},
    )  # fmt: skip
    _write(src / "lmcache-0.1.0-sdist", {"lmcache/v1/config.py": LMCACHE_OLD})  # published without a wheel
    _write(
        src / "lmcache-0.2.0",
        {"lmcache/v1/config.py": LMCACHE_NEW, "lmcache/integration/vllm/adapter.py": ADAPTER,
         "lmcache/logging.py": LMCACHE_ENV},
    )  # fmt: skip
    releases = {
        "lines": [
            {"package": "vllm", "releases": [{"version": v} for v in ("0.1.0", "0.2.0")]},
            {"package": "lmcache", "releases": [{"version": v} for v in ("0.1.0", "0.2.0", "0.3.0")]},
        ]
    }
    (tmp / "releases.yaml").write_text(yaml.safe_dump(releases), encoding="utf-8")
    return src, tmp / "releases.yaml"


def _generate(tmp: Path) -> tuple[Ran, str]:
    src, releases = _fixture(tmp)
    out = tmp / "engine_schema.yaml"
    ran = run_in_process(script_main(SCRIPT), "--src-dir", str(src), "--out", str(out), "--releases", str(releases))
    return ran, out.read_text(encoding="utf-8") if out.exists() else ""


def _without_digest(text: str) -> str:
    return re.sub(r"^generator_sha256: .*$", "generator_sha256: '…'", text, flags=re.MULTILINE)


def test_the_generator_reads_fields_extra_keys_lmcache_keys_and_what_lmcache_does_with_an_alias(
    tmp_path: Path,
) -> None:
    ran, text = _generate(tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "lmcache 0.3.0: no extracted wheel or sdist" in ran.stderr
    schema = EngineSchema.model_validate(yaml.safe_load(text))
    (cls,) = [c for c in schema.configs if c.name == "KVTransferConfig"]
    assert (
        cls.at("unknown_fields", Version("0.1.0")) == "ignore"
        and cls.at("unknown_fields", Version("0.2.0")) == "forbid"
    )
    fields = {f.name: f for f in schema.config_fields if f.config == "KVTransferConfig"}
    assert str(fields["kv_buffer_size"].removed) == "0.2.0" and fields["kv_buffer_size"].default == "1000000000.0"
    assert fields["kv_connector"].type == "str | None"  # Optional[str] in 0.1.0: one spelling, no change recorded
    assert fields["kv_connector_extra_config"].default == "dict()"
    assert str(fields["kv_load_failure_policy"].introduced) == "0.2.0"
    assert fields["kv_role"].type == "Literal['kv_producer', 'kv_both', 'kv_consumer'] | None"  # the alias spelled out
    extra = {(e.key, tuple(e.connectors or ())): e for e in schema.extra_config}
    assert extra["backends", ("NixlConnector",)].default == "['UCX']"  # the module constant, resolved
    assert extra["side_port", ("NixlConnector",)].access == "index"
    assert extra["eviction_policy", ("OffloadingConnector",)].source.endswith("vllm/v1/kv_offload/cpu/spec.py:3")
    assert extra["cpu_bytes_to_use", ("OffloadingConnector",)].access == "in"
    assert not [e for e in schema.extra_config if e.key == "not_a_connector_key"]
    keys = {k.name: k for k in schema.lmcache_keys}
    assert keys["nixl_role"].source.startswith("sdist:lmcache==0.1.0:") and str(keys["nixl_role"].removed) == "0.2.0"
    aliases = {a.name: a for a in schema.lmcache_aliases}
    assert aliases["nixl_role"].effect == "dropped" and aliases["nixl_role"].maps_to == "pd_role"
    assert aliases["nixl_role"].message == "Unknown configuration key: nixl_role (source: <source>)"
    assert aliases["old_chunk"].effect == "mapped to chunk_size"
    assert (
        aliases["nixl_old_role"].effect == "read as a fallback of a renamed key"
        and aliases["nixl_old_role"].type is None
    )
    (unknown,) = schema.lmcache_unknown_key
    assert unknown.at("effect", Version("0.1.0")).startswith("ignored")
    assert unknown.at("effect", Version("0.2.0")) == "dropped"
    assert unknown.at("message", Version("0.2.0")) == "Unknown configuration key: {key} (source: <source>)"
    assert [str(v) for v in schema.sdist_read["lmcache"]] == ["0.1.0"]
    (lmcache_connector,) = [c for c in schema.connectors if c.name == "LMCacheConnectorV1"]
    assert lmcache_connector.at("hands_to", Version("0.2.0")) == "lmcache"
    adapter = {e.key: e for e in schema.lmcache_adapter_extra_config}
    assert adapter["skip_last_n_tokens"].default == "0" and adapter["lmcache.*"].access == "prefix"


def test_the_generator_finds_a_config_class_where_the_release_keeps_it_and_reads_field_defaults(
    tmp_path: Path,
) -> None:
    ran, text = _generate(tmp_path)
    assert ran.returncode == 0, ran.stderr
    schema = EngineSchema.model_validate(yaml.safe_load(text))
    assert "no class SchedulerConfig in vllm/config/scheduler.py or another config module" in ran.stderr
    (cls,) = [c for c in schema.configs if c.name == "CacheConfig"]
    assert cls.at("unknown_fields", Version("0.1.0")) == "ignore" and cls.at("unknown_fields", Version("0.2.0")) == (
        "forbid"
    )
    assert cls.file == "vllm/config/cache.py" and cls.at("source", Version("0.2.0")).endswith("cache.py:6")
    fields = {f.name: f for f in schema.config_fields if f.config == "CacheConfig"}
    assert set(fields) == {"block_size", "gpu_memory_utilization"}  # num_gpu_blocks is computed (init=False)
    block = fields["block_size"]
    assert block.at("type", Version("0.1.0")) == "Literal[8, 16]" and block.at("type", Version("0.2.0")) == "int"
    assert block.default == "None" and block.source.startswith("wheel:vllm==0.2.0:vllm/config/cache.py:")
    assert fields["gpu_memory_utilization"].default == "0.92"  # the class constant, resolved


def test_the_generator_reads_vllm_environment_variables_with_default_and_parse_rule(tmp_path: Path) -> None:
    ran, text = _generate(tmp_path)
    assert ran.returncode == 0, ran.stderr
    env = {e.name: e for e in EngineSchema.model_validate(yaml.safe_load(text)).vllm_env}
    assert set(env) == {"VLLM_A", "VLLM_B", "VLLM_CHOICE"}
    a = env["VLLM_A"]
    assert a.parse == "int(<env>)" and isinstance(a.default, tuple)
    assert [(str(c.since), c.value) for c in a.default] == [("0.1.0", "'0'"), ("0.2.0", "'1'")]
    assert env["VLLM_B"].parse == "<env>.lower() in ('1', 'true')" and env["VLLM_B"].default == "''"
    assert str(env["VLLM_B"].introduced) == "0.2.0"  # read through the table merged in with **
    choice = env["VLLM_CHOICE"]
    assert choice.default == "'auto'" and choice.parse == "env_with_choices(<env>, 'auto', ['auto', 'x'])"
    assert str(choice.removed) == "0.2.0" and choice.source == "wheel:vllm==0.1.0:vllm/envs.py:4"


def test_the_generator_reads_the_lmcache_variables_code_spells_outside_the_key_table(tmp_path: Path) -> None:
    ran, text = _generate(tmp_path)
    assert ran.returncode == 0, ran.stderr
    env = {(e.name, e.access): e for e in EngineSchema.model_validate(yaml.safe_load(text)).lmcache_env}
    assert set(env) == {
        ("LMCACHE_LOG_LEVEL", "name"),
        ("LMCACHE_CONTROLLER_", "prefix"),
        ("LMCACHE_EC_", "prefix"),
    }
    assert str(env["LMCACHE_LOG_LEVEL", "name"].introduced) == "0.2.0"
    assert env["LMCACHE_LOG_LEVEL", "name"].source == "wheel:lmcache==0.2.0:lmcache/logging.py:2"


def test_the_generator_output_on_the_fixture_is_the_recorded_one(tmp_path: Path) -> None:
    """The fixture's output is pinned: a change to what the script writes shows here, and is recorded with
    ``python tests/test_engine_schema.py --write`` after the shipped file is regenerated from the wheels."""
    _, text = _generate(tmp_path)
    assert _without_digest(text) == EXPECTED.read_text(encoding="utf-8"), (
        "the generator writes something else now: regenerate knowledge/engine_schema.yaml from the wheels "
        "and record the fixture with `python tests/test_engine_schema.py --write`"
    )


def test_the_shipped_schema_is_generated_by_the_script_as_it_is() -> None:
    schema = load_knowledge().engine_schema
    digest = hashlib.sha256(SCRIPT.read_bytes() + SHARED.read_bytes()).hexdigest()
    assert schema.generator_sha256 == digest, (
        "knowledge/engine_schema.yaml is stale: regenerate it with "
        "`python scripts/build_engine_schema.py --src-dir SRC_DIR` (the extracted wheels)"
    )
    text = (REPO / "knowledge" / "engine_schema.yaml").read_text(encoding="utf-8")
    assert "python scripts/build_engine_schema.py --src-dir SRC_DIR" in text.splitlines()[2]
    newest = {p: str(load_knowledge().newest(p)) for p in ("vllm", "lmcache")}
    assert {p: str(v[-1]) for p, v in schema.releases_read.items()} == newest


def test_the_generator_refuses_a_tree_without_the_files_it_reads(tmp_path: Path) -> None:
    src, releases = _fixture(tmp_path)
    (src / "lmcache-0.2.0" / "lmcache" / "v1" / "config.py").write_text("x = 1\n", encoding="utf-8")
    out = tmp_path / "out.yaml"
    ran = run_in_process(script_main(SCRIPT), "--src-dir", str(src), "--out", str(out), "--releases", str(releases))
    assert ran.returncode == 1 and "no _CONFIG_DEFINITIONS and no from_file reads" in ran.stderr
    assert not out.exists()


def _schema_sample() -> ModuleType:
    """scripts/verifier/schema_sample.py, loaded as test_verify_knowledge loads the verifier package."""
    if "verifier" not in sys.modules:
        directory = REPO / "scripts" / "verifier"
        spec = importlib.util.spec_from_file_location(
            "verifier", directory / "__init__.py", submodule_search_locations=[str(directory)]
        )
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["verifier"] = module
        spec.loader.exec_module(module)
    return importlib.import_module("verifier.schema_sample")


def test_the_verifier_sample_holds_on_the_wheels_read_and_catches_a_wrong_boundary(tmp_path: Path) -> None:
    _, text = _generate(tmp_path)
    schema = EngineSchema.model_validate(yaml.safe_load(text))
    sampler = _schema_sample()
    source = importlib.import_module("verifier.source")

    def tree(package: str, version: str) -> object:
        for suffix in ("", "-sdist"):
            root = tmp_path / "src" / f"{package}-{version}{suffix}"
            if root.is_dir():
                return source.SourceTree(package, version, root)
        return None

    checks = sampler.sample(schema, tree, 100, seed=0)
    assert checks and all(c.status == "pass" for c in checks), [c.line() for c in checks if c.status != "pass"]
    # Claim kv_buffer_size still in 0.2.0's class: the probe of its removal reads it absent there.
    fields = tuple(
        f.model_copy(update={"removed": None, "source": f.source.replace("0.1.0", "0.2.0")})
        if f.name == "kv_buffer_size" else f
        for f in schema.config_fields
    )  # fmt: skip
    wrong = schema.model_copy(update={"config_fields": fields})
    failed = [c for c in sampler.sample(wrong, tree, 100, seed=0) if c.status == "fail"]
    assert [c.entry for c in failed] == ["KVTransferConfig.kv_buffer_size"]


# --- the shipped schema: what the wheels say -----------------------------------------------------


@pytest.fixture(scope="module")
def knowledge() -> Knowledge:
    return load_knowledge()


def test_the_shipped_schema_has_the_kv_transfer_fields_the_wheels_have(knowledge: Knowledge) -> None:
    fields = {f.name: f for f in knowledge.engine_schema.config_fields if f.config == "KVTransferConfig"}
    for gone in ("kv_buffer_size", "kv_rank", "kv_parallel_size", "kv_ip"):
        assert str(fields[gone].removed) == "0.32.0", gone
    policy = fields["kv_load_failure_policy"]
    assert str(policy.introduced) == "0.13.0"
    assert (
        policy.at("default", Version("0.13.0")) == "'recompute'" and policy.at("default", Version("0.17.0")) == "'fail'"
    )
    (cls,) = [c for c in knowledge.engine_schema.configs if c.name == "KVTransferConfig"]
    assert cls.at("unknown_fields", Version("0.15.1")) == "ignore"
    assert cls.at("unknown_fields", Version("0.16.0")) == "forbid"


def test_the_shipped_schema_has_the_cache_scheduler_and_parallel_fields_the_wheels_have(knowledge: Knowledge) -> None:
    schema = knowledge.engine_schema
    classes = {c.name: c for c in schema.configs}
    for name, module in (("CacheConfig", "cache"), ("SchedulerConfig", "scheduler"), ("ParallelConfig", "parallel")):
        assert classes[name].file == f"vllm/config/{module}.py", name
        assert classes[name].at("unknown_fields", Version("0.15.1")) == "ignore", name
        assert classes[name].at("unknown_fields", Version("0.16.0")) == "forbid", name
    fields = {(f.config, f.name): f for f in schema.config_fields if f.holds_at(Version("0.33.0"))}
    prefix = fields["CacheConfig", "enable_prefix_caching"]
    assert prefix.at("default", Version("0.11.0")) == "None" and prefix.at("default", Version("0.12.0")) == "True"
    utilization = fields["CacheConfig", "gpu_memory_utilization"]  # Field(default=0.9, gt=0, le=1) until 0.19.1
    assert utilization.at("default", Version("0.19.1")) == "0.9" and utilization.at("default", Version("0.20.0")) == (
        "0.92"
    )
    assert fields["CacheConfig", "kv_offloading_backend"].at("type", Version("0.33.0")) == (
        "Literal['native', 'lmcache']"
    )
    # Field(default=DEFAULT_MAX_NUM_BATCHED_TOKENS) names the class constant, ClassVar[int] = 2048
    assert fields["SchedulerConfig", "max_num_batched_tokens"].at("default", Version("0.33.0")) == "2048"
    assert fields["ParallelConfig", "tensor_parallel_size"].default == "1"
    assert ("CacheConfig", "num_gpu_blocks") not in fields  # field(init=False): vLLM computes it


def test_the_shipped_schema_has_vllms_environment_variables_with_default_and_parse_rule(knowledge: Knowledge) -> None:
    env = {e.name: e for e in knowledge.engine_schema.vllm_env}
    port = env["VLLM_NIXL_SIDE_CHANNEL_PORT"]  # NIXL's side-channel base port moved in 0.11.1
    assert port.parse == "int(<env>)" and port.source.startswith("wheel:vllm==0.34.0:vllm/envs.py:")
    assert port.at("default", Version("0.11.0")) == "'5557'" and port.at("default", Version("0.11.1")) == "'5600'"
    assert str(env["VLLM_USE_V1"].removed) == "0.11.1"
    assert len(env) > 300  # the whole table, not a chosen few


def test_a_removed_field_is_refused_with_pydantics_message_where_the_class_forbids_unknown_fields(
    knowledge: Knowledge,
) -> None:
    config = {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_buffer_size": 1e9}
    (problem,) = engine_schema.check_kv_transfer_config(config, "0.33.0", knowledge)
    assert problem.severity == "error" and problem.key == "kv_buffer_size"
    assert "removed in 0.32.0" in problem.message and "refuses to start" in problem.message
    assert problem.engine_message is not None
    assert engine_schema.check_kv_transfer_config(config, "0.31.0", knowledge) == []
    # 0.15.1's KVTransferConfig is a plain pydantic dataclass: an unknown field is dropped, not refused.
    (ignored,) = engine_schema.check_kv_transfer_config({**config, "kv_bufer_size": 1}, "0.15.1", knowledge)
    assert ignored.severity == "warning" and "silently" in ignored.message


def test_the_refusal_message_is_what_pydantic_says_for_an_extra_forbid_dataclass() -> None:
    """vLLM raises TypeAdapter(KVTransferConfig).validate_json's error as the argparse message; pydantic
    (the library vLLM runs) words it so for a dataclass with extra="forbid"."""

    @dataclass(config=ConfigDict(extra="forbid"))
    class KVTransferConfig:
        kv_connector: str | None = None

    with pytest.raises(ValidationError) as raised:
        TypeAdapter(KVTransferConfig).validate_json(json.dumps({"kv_buffer_size": 1e9}))
    ours = engine_schema.refusal_message("KVTransferConfig", "kv_buffer_size", 1e9, "--kv-transfer-config")
    theirs = str(raised.value).splitlines()
    assert ours.split("argument --kv-transfer-config: ", 1)[1].splitlines()[:2] == theirs[:2]
    assert ours.splitlines()[2].split(", ...")[0] in theirs[2]


def test_a_literal_value_outside_its_choices_is_refused(knowledge: Knowledge) -> None:
    (problem,) = engine_schema.check_kv_transfer_config({"kv_load_failure_policy": "retry"}, "0.33.0", knowledge)
    assert problem.severity == "error" and "Input should be 'recompute' or 'fail'" in (problem.engine_message or "")
    # The value types are pydantic's own decision, as vLLM's TypeAdapter(KVTransferConfig).validate_json makes it.
    (port,) = engine_schema.check_kv_transfer_config({"kv_port": "abc"}, "0.33.0", knowledge)
    assert "[type=int_parsing" in (port.engine_message or "")
    assert engine_schema.check_kv_transfer_config({"kv_port": "14580", "engine_id": None}, "0.33.0", knowledge) == []
    (role,) = engine_schema.check_kv_transfer_config({"kv_role": "producer"}, "0.33.0", knowledge)
    assert "'kv_producer', 'kv_both' or 'kv_consumer'" in (role.engine_message or "")


def test_extra_config_keys_another_connector_reads_are_silently_ignored(knowledge: Knowledge) -> None:
    config = {
        "kv_connector": "NixlConnector",
        "kv_connector_extra_config": {"backends": ["UCX"], "eviction_policy": "lru"},
    }
    (problem,) = engine_schema.check_kv_transfer_config(config, "0.33.0", knowledge)
    assert problem.severity == "warning" and problem.key == "kv_connector_extra_config.eviction_policy"
    assert "read by OffloadingConnector" in problem.message
    assert (
        engine_schema.check_extra_config(
            "OffloadingConnector", ["eviction_policy", "cpu_bytes_to_use"], "0.33.0", knowledge
        )
        == []
    )
    (early,) = engine_schema.check_extra_config("OffloadingConnector", ["offload_prompt_only"], "0.22.1", knowledge)
    assert "first in 0.23.0" in early.message
    (unregistered,) = engine_schema.check_extra_config("NoSuchConnector", ["x"], "0.33.0", knowledge)
    assert unregistered.key == "kv_connector"


def test_an_out_of_tree_offloading_spec_may_read_any_extra_config_key(knowledge: Knowledge) -> None:
    # vllm/v1/kv_offload/factory.py builds the class spec_module_path names with the whole extra config.
    keys = ["spec_name", "spec_module_path", "shared_storage_path", "threads_per_gpu"]
    assert engine_schema.check_extra_config("OffloadingConnector", keys, "0.12.0", knowledge) == []
    (unread,) = engine_schema.check_extra_config("OffloadingConnector", ["threads_per_gpu"], "0.12.0", knowledge)
    assert unread.key == "kv_connector_extra_config.threads_per_gpu"


def test_lmcache_connectors_also_have_the_keys_lmcaches_adapter_reads(knowledge: Knowledge) -> None:
    keys = ["lmcache.chunk_size", "lmcache.no_such_key", "lmcache.mp.server_urls", "use_native", "backends"]
    problems = {
        p.key: p for p in engine_schema.check_extra_config("LMCacheConnectorV1", keys, "0.33.0", knowledge, "0.5.6")
    }
    assert set(problems) == {"kv_connector_extra_config.lmcache.no_such_key", "kv_connector_extra_config.backends"}
    assert "has no config key no_such_key" in problems["kv_connector_extra_config.lmcache.no_such_key"].message
    assert "nor LMCache 0.5.6's vLLM adapter" in problems["kv_connector_extra_config.backends"].message
    # lmcache.mp.server_urls is read by LMCache's adapter from 0.5.0: with 0.4.7 nothing reads it.
    (early,) = engine_schema.check_extra_config(
        "LMCacheMPConnector", ["lmcache.mp.server_urls"], "0.33.0", knowledge, "0.4.7"
    )
    assert early.severity == "warning"
    # FlexKVConnectorV1 hands vllm_config to flexkv's adapter, which the schema does not read: no claim either way.
    assert engine_schema.check_extra_config("FlexKVConnectorV1", ["any_key"], "0.33.0", knowledge) == []


def test_lmcache_drops_old_pd_names_in_0_5_and_reads_them_in_0_3_3(knowledge: Knowledge) -> None:
    problems = {
        p.key: p
        for p in engine_schema.check_lmcache_keys(
            ["nixl_role", "LMCACHE_ENABLE_NIXL", "pd_role", "chunk_size"], "0.5.6", knowledge
        )
    }
    assert set(problems) == {"nixl_role", "LMCACHE_ENABLE_NIXL"}
    assert problems["nixl_role"].instead == "pd_role" and "drops it" in problems["nixl_role"].message
    assert problems["nixl_role"].engine_message == "Unknown configuration key: nixl_role (source: …)"
    assert "Unknown configuration key: enable_nixl" in (problems["LMCACHE_ENABLE_NIXL"].engine_message or "")
    assert engine_schema.check_lmcache_keys(["nixl_role", "enable_nixl"], "0.3.3", knowledge) == []
    (unread,) = engine_schema.check_lmcache_keys(["no_such_key"], "0.3.3", knowledge)
    assert "never reads it" in unread.message and unread.engine_message is None
    (mapped,) = engine_schema.check_lmcache_keys(["external_backends"], "0.5.6", knowledge)
    assert "maps it to storage_plugins" in mapped.message


def test_an_lmcache_variable_is_unread_only_when_no_code_of_the_release_spells_it(knowledge: Knowledge) -> None:
    names = [
        "LMCACHE_CHUNK_SIZE",  # the key table's chunk_size
        "LMCACHE_CONFIG_FILE",  # read by the config loader, outside the table
        "LMCACHE_LOG_LEVEL",
        "LMCACHE_CONTROLLER_PULL_URL",  # the cache controller's own table, read under its prefix
        "LMCACHE_USE_UPSTREAM_MP",  # read by vLLM's in-tree adapter from 0.22.0, not by LMCache
        "LMCACHE_CHUNKSIZE",
        "LMCACHE_NIXL_ROLE",  # an alias LMCache 0.5.6 drops
    ]
    problems = {p.key: p for p in engine_schema.check_lmcache_env(names, "0.5.6", knowledge, "0.33.0")}
    assert set(problems) == {"LMCACHE_CHUNKSIZE", "LMCACHE_NIXL_ROLE"}
    assert "No code of LMCache 0.5.6 nor vLLM 0.33.0 reads" in problems["LMCACHE_CHUNKSIZE"].message
    assert problems["LMCACHE_NIXL_ROLE"].instead == "pd_role"
    without_vllm = {p.key for p in engine_schema.check_lmcache_env(names, "0.5.6", knowledge)}
    assert "LMCACHE_USE_UPSTREAM_MP" in without_vllm
    # LMCACHE_USE_EXPERIMENTAL: read by LMCache up to 0.3.11
    assert engine_schema.check_lmcache_env(["LMCACHE_USE_EXPERIMENTAL"], "0.3.9", knowledge) == []
    (gone,) = engine_schema.check_lmcache_env(["LMCACHE_USE_EXPERIMENTAL"], "0.5.6", knowledge)
    assert gone.severity == "warning"
    assert engine_schema.check_lmcache_env(["NOT_LMCACHE", "lmcache_chunk_size"], "0.5.6", knowledge) == []


@pytest.mark.parametrize(("value", "leftover"), [("True", True), ("1", True), ("false", False), (None, False)])
def test_a_variable_gone_but_set_to_its_old_default_is_a_leftover(
    knowledge: Knowledge, value: str | None, leftover: bool
) -> None:
    # LMCACHE_USE_EXPERIMENTAL defaulted to True until LMCache 0.3.12 stopped reading it
    found = engine_schema.lmcache_leftover_default("LMCACHE_USE_EXPERIMENTAL", value, "0.5.6", knowledge)
    assert (found is not None) == leftover
    if found is not None:
        assert found.severity == "info" and "gone in 0.3.12" in found.message
    assert engine_schema.lmcache_leftover_default("LMCACHE_USE_EXPERIMENTAL", "True", "0.3.9", knowledge) is None


def test_an_lmcache_file_value_the_converter_refuses_raises_up_to_0_3_11_and_becomes_none_after(
    knowledge: Knowledge,
) -> None:
    items = [("chunk_size", "abc"), ("max_local_cpu_size", "5GB"), ("chunk_size", "512"), ("max_local_cpu_size", "5")]
    (old,) = [p for p in engine_schema.check_lmcache_values(items, "0.3.9", knowledge) if p.key == "chunk_size"]
    assert old.severity == "error" and old.engine_message == "ValueError: invalid literal for int() with base 10: 'abc'"
    new = {p.key: p for p in engine_schema.check_lmcache_values(items, "0.5.6", knowledge)}
    assert set(new) == {"chunk_size", "max_local_cpu_size"} and {p.severity for p in new.values()} == {"warning"}
    assert new["chunk_size"].engine_message == (
        "Failed to convert value for chunk_size='abc': invalid literal for int() with base 10: 'abc'"
    )
    assert "sets chunk_size to None, not its default 256" in new["chunk_size"].message
    # a YAML float for an int key: int(5.0) is 5, as LMCache's loader gets it; a bool is an int to Python
    assert engine_schema.check_lmcache_values([("chunk_size", "5.0"), ("chunk_size", "true")], "0.5.6", knowledge) == []
    # local_cpu's converter is LMCache's own _to_bool, which is not reproduced here: never judged
    assert engine_schema.check_lmcache_values([("local_cpu", "maybe")], "0.5.6", knowledge) == []


# --- check_version ------------------------------------------------------------------------------


def test_check_version_says_kv_buffer_size_is_a_removed_field_that_0_33_refuses() -> None:
    result = run_tool("check_version", {"name": "kv_buffer_size", "version": "0.33.0"})
    (match,) = result.schema_matches  # type: ignore[attr-defined]
    assert (match.kind, match.owner, match.status, match.removed) == (
        "config_field",
        "KVTransferConfig",
        "removed",
        "0.32.0",
    )
    assert "refuses to start" in (match.if_set or "") and result.not_found is None
    assert "refuses to start" in result.summary()  # type: ignore[attr-defined]
    earlier = run_tool("check_version", {"name": "kv_buffer_size", "version": "0.31.0"}).schema_matches[0]  # type: ignore[attr-defined]
    assert earlier.status == "available" and earlier.default == "1000000000.0"


def test_check_version_says_what_lmcache_0_5_does_with_nixl_role() -> None:
    result = run_tool("check_version", {"name": "nixl_role", "lmcache_version": "0.5.x"})
    (match,) = result.schema_matches  # type: ignore[attr-defined]
    assert match.kind == "lmcache_alias" and match.version == "0.5.6" and match.instead == "pd_role"
    assert "drops it as an unknown key" in (match.if_set or "") and "maps" not in (match.if_set or "")
    old = run_tool("check_version", {"name": "nixl_role", "lmcache_version": "0.3.3"}).schema_matches[0]  # type: ignore[attr-defined]
    assert old.kind == "lmcache_key" and old.status == "available"


def test_a_default_that_changed_is_given_per_release() -> None:
    (match,) = run_tool("check_version", {"name": "kv_load_failure_policy", "version": "0.13.0"}).schema_matches  # type: ignore[attr-defined]
    assert match.default == "'recompute'" and match.default_changes == ["0.13.0: 'recompute'", "0.17.0: 'fail'"]


def test_a_flag_spelled_as_no_parser_builds_it_is_said_not_to_exist() -> None:
    result = run_tool("check_version", {"name": "--enable-hybrid-kv-cache-manager", "version": "0.22.1"})
    assert not result.matches and result.not_found is not None  # type: ignore[attr-defined]
    assert "is not an option of `vllm serve` in vLLM 0.22.1" in result.not_found.answer  # type: ignore[attr-defined]
    assert [s.name for s in result.not_found.suggestions] == ["--disable-hybrid-kv-cache-manager"]  # type: ignore[attr-defined]
    # 0.33.0's argparse builds the --enable-x twin: there it is the tracked option.
    assert run_tool("check_version", {"name": "--enable-hybrid-kv-cache-manager", "version": "0.33.0"}).matches  # type: ignore[attr-defined]


def test_check_version_answers_a_cache_config_field_from_the_schema() -> None:
    result = run_tool("check_version", {"name": "enable_prefix_caching", "version": "0.11.0"})
    (match,) = result.schema_matches  # type: ignore[attr-defined]
    assert (match.kind, match.owner, match.status) == ("config_field", "CacheConfig", "available")
    assert match.default == "None"
    assert match.default_changes == ["0.11.0: None", "0.12.0: True"]
    assert match.sources == ["wheel:vllm==0.34.0:vllm/config/cache.py:267"]
    assert "enable_prefix_caching is a field of CacheConfig in vLLM 0.11.0" in result.summary()  # type: ignore[attr-defined]
    assert result.matches  # type: ignore[attr-defined]  # the tracked --enable-prefix-caching still answers too


def test_check_version_answers_a_vllm_environment_variable_with_its_default_and_parse_rule() -> None:
    result = run_tool("check_version", {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "version": "0.11.0"})
    (match,) = [m for m in result.schema_matches if m.kind == "env_var"]  # type: ignore[attr-defined]
    assert (match.owner, match.status) == ("vllm/envs.py", "available")
    assert (match.default, match.parse) == ("'5557'", "int(<env>)")
    assert not [m for m in result.inventory_matches if m.kind == "env_var"]  # type: ignore[attr-defined]
    assert "read as: int(<env>)" in result.summary()  # type: ignore[attr-defined]
    gone = run_tool("check_version", {"name": "VLLM_USE_V1", "version": "0.33.0"})
    (old,) = [m for m in gone.schema_matches if m.kind == "env_var"]  # type: ignore[attr-defined]
    assert old.status == "removed" and old.if_set == "Set in 0.33.0, vllm/envs.py does not read it."


def test_schema_answers_stay_a_few_kilobytes(knowledge: Knowledge) -> None:
    """The rule of test_check_version's one-name answers, for the names only the schema holds and a few it
    shares with tracked entries: median under 4 KB, none reaching 8 KB."""
    schema = knowledge.engine_schema
    names = sorted({f.name or "" for f in schema.config_fields} | {"nixl_role", "pd_role", "lmcache.mp.host"})
    names += ["cpu_bytes_to_use", "eviction_policy", "offload_prompt_only", "enable_nixl", "backends"]
    names += [e.name or "" for e in schema.vllm_env[::25]]  # a spread of vLLM's variables
    sizes = []
    for name in names:
        result = run_tool("check_version", {"name": name, "version": "0.33.0"})
        data = json.dumps(result.model_dump(mode="json"), separators=(",", ":"))
        sizes.append(len(data.encode()) + len(result.summary().encode()))
    sizes.sort()
    assert sizes[len(sizes) // 2] <= 4096 and sizes[-1] <= 8192, (sizes[len(sizes) // 2], sizes[-1])


if __name__ == "__main__":  # python tests/test_engine_schema.py --write: record the fixture's output
    import tempfile

    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_engine_schema.py --write")
    with tempfile.TemporaryDirectory() as scratch:
        ran, written = _generate(Path(scratch))
        if ran.returncode != 0:
            sys.exit(ran.stderr)
        EXPECTED.parent.mkdir(parents=True, exist_ok=True)
        EXPECTED.write_text(_without_digest(written), encoding="utf-8")
        print(f"wrote {EXPECTED.relative_to(REPO)}")


def test_a_vllm_variable_no_code_of_the_release_reads(knowledge: Knowledge) -> None:
    names = ["VLLM_RPC_TIMEOUT", "VLLM_API_KEY", "NOT_VLLM", "vllm_lower"]
    assert engine_schema.check_vllm_env(names, "0.22.1", knowledge) == []  # still read there
    (gone,) = engine_schema.check_vllm_env(names, "0.33.0", knowledge)
    assert gone.key == "VLLM_RPC_TIMEOUT" and "no longer from 0.23.0" in gone.message
    assert "Unknown vLLM environment variable detected" in gone.message  # logged from 0.17.0
    (early,) = engine_schema.check_vllm_env(["VLLM_ENGINE_READY_TIMEOUT_S"], "0.11.0", knowledge)
    assert "Unknown vLLM environment variable" not in early.message


def test_a_vllm_variable_s_text_is_judged_by_the_parse_rule_of_its_release(knowledge: Knowledge) -> None:
    items = [
        ("VLLM_USE_DEEP_GEMM", "true"),  # bool(int(<env>))
        ("VLLM_PORT", "tcp://10.0.0.1:8000"),  # what the kubelet sets for a Service named vllm
        ("VLLM_PORT", "8000"),
        ("VLLM_DEEP_GEMM_WARMUP", "fast"),  # env_with_choices
        ("VLLM_FLOAT32_MATMUL_PRECISION", "HIGH"),  # case_sensitive=False
        ("VLLM_LOGGING_LEVEL", "debug"),  # a plain string
    ]
    found = {p.key: p.engine_message for p in engine_schema.check_vllm_env_values(items, "0.33.0", knowledge)}
    assert found == {
        "VLLM_USE_DEEP_GEMM": "ValueError: invalid literal for int() with base 10: 'true'",
        "VLLM_PORT": "ValueError: VLLM_PORT 'tcp://10.0.0.1:8000' appears to be a URI",
        "VLLM_DEEP_GEMM_WARMUP": "ValueError: Invalid value 'fast' for VLLM_DEEP_GEMM_WARMUP. Valid options: "
        "['skip', 'full', 'relax'].",
    }
    # 0.11.0 reads a variable only where code asks for it: no start-up refusal to call
    assert engine_schema.check_vllm_env_values(items, "0.11.0", knowledge) == []


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("WILM_USE_TRITON_FLASH_ATTENTION", "VLLM_USE_TRITON_FLASH_ATTN"),
        ("VLLLM_ATTENTION_BACKEND", "VLLM_ATTENTION_BACKEND"),
        ("VLL_PORT", "VLLM_PORT"),
        ("MLLM_PORT", None),  # an application's own variable, one letter from VLLM with a one-word rest
        ("LLM_HOST_IP", None),  # LLM_ is another program's prefix
        ("VLLM_PORT", None),  # vLLM's own
        ("LMCACHE_CHUNK_SIZE", None),
    ],
)
def test_a_variable_that_misspells_a_vllm_one_is_named_with_it(
    knowledge: Knowledge, name: str, meant: str | None
) -> None:
    assert engine_schema.misspelt_vllm_env(name, knowledge) == meant


def _compilation_findings(command: str, version: str) -> list[tuple[str, str, int | None]]:
    from reading import review

    result = review(command, version=version)
    return [
        (f.rule_id, f.severity, f.location.line if f.location else None)
        for f in result.findings
        if f.rule_id.startswith("pitfall.transfer-config")
    ]


COMPILATION = (
    "vllm serve Qwen/Qwen3-8B --compilation-config.attention_backend=FLASH_ATTN "
    """--compilation-config '{"pass_config": {"enable_fusion": true}, "cudagraph_capture_sizes": [1, 2, 4]}'"""
)


def test_compilation_config_keys_are_checked_against_the_release_schema() -> None:
    # From 0.13.0 CompilationConfig and PassConfig forbid unknown fields: both keys stop vLLM at start-up; the
    # dotted word and the JSON are two occurrences argparse validates one by one, so both are checked.
    assert _compilation_findings(COMPILATION, "0.34.0") == [("pitfall.transfer-config-field-refused", "error", 1)] * 2
    # 0.11.0 drops them silently: warnings, and enable_fusion was still a PassConfig field then.
    assert _compilation_findings(COMPILATION, "0.11.0") == [("pitfall.transfer-config-key-ignored", "warning", 1)]
    fine = """vllm serve Qwen/Qwen3-8B --compilation-config '{"pass_config": {"fuse_norm_quant": true}}' -O.mode=3"""
    assert _compilation_findings(fine, "0.34.0") == []


def test_each_compilation_finding_names_the_key_and_its_class() -> None:
    from reading import review

    messages = [f.message for f in review(COMPILATION, version="0.34.0").findings if "Config of vLLM" in f.message]
    assert any(
        m.startswith(
            "A --kv-transfer-config, --kv-events-config or --compilation-config field the release refuses: "
            "pass_config.enable_fusion: PassConfig of vLLM 0.34.0 has no field enable_fusion "
            "(enable_fusion was removed in 0.13.0)"
        )
        for m in messages
    ), messages
    assert any(
        "attention_backend: CompilationConfig of vLLM 0.34.0 has no field attention_backend" in m for m in messages
    )


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        # 0.11.x: -O is --compilation-config, -O.KEY one of its keys (CompilationConfig drops unknown ones)
        ("0.11.0", [("pitfall.transfer-config-key-ignored", "warning", 1)]),
        # 0.12.0 rewrites -O.KEY to -cc.KEY with a deprecation warning
        ("0.12.0", [("pitfall.transfer-config-key-ignored", "warning", 1)]),
        # from 0.13.0 the word is an optimization level ".attention_backend=FLASH_ATTN", refused by the parser
        ("0.13.0", [("pitfall.option-value-refused", "error", 1)]),
        ("0.34.0", [("pitfall.option-value-refused", "error", 1)]),
    ],
)
def test_a_dotted_o_word_is_read_as_each_release_reads_it(version: str, expected: list[tuple[str, str, int]]) -> None:
    from reading import review

    result = review("vllm serve Qwen/Qwen3-8B -O.attention_backend=FLASH_ATTN -O3", version=version)
    found = [
        (f.rule_id, f.severity, f.location.line if f.location else None)
        for f in result.findings
        if f.rule_id in ("pitfall.transfer-config-key-ignored", "pitfall.option-value-refused", "pitfall.unknown-flag")
    ]
    assert found == expected, result.summary()
    if version == "0.12.0":
        assert any("reads -O.KEY as -cc.KEY" in n for n in result.notes)


SCHEMA_RECORDS = sorted((REPO / "tests" / "data" / "engine").glob("schema-*.json"))


@pytest.mark.parametrize("path", SCHEMA_RECORDS, ids=[p.stem for p in SCHEMA_RECORDS])
def test_the_schema_agrees_with_what_the_engines_own_classes_accept(path: Path) -> None:
    """scripts/engine_oracle/schema_check.py built each config class in the release's venv, as `vllm serve`
    validates a JSON option: unknown fields refused exactly where the schema says forbid, and each Literal field
    takes a value the schema lists and refuses one it does not."""
    record = json.loads(path.read_text())
    version = Version(record["vllm_version"])
    schema = load_knowledge().engine_schema
    judged = 0
    for name, built in record["classes"].items():
        [entry] = [e for e in schema.configs if e.name == name and e.holds_at(version)]
        assert built["importable"], name
        if built["control"]["outcome"] != "accepted":
            continue  # the class needs arguments: not judged this way (the record keeps why)
        forbids = entry.at("unknown_fields", version) == "forbid"
        assert (built["unknown_field"]["outcome"] == "refused") is forbids, (name, built["unknown_field"])
        for field, sample in built["literals"].items():
            assert sample["first_listed"]["outcome"] == "accepted", (name, field, sample)
            assert sample["unlisted"]["outcome"] == "refused", (name, field, sample)
        judged += 1
    assert judged >= 5
