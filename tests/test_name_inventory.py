"""The name inventory: the generator on tiny fake releases, and the shipped file answering what the
wheels say (environment variables, LMCache keys, KV-caching class names by release)."""

from __future__ import annotations

from pathlib import Path

import yaml

from conftest import REPO, Ran, run_in_process, script_main
from vllm_caching_mcp.knowledge import NameInventory, load_knowledge

SCRIPT = REPO / "scripts" / "build_name_inventory.py"

ENVS = """\
import os
environment_variables = {
    "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", ""),
    **({"VLLM_OLD_ONLY": lambda: None} if False else {}),
}
"""
READS = """\
import os
os.environ["VLLM_WRITTEN_NOT_READ"] = "1"
if "HF_TOKEN" in os.environ:
    token = os.environ["HF_TOKEN"]
port = os.environ.get("VLLM_PORT_ELSEWHERE")
"""
SPEC = "class TieringOffloadingSpec:\n    pass\n\n\nclass _Private:\n    pass\n"
LMCACHE_OLD = "class LMCacheEngineConfig:\n    chunk_size: int\n    nixl_buffer_size: int\n"
LMCACHE_NEW = """\
_CONFIG_DEFINITIONS = {"chunk_size": {"type": int, "default": 256}, "pd_buffer_size": {"type": int}}
_CONFIG_ALIASES = {"nixl_buffer_size": "pd_buffer_size"}
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")


def _releases(tmp: Path) -> Path:
    releases = {
        "lines": [
            {"package": "vllm", "releases": [{"version": v} for v in ("0.1.0", "0.2.0", "0.3.0")]},
            {"package": "lmcache", "releases": [{"version": v} for v in ("0.1.0", "0.2.0")]},
        ]
    }
    path = tmp / "releases.yaml"
    path.write_text(yaml.safe_dump(releases), encoding="utf-8")
    return path


def _build(tmp: Path) -> tuple[Ran, NameInventory]:
    src = tmp / "src"
    _write(src / "vllm-0.1.0", {"vllm/envs.py": ENVS, "vllm/reads.py": READS})
    # 0.2.0 has no extracted wheel: it is skipped and recorded as not read.
    _write(src / "vllm-0.3.0", {"vllm/envs.py": ENVS, "vllm/v1/kv_offload/tiering/spec.py": SPEC})
    _write(src / "lmcache-0.1.0", {"lmcache/v1/config.py": LMCACHE_OLD})
    _write(src / "lmcache-0.2.0", {"lmcache/v1/config.py": LMCACHE_NEW})
    out = tmp / "name_inventory.yaml"
    ran = run_in_process(
        script_main(SCRIPT), "--src-dir", str(src), "--out", str(out), "--releases", str(_releases(tmp))
    )
    return ran, NameInventory.model_validate(yaml.safe_load(out.read_text(encoding="utf-8")))


def test_the_generator_reads_env_tables_env_reads_config_keys_and_classes(tmp_path: Path) -> None:
    ran, inventory = _build(tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "vllm 0.2.0: no extracted wheel" in ran.stderr
    assert [str(v) for v in inventory.releases_read["vllm"]] == ["0.1.0", "0.3.0"]
    names = {(n.name, n.kind): n for n in inventory.names}
    assert ("VLLM_HOST_IP", "env_var") in names and ("VLLM_OLD_ONLY", "env_var") not in names
    assert str(names["HF_TOKEN", "env_var"].removed) == "0.3.0"  # read only in 0.1.0's reads.py
    assert ("VLLM_PORT_ELSEWHERE", "env_var") in names
    assert ("VLLM_WRITTEN_NOT_READ", "env_var") not in names  # an assignment is not a read
    spec = names["TieringOffloadingSpec", "class"]
    assert str(spec.introduced) == "0.3.0" and spec.where == "vllm/v1/kv_offload/tiering/spec.py"
    assert ("_Private", "class") not in names
    assert names["nixl_buffer_size", "lmcache_config"].alias_of == "pd_buffer_size"
    assert str(names["pd_buffer_size", "lmcache_config"].introduced) == "0.2.0"
    assert inventory.find("LMCACHE_CHUNK_SIZE")[0].name == "chunk_size"


def test_the_generator_refuses_a_tree_without_the_files_it_reads(tmp_path: Path) -> None:
    _write(tmp_path / "src" / "vllm-0.1.0", {"vllm/other.py": "x = 1\n"})
    ran = run_in_process(
        script_main(SCRIPT), "--src-dir", str(tmp_path / "src"), "--out", str(tmp_path / "out.yaml"),
        "--releases", str(_releases(tmp_path)),
    )  # fmt: skip
    assert ran.returncode == 1 and "no environment_variables table" in ran.stderr
    assert not (tmp_path / "out.yaml").exists()


def test_the_shipped_inventory_has_what_the_wheels_have() -> None:
    inventory = load_knowledge().name_inventory
    assert not inventory.find("VLLM_USE_FASTSAFETENSOR")
    (queue,) = inventory.find("VLLM_FASTSAFETENSORS_QUEUE_SIZE")
    assert str(queue.introduced) == "0.24.0"
    (tiering,) = inventory.find("TieringOffloadingSpec")
    assert str(tiering.introduced) == "0.22.0" and tiering.removed is None
    lmcache = [n for n in inventory.find("ParallelStrategy") if n.package == "lmcache"]
    assert [str(n.introduced) for n in lmcache] == ["0.4.4"]
    assert inventory.find("LMCACHE_MAX_LOCAL_CPU_SIZE")[0].kind == "lmcache_config"
