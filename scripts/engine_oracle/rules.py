"""Error-level review rules checked against the released engine (issue 14 item 6, issue 15).

For every ``severity: error`` rule in knowledge/pitfalls.yaml this runs a ``vllm serve`` command
line that trips it (and a control that does not) through vLLM's own start-up path, without a GPU,
and records what the engine does with it:

* the serve parser (``vllm serve``'s own ``FlexibleArgumentParser`` with the serve subcommand) and
  the subcommand's ``validate``;
* ``AsyncEngineArgs.from_cli_args`` and ``create_engine_config(usage_context=OPENAI_API_SERVER)``;
* where a KV connector is configured: the KV cache planned as the engine plans it (the model class
  built on the meta device, oracle.py) and the connector built for the scheduler role through
  ``KVConnectorFactory.create_connector`` (the HMA check, the offloading spec construction);
* vLLM's (and LMCache's) log records at WARNING and above, all along.

The outcome is ``refused`` (the stage, the exception type and the first line of its message),
``hangs`` (a stage did not return within its deadline), ``disabled`` (the engine starts, logs, and
turns the thing off: the case names which resolved fact shows it), ``works``, or
``not_reachable_offline`` (a stage needs a package this venv does not have). A rule whose premise
only shows at runtime (a GPU, a peer, a request through a proxy) says why in ``runtime``.

The ``vllm serve`` lines that render_config writes for the release are run the same way (``render``
cases); the project's own python renders them (``--project-python``).

Run it with the scratch venv's python (vLLM is never a dependency of the project):

    "$SCRATCH/venv/bin/python" scripts/engine_oracle/rules.py   # writes tests/data/engine/rules-<vllm>.json

tests/test_engine_rules.py reads the records (no vLLM there) and reviews the same command lines.
knowledge/ENGINE.md has what was found.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import io
import json
import logging
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import offload  # noqa: E402  (the sibling module: the shared-memory regions of an engine)
import oracle  # noqa: E402  (the sibling module: platform stand-in, faked groups, stub build)

REPO = oracle.REPO
CONFIGS = oracle.CONFIGS
GIB = 1 << 30
BUDGET_BYTES = 40 * GIB  # per rank, as the golden cells
STAGE_DEADLINE_S = 60  # a stage that takes longer is waiting for something that is not there
CASE_DEADLINE_S = 900  # a case process that runs longer is killed
# A case prints this with its engine id before any stage can create the engine's /dev/shm region, so the driver
# removes that region whatever becomes of the case (a hung stage's thread, os._exit, a kill at the deadline).
SHM_MARK = "ORACLE-SHM "
_ENGINE_IDS: set[str] = set()  # the engines this case process configured

# A command line names the model as operators do (the review reads the name); the engine is given
# the config.json written here from the published config (tests/data/engine/configs/).
MODEL_CONFIGS = {
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "openai/gpt-oss-20b": "gpt-oss-20b",
    "Qwen/Qwen3-Next-80B-A3B-Instruct": "qwen3-next-80b-a3b",
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503": "mistral-small-3.1-24b",
}
# Where a case needs LMCache: an unpacked lmcache wheel put on PYTHONPATH of that case only (the venv
# is left as it is). --lmcache-dir points at it.
LMCACHE_CONNECTORS = {"LMCacheConnectorV1", "LMCacheMPConnector"}

M = "meta-llama/Llama-3.1-8B-Instruct"
GPT_OSS = "openai/gpt-oss-20b"
QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"


def _ktc(connector: str, role: str = "kv_both", extra: dict[str, Any] | None = None) -> str:
    config: dict[str, Any] = {"kv_connector": connector, "kv_role": role}
    if extra is not None:
        config["kv_connector_extra_config"] = extra
    return "--kv-transfer-config " + shlex.quote(json.dumps(config, separators=(",", ":")))


def _ktc_with(connector: str, fields: dict[str, Any], extra: dict[str, Any]) -> str:
    config: dict[str, Any] = {
        "kv_connector": connector,
        "kv_role": "kv_both",
        **fields,
        "kv_connector_extra_config": extra,
    }
    return "--kv-transfer-config " + shlex.quote(json.dumps(config, separators=(",", ":")))


LMCACHE_V1 = _ktc("LMCacheConnectorV1")
NIXL = _ktc("NixlConnector")
OFFLOADING = _ktc("OffloadingConnector", extra={"cpu_bytes_to_use": 10 * GIB})
TIERING = {"spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 10 * GIB}
FS_TIER = [{"type": "fs", "root_dir": "/kv"}]
P2P_ALL = {
    "LMCACHE_ENABLE_P2P": "True",
    "LMCACHE_TRANSFER_CHANNEL": "nixl",
    "LMCACHE_ENABLE_CONTROLLER": "True",
    "LMCACHE_CONTROLLER_PULL_URL": "localhost:8300",
    "LMCACHE_CONTROLLER_REPLY_URL": "localhost:8400",
    "LMCACHE_LMCACHE_WORKER_PORTS": "8500",
    "LMCACHE_P2P_INIT_PORTS": "8200",
    "LMCACHE_P2P_LOOKUP_PORTS": "8201",
    "LMCACHE_P2P_HOST": "localhost",
    "LMCACHE_ENABLE_ASYNC_LOADING": "True",
}


def _case(
    case_id: str,
    rule: str,
    version: str,
    command: str,
    *,
    role: str,
    env: dict[str, str] | None = None,
    disables: dict[str, Any] | None = None,
    runtime: str | None = None,
    note: str | None = None,
    gpu: str | None = None,
) -> dict[str, Any]:
    """role: "trips" (the rule fires on it) or "control" (it does not); disables: the resolved fact and
    the value that mean the engine turned something off; runtime: why the premise shows only at runtime;
    gpu: the stand-in's GPU (oracle.GPUS; the H100 when not given)."""
    case: dict[str, Any] = {"id": case_id, "rule": rule, "version": version, "role": role, "command": command}
    case["env"] = env or {}
    for key, value in (("disables", disables), ("runtime", runtime), ("note", note), ("gpu", gpu)):
        if value is not None:
            case[key] = value
    return case


_HMA_OFF = {"hybrid_kv_cache_manager": False}
_NEEDS_GPU = "the failure is in the worker (GPU buffers, pinned host memory, transfers), which needs a device"

CASES: list[dict[str, Any]] = [
    # --cpu-offload-gb: weights, not KV. The rule is advice about the KV tier; the engine starts.
    _case(
        "cpu-offload-gb/trips",
        "pitfall.cpu-offload-gb-is-weights",
        "0.33.0",
        f"vllm serve {M} --cpu-offload-gb 10",
        role="trips",
    ),
    _case("cpu-offload-gb/control", "pitfall.cpu-offload-gb-is-weights", "0.33.0", f"vllm serve {M}", role="control"),
    # The shorthand and HMA before 0.22.0.
    _case(
        "hma-flag-missing/native/trips",
        "pitfall.hma-flag-missing-with-shorthand",
        "0.20.2",
        f"vllm serve {M} --kv-offloading-backend native --kv-offloading-size 100",
        role="trips",
    ),
    _case(
        "hma-flag-missing/native/control",
        "pitfall.hma-flag-missing-with-shorthand",
        "0.20.2",
        f"vllm serve {M} --kv-offloading-backend native --kv-offloading-size 100 --disable-hybrid-kv-cache-manager",
        role="control",
    ),
    _case(
        "hma-flag-missing/native/0.33.0",
        "pitfall.hma-flag-missing-with-shorthand",
        "0.33.0",
        f"vllm serve {M} --kv-offloading-backend native --kv-offloading-size 100",
        role="control",
        note="the rule's releases end before 0.22.0; the same line on 0.33.0",
    ),
    # vLLM 0.28.0 as pip installs it today: transformers 5.25.0, whose Pixtral module lost PixtralRotaryEmbedding.
    _case(
        "install-breaks-model/mistral3/trips",
        "pitfall.install-breaks-model-class",
        "0.28.0",
        "pip install vllm==0.28.0; vllm serve mistralai/Mistral-Small-3.1-24B-Instruct-2503",
        role="trips",
        note="the venv holds what `pip install vllm==0.28.0` takes: transformers 5.25.0",
    ),
    _case(
        "install-breaks-model/control",
        "pitfall.install-breaks-model-class",
        "0.28.0",
        f"pip install vllm==0.28.0; vllm serve {M}",
        role="control",
        note="the same install; Llama's class does not import the Pixtral module",
    ),
    # LMCacheConnectorV1 with hybrid models: sliding-window (starts without HMA) and linear-attention (cannot).
    _case(
        "lmcache-v1-hybrid/gpt-oss/trips",
        "pitfall.lmcache-v1-sliding-window-model",
        "0.33.0",
        f"vllm serve {GPT_OSS} {LMCACHE_V1}",
        role="trips",
        disables=_HMA_OFF,
    ),
    _case(
        "lmcache-v1-hybrid/qwen3-next/trips",
        "pitfall.lmcache-v1-hybrid-model",
        "0.33.0",
        f"vllm serve {QWEN3_NEXT} {LMCACHE_V1}",
        role="trips",
        disables=_HMA_OFF,
    ),
    _case(
        "lmcache-v1-hybrid/control",
        "pitfall.lmcache-v1-hybrid-model",
        "0.33.0",
        f"vllm serve {M} {LMCACHE_V1}",
        role="control",
    ),
    # --kv-offloading-backend lmcache from 0.23.0: LMCacheMPConnector, a separate server.
    _case(
        "lmcache-backend-mp/trips",
        "pitfall.lmcache-backend-means-mp-server",
        "0.33.0",
        f"vllm serve {M} --kv-offloading-backend lmcache --kv-offloading-size 50",
        role="trips",
    ),
    _case(
        "lmcache-backend-mp/control",
        "pitfall.lmcache-backend-means-mp-server",
        "0.33.0",
        f"vllm serve {M} --kv-offloading-backend native --kv-offloading-size 50",
        role="control",
    ),
    # The native shorthand before 0.14.0.
    _case(
        "native-backend-before-0.14/trips",
        "pitfall.native-backend-before-0.14",
        "0.13.0",
        f"vllm serve {M} --kv-offloading-backend native --kv-offloading-size 10 --disable-hybrid-kv-cache-manager",
        role="trips",
    ),
    _case(
        "native-backend-before-0.14/0.33.0",
        "pitfall.native-backend-before-0.14",
        "0.33.0",
        f"vllm serve {M} --kv-offloading-backend native --kv-offloading-size 10 --disable-hybrid-kv-cache-manager",
        role="control",
        note="the rule's releases end at 0.13.0; the same line on 0.33.0",
    ),
    # Prefix caching off with an offload tier, per connector.
    _case(
        "prefix-caching-disabled/native/trips",
        "pitfall.prefix-caching-disabled",
        "0.33.0",
        f"vllm serve {M} --kv-offloading-size 100 --no-enable-prefix-caching",
        role="trips",
        disables={"connector_active": False},
    ),
    _case(
        "prefix-caching-disabled/simple-cpu/trips",
        "pitfall.prefix-caching-disabled",
        "0.33.0",
        f"vllm serve {M} "
        + _ktc("SimpleCPUOffloadConnector", extra={"cpu_bytes_to_use": 10 * GIB})
        + " --no-enable-prefix-caching",
        role="trips",
        disables={"connector_active": False},
    ),
    _case(
        "prefix-caching-disabled/lmcache-v1/trips",
        "pitfall.prefix-caching-disabled",
        "0.33.0",
        f"vllm serve {M} {LMCACHE_V1} --no-enable-prefix-caching",
        role="trips",
        disables={"connector_active": False},
    ),
    _case(
        "prefix-caching-disabled/control",
        "pitfall.prefix-caching-disabled",
        "0.33.0",
        f"vllm serve {M} --kv-offloading-size 100 --enable-prefix-caching",
        role="control",
    ),
    # P2pNcclConnector and other connectors the release does not register.
    _case(
        "p2p-nccl-removed/trips",
        "pitfall.p2p-nccl-removed",
        "0.33.0",
        f"vllm serve {M} " + _ktc("P2pNcclConnector", "kv_producer"),
        role="trips",
    ),
    _case(
        "p2p-nccl-removed/control", "pitfall.p2p-nccl-removed", "0.33.0", f"vllm serve {M} {OFFLOADING}", role="control"
    ),
    _case(
        "connector-not-in-release/trips",
        "pitfall.connector-not-in-release",
        "0.33.0",
        f"vllm serve {M} " + _ktc("SharedStorageConnector"),
        role="trips",
    ),
    _case(
        "connector-not-in-release/control",
        "pitfall.connector-not-in-release",
        "0.33.0",
        f"vllm serve {M} " + _ktc("ExampleConnector", extra={"shared_storage_path": "/kv"}),
        role="control",
    ),
    # store_threshold with the multi-tier spec.
    _case(
        "tiering-store-threshold/trips",
        "pitfall.tiering-store-threshold",
        "0.33.0",
        f"vllm serve {M} "
        + _ktc("OffloadingConnector", extra={**TIERING, "store_threshold": 2, "secondary_tiers": FS_TIER}),
        role="trips",
    ),
    _case(
        "tiering-store-threshold/control",
        "pitfall.tiering-store-threshold",
        "0.33.0",
        f"vllm serve {M} " + _ktc("OffloadingConnector", extra={**TIERING, "secondary_tiers": FS_TIER}),
        role="control",
    ),
    # LMCache settings.
    _case(
        "lmcache-p2p-incomplete/trips",
        "pitfall.lmcache-p2p-incomplete",
        "0.33.0",
        f"vllm serve {M} {LMCACHE_V1}",
        role="trips",
        env={"LMCACHE_ENABLE_P2P": "True", "LMCACHE_TRANSFER_CHANNEL": "nixl"},
    ),
    _case(
        "lmcache-p2p-incomplete/control",
        "pitfall.lmcache-p2p-incomplete",
        "0.33.0",
        f"vllm serve {M} {LMCACHE_V1}",
        role="control",
        env=P2P_ALL,
    ),
    _case(
        "lmcache-local-cpu-false/trips",
        "pitfall.lmcache-local-cpu-false",
        "0.33.0",
        f"vllm serve {M} {LMCACHE_V1}",
        role="trips",
        env={"LMCACHE_LOCAL_CPU": "False"},
        runtime="the hang comes once the staging buffer fills with KV from real requests (LMCache#2942): "
        "a GPU and traffic",
    ),
    # NIXL and P/D.
    _case(
        "nixl-ucx-without-cuda/trips",
        "pitfall.nixl-ucx-without-cuda",
        "0.33.0",
        f"vllm serve {M} {NIXL}",
        role="trips",
        env={"UCX_TLS": "tcp"},
        runtime="UCX picks its transports when the worker registers GPU memory with NIXL and the crash "
        "follows the first transfer: GPUs and a peer",
    ),
    _case(
        "nixl-side-channel-service-address/trips",
        "pitfall.nixl-side-channel-service-address",
        "0.33.0",
        f"vllm serve {M} {NIXL}",
        role="trips",
        env={"VLLM_NIXL_SIDE_CHANNEL_HOST": "vllm-prefill.default.svc.cluster.local"},
        runtime="the worker binds the side channel and peers connect to it: a worker (GPU) and a Kubernetes "
        "Service that resolves",
    ),
    _case(
        "pd-proxy-mismatch/trips",
        "pitfall.pd-proxy-mismatch",
        "0.33.0",
        f"python3 /opt/proxy/toy_proxy_server.py --port 8192 ; vllm serve {M} " + _ktc("MooncakeConnector"),
        role="trips",
        runtime="the KeyError is per request, when the scheduler reads kv_transfer_params the proxy sent: "
        "a running proxy, prefill and decode",
    ),
    # A secondary tier type the release does not register.
    _case(
        "tier-type-not-registered/trips",
        "pitfall.tier-type-not-registered",
        "0.33.0",
        f"vllm serve {M} "
        + _ktc(
            "OffloadingConnector",
            # 1 GiB: the CPU tier's /dev/shm region is checked first (this machine's /dev/shm has ~5 GiB)
            extra={**TIERING, "cpu_bytes_to_use": GIB, "secondary_tiers": [{"type": "fs_python", "root_dir": "/kv"}]},
        ),
        role="trips",
    ),
    # Host memory, shared memory and devices: what the container is given, not what the engine decides.
    _case(
        "pinned-memory-over-pod-limit/trips",
        "pitfall.pinned-memory-over-pod-limit",
        "0.33.0",
        f"vllm serve {M} --kv-offloading-size 100",
        role="trips",
        runtime=_NEEDS_GPU
        + "; the pod's memory limit is enforced by the kernel's cgroup when the worker pins the tier",
    ),
    _case(
        "offload-tier-over-shm/trips",
        "pitfall.offload-tier-over-shm",
        "0.33.0",
        f"vllm serve {M} --kv-offloading-size 100",
        role="trips",
        runtime="the CPU tier's shared-memory file is created and its free space checked by the worker at start-up; "
        "/dev/shm is the container's",
    ),
    _case(
        "shm-too-small-for-workers/trips",
        "pitfall.shm-too-small-for-workers",
        "0.33.0",
        f"vllm serve {M} -tp 2",
        role="trips",
        runtime="the workers' message queues live in /dev/shm, created when the executor starts the workers (GPUs)",
    ),
    _case(
        "world-size-over-visible-gpus/trips",
        "pitfall.world-size-over-visible-gpus",
        "0.33.0",
        f"vllm serve {M} -tp 4",
        role="trips",
        env={"CUDA_VISIBLE_DEVICES": "0,1"},
        runtime="the devices a container sees are the runtime's; the stand-in platform reports 8 and keeps "
        "CUDA_VISIBLE_DEVICES empty for Triton, so the case's value is not given to the engine",
    ),
    # Host memory.
    _case(
        "offload-exceeds-host-ram/trips",
        "pitfall.offload-exceeds-host-ram",
        "0.33.0",
        f"vllm serve {M} --kv-offloading-size 400",
        role="trips",
        runtime=_NEEDS_GPU + "; the host's RAM and the container's limit are the host's, not the engine's",
    ),
    # Flags.
    _case(
        "calculate-kv-scales-removed/trips",
        "pitfall.calculate-kv-scales-removed",
        "0.33.0",
        f"vllm serve {M} --kv-cache-dtype fp8 --calculate-kv-scales",
        role="trips",
    ),
    _case(
        "calculate-kv-scales-removed/control",
        "pitfall.calculate-kv-scales-removed",
        "0.33.0",
        f"vllm serve {M} --kv-cache-dtype auto",
        role="control",
    ),
    _case(
        "flag-not-in-release/trips",
        "pitfall.flag-not-in-release",
        "0.33.0",
        f"vllm serve {M} --calculate-kv-scales",
        role="trips",
    ),
    _case(
        "unknown-flag/trips", "pitfall.unknown-flag", "0.33.0", f"vllm serve {M} --kv-offloading-sise 10", role="trips"
    ),
    _case(
        "unknown-flag/prefix",
        "pitfall.unknown-flag",
        "0.33.0",
        f"vllm serve {M} --max-num-seq 64",
        role="control",
        note="an unambiguous prefix of --max-num-seqs (issue 15: argparse prefix matching)",
    ),
    _case(
        "unknown-flag/control", "pitfall.unknown-flag", "0.33.0", f"vllm serve {M} --max-num-seqs 64", role="control"
    ),
    # KVTransferConfig lost kv_buffer_size, kv_rank, kv_parallel_size and kv_ip in 0.32.0, and forbids unknown fields.
    _case(
        "transfer-config-field/trips",
        "pitfall.transfer-config-field-refused",
        "0.33.0",
        f"vllm serve {M} " + _ktc_with("OffloadingConnector", {"kv_rank": 0}, {"cpu_bytes_to_use": 10 * GIB}),
        role="trips",
    ),
    _case(
        "transfer-config-field/control",
        "pitfall.transfer-config-field-refused",
        "0.33.0",
        f"vllm serve {M} {OFFLOADING}",
        role="control",
    ),
    # --compilation-config's pass_config is a PassConfig of its own, which forbids fields it does not have.
    _case(
        "compilation-config-field/pass-config/trips",
        "pitfall.transfer-config-field-refused",
        "0.33.0",
        f"vllm serve {M} --compilation-config " + shlex.quote('{"pass_config":{"enable_fusion":true}}'),
        role="trips",
    ),
    _case(
        "compilation-config-field/compilation-config/trips",
        "pitfall.transfer-config-field-refused",
        "0.33.0",
        f"vllm serve {M} --compilation-config.attention_backend FLASH_ATTN",
        role="trips",
    ),
    _case(
        "compilation-config-field/control",
        "pitfall.transfer-config-field-refused",
        "0.33.0",
        f"vllm serve {M} --compilation-config " + shlex.quote('{"pass_config":{"fuse_norm_quant":true}}'),
        role="control",
    ),
    # From 0.13.0 an -O word is an optimization level: -O.KEY=V, 0.11's compilation-config shorthand, is refused.
    _case(
        "dotted-o/trips",
        "pitfall.option-value-refused",
        "0.33.0",
        f"vllm serve {M} -O.attention_backend=FLASH_ATTN",
        role="trips",
    ),
    _case("dotted-o/control", "pitfall.option-value-refused", "0.33.0", f"vllm serve {M} -O3", role="control"),
    # A word after the model that is no option (a chart's extraArgs holding CUDA_VISIBLE_DEVICES=0,1): the serve
    # parser has one positional, the model tag.
    _case(
        "stray-word/trips",
        "pitfall.option-value-refused",
        "0.27.1",
        f"vllm serve {M} --max-num-seqs 4 CUDA_VISIBLE_DEVICES=0,1",
        role="trips",
    ),
    _case(
        "stray-word/control",
        "pitfall.option-value-refused",
        "0.27.1",
        f"vllm serve {M} --max-num-seqs 4",
        role="control",
    ),
    # The shorthand writes its connector and kv_both over a --kv-transfer-config's: NIXL is never built.
    _case(
        "shorthand-replaces/nixl/trips",
        "pitfall.shorthand-replaces-transfer-config",
        "0.27.1",
        f"vllm serve {M} --kv-offloading-size 4 --kv-transfer-config "
        + shlex.quote('{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'),
        role="trips",
        disables={"kv_connector": "OffloadingConnector", "kv_role": "kv_both"},
    ),
    _case(
        "expandable-segments/trips",
        "pitfall.expandable-segments-with-kv-connector",
        "0.27.1",
        f"vllm serve {M} --kv-offloading-size 4",
        role="trips",
        env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    ),
    _case(
        "expandable-segments/control",
        "pitfall.expandable-segments-with-kv-connector",
        "0.27.1",
        f"vllm serve {M} --kv-offloading-size 4 --enable-cumem-allocator",
        role="control",
        env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    ),
    _case(
        "shorthand-replaces/control",
        "pitfall.shorthand-replaces-transfer-config",
        "0.27.1",
        f"vllm serve {M} --kv-offloading-size 4",
        role="control",
    ),
    _case("kv-role-missing/trips", "pitfall.kv-role-missing", "0.27.1",
          f"vllm serve {M} --kv-transfer-config " + """'{"kv_connector":"NixlConnector"}'""", role="trips"),
    _case("kv-role-missing/control", "pitfall.kv-role-missing", "0.27.1",
          f"vllm serve {M} --kv-transfer-config " + """'{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'""",
          role="control"),
    # The GPU worker's dtype check (gpu_worker.py init_device), run as the worker calls it.
    _case("bf16-pre-ampere/trips", "pitfall.bf16-on-pre-ampere-gpu", "0.27.1", f"vllm serve {M} --dtype bfloat16",
          role="trips", gpu="t4"),
    _case("bf16-pre-ampere/control", "pitfall.bf16-on-pre-ampere-gpu", "0.27.1", f"vllm serve {M} --dtype auto",
          role="control", gpu="t4"),
]  # fmt: skip

# render_config requests whose `vllm serve` lines are run too (issue 14: "worth keeping").
RENDER_REQUESTS: list[dict[str, Any]] = [
    {"backend": "native_cpu", "sizes": {"kv_offloading_size_gib": 8}},
    {"backend": "native_cpu", "sizes": {"kv_offloading_size_gib": 16}, "parallelism": {"tensor_parallel_size": 2}},
    {"backend": "native_tiering", "tiers": ["fs"], "sizes": {"kv_offloading_size_gib": 8}, "paths": {"disk": ["/kv"]}},
    {"backend": "lmcache", "sizes": {"kv_offloading_size_gib": 8}},
    {"backend": "lmcache_p2p", "sizes": {"kv_offloading_size_gib": 8}},
    {"backend": "lmcache_mp", "sizes": {"kv_offloading_size_gib": 8}},
    {"backend": "nixl_pd"},
    {"backend": "mooncake_pd"},
    {"backend": "multi_nixl_offload", "sizes": {"kv_offloading_size_gib": 8}},
]


# ----------------------------------------------------------------------------- render lines (project python)


def render_lines(version: str) -> list[dict[str, Any]]:
    """Every `vllm serve` line render_config writes for ``version``: run by the project's python."""
    from vllm_caching_mcp.advice.common import AdviceError
    from vllm_caching_mcp.advice.render import RenderConfigRequest, render_config, shell_words
    from vllm_caching_mcp.knowledge import load_knowledge

    knowledge = load_knowledge()
    out = []
    for request in RENDER_REQUESTS:
        arguments = {"model": M, "version": version, "format": "vllm_serve", **request}
        try:
            result = render_config(RenderConfigRequest.model_validate(arguments), knowledge)
        except AdviceError:  # a backend the release does not have: render_config says so, nothing to run
            continue
        for rendered in result.files:
            words = shell_words(rendered.content)
            env = {}
            while words and "=" in words[0] and words[0].split("=", 1)[0].isupper():
                key, value = words.pop(0).split("=", 1)
                env[key] = value
            if words[:2] != ["vllm", "serve"]:
                continue
            out.append(
                {
                    "id": f"render/{request['backend']}/{rendered.name}"
                    + ("/tp" + str(request["parallelism"]["tensor_parallel_size"]) if "parallelism" in request else ""),
                    "role": "render",
                    "version": version,
                    "render_request": arguments,
                    "file": rendered.name,
                    "command": shlex.join(words),
                    "env": env,
                }
            )
    return out


# ----------------------------------------------------------------------------- in the subprocess


class ParserExit(Exception):
    """`vllm serve`'s parser exited (argparse's SystemExit), with the message it printed."""

    def __init__(self, message: str, code: object) -> None:
        super().__init__(message)
        self.code = code


def _parser_message(printed: str) -> str:
    """What argparse printed as it exited: its `error:` line and the lines after it (a pydantic error's field and
    message), joined, without pydantic's link to its docs; else the last line."""
    lines = [line.strip() for line in printed.splitlines() if line.strip()]
    start = max((i for i, line in enumerate(lines) if "error:" in line), default=len(lines) - 1)
    kept = [line for line in lines[max(start, 0) :] if not line.startswith("For further information visit")]
    return "; ".join(kept)


class _Records(logging.Handler):
    """vLLM's and LMCache's log records at WARNING and above, first line each, in order."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith(("vllm", "lmcache")):  # torch's deprecation notes are not the engine's
            return
        try:
            first = record.getMessage().strip().splitlines()[0] if record.getMessage().strip() else ""
        except Exception:  # a record whose arguments do not format: keep the template
            first = str(record.msg).splitlines()[0]
        line = f"{record.levelname} {record.name}: {first}"
        if line not in self.lines:
            self.lines.append(line)


def _serve_argv(command: str) -> tuple[list[str], str]:
    """The words after `vllm serve` in ``command`` (the last `vllm serve` of a `;` list), the model
    replaced by its config dir, and the model name as written."""
    words = shlex.split(command.rsplit(";", 1)[-1])
    start = next(i for i in range(len(words) - 1) if words[i : i + 2] == ["vllm", "serve"])
    argv = words[start + 2 :]
    model = argv[0]
    argv[0] = str(CONFIGS / MODEL_CONFIGS[model])
    # The engine reads no tokenizer and no weights: a config directory is all there is.
    return [*argv, "--skip-tokenizer-init", "--load-format", "dummy"], model


def _first_line(exc: BaseException) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors) and type(exc).__name__ == "ValidationError":  # pydantic: the first error, not the count
        with contextlib.suppress(Exception):
            return str(errors()[0]["msg"]).splitlines()[0]
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _raised_at(exc: BaseException) -> str | None:
    """Where in the installed packages the exception was raised: path:line (function)."""
    where = None
    for frame in traceback.extract_tb(exc.__traceback__):
        for package in ("/vllm/", "/lmcache/"):
            if package in frame.filename:
                path = package[1:] + frame.filename.rsplit(package, 1)[1]
                where = f"{path}:{frame.lineno} ({frame.name})"
    return where


def _deadline(stage: str, fn: Any) -> Any:
    """Run fn() in a thread; a stage that does not return in STAGE_DEADLINE_S hangs."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the caller
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"oracle-{stage}", daemon=True)
    thread.start()
    thread.join(STAGE_DEADLINE_S)
    if thread.is_alive():
        raise TimeoutError(f"{stage} did not return within {STAGE_DEADLINE_S} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _parse(argv: list[str]) -> Any:
    """`vllm serve`'s parser as vllm/entrypoints/cli/main.py builds it, and the subcommand's validate."""
    import vllm.entrypoints.cli.serve as serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    [cmd] = serve.cmd_init()
    cmd.subparser_init(subparsers).set_defaults(dispatch_function=cmd.cmd)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args = parser.parse_args(["serve", *argv])
    except SystemExit as exc:
        raise ParserExit(_parser_message(stderr.getvalue()) or f"argparse exited with {exc.code}", exc.code) from None
    cmd.validate(args)
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag
    return args


def _kv_cache_config(vllm_config: Any, platform: Any) -> Any:
    """The KV cache config the engine would hand the scheduler: oracle.py's build of the model on the meta
    device, then the release's own planning (kv_cache_planning from 0.33.0, kv_cache_utils before)."""
    import compat
    import torch
    import vllm.utils.torch_utils as torch_utils
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    tp = vllm_config.parallel_config.tensor_parallel_size
    oracle._fake_parallel_groups(tp, 1)
    torch_utils._aux_stream = object()

    class _Runner:
        pass

    with set_current_vllm_config(vllm_config), set_default_torch_dtype(vllm_config.model_config.dtype):
        with torch.device("meta"):
            initialize_model(vllm_config=vllm_config)
        if hasattr(platform, "update_block_size_for_backend"):
            platform.update_block_size_for_backend(vllm_config)
        runner = _Runner()
        runner.vllm_config = vllm_config  # type: ignore[attr-defined]
        runner.shared_kv_cache_layers = {}  # type: ignore[attr-defined]
        specs = [compat.kv_cache_spec(runner)] * tp
        return offload.plan_kv_cache(vllm_config, runner, specs, BUDGET_BYTES)[0]


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except TypeError:
        return repr(value)
    return value


def _resolved(vllm_config: Any) -> dict[str, Any]:
    """What the engine config decided, for the facts the rules are about."""
    cache, sched, ktc = vllm_config.cache_config, vllm_config.scheduler_config, vllm_config.kv_transfer_config
    offload = getattr(vllm_config, "offload_config", None)
    uva = getattr(offload, "uva", None)
    cpu_offload_gb = getattr(uva, "cpu_offload_gb", None)
    if cpu_offload_gb is None:  # older releases keep it on the cache config
        cpu_offload_gb = getattr(cache, "cpu_offload_gb", None)
    return {
        "kv_connector": getattr(ktc, "kv_connector", None),
        "kv_role": getattr(ktc, "kv_role", None),
        "kv_connector_extra_config": _jsonable(dict(getattr(ktc, "kv_connector_extra_config", {}) or {})),
        "hybrid_kv_cache_manager": not sched.disable_hybrid_kv_cache_manager,
        "enable_prefix_caching": bool(cache.enable_prefix_caching),
        "kv_cache_dtype": str(cache.cache_dtype),
        "cpu_offload_gb_weights": cpu_offload_gb,
        "kv_offloading_size_gib": getattr(cache, "kv_offloading_size", None),
        "kv_offloading_backend": getattr(cache, "kv_offloading_backend", None),
    }


def _connector_facts(connector: Any) -> dict[str, Any]:
    """Which connector was built for the scheduler, and whether it is doing anything."""
    facts: dict[str, Any] = {"connector_class": type(connector).__name__}
    # SimpleCPUOffloadConnector turns itself off (no scheduler manager) when prefix caching is off;
    # OffloadingConnector's scheduler side is its connector_scheduler.
    if hasattr(connector, "scheduler_manager"):
        facts["connector_active"] = connector.scheduler_manager is not None
    elif hasattr(connector, "connector_scheduler"):
        facts["connector_active"] = connector.connector_scheduler is not None
    scheduler = getattr(connector, "connector_scheduler", None)
    manager = getattr(scheduler, "manager", None)
    if manager is not None:
        facts["offloading_manager"] = type(manager).__name__
    spec = getattr(scheduler, "spec", None)
    if spec is not None:
        facts["offloading_spec"] = type(spec).__name__
    return facts


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    """One case, in this process: what the engine does with the command line."""
    records = _Records()
    # vLLM configures its loggers (dictConfig, propagate off) and may do it again: take every record at
    # the source, whatever handlers are installed by then.
    call_handlers = logging.Logger.callHandlers

    def call_handlers_and_record(self: logging.Logger, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            records.emit(record)
        call_handlers(self, record)

    logging.Logger.callHandlers = call_handlers_and_record  # type: ignore[method-assign]
    gpu = oracle.GPUS[case.get("gpu", "h100")]
    platform = oracle._install_platform(gpu)

    import vllm

    argv, model = _serve_argv(case["command"])
    result: dict[str, Any] = {"stages": []}
    resolved: dict[str, Any] = {}
    running = {"stage": ""}

    def stage(name: str, fn: Any) -> Any:
        running["stage"] = name
        value = _deadline(name, fn)
        result["stages"].append(name)
        return value

    try:
        args = stage("serve_parser", lambda: _parse(argv))
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.usage.usage_lib import UsageContext

        engine_args = stage("from_cli_args", lambda: AsyncEngineArgs.from_cli_args(args))
        vllm_config = stage(
            "create_engine_config",
            lambda: engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER),
        )
        _announce_engine(vllm_config)
        resolved.update(_resolved(vllm_config))
        # What each GPU worker checks first (vllm/v1/worker/gpu_worker.py init_device): the model's dtype.
        stage("worker_dtype_check", lambda: platform.check_if_supports_dtype(vllm_config.model_config.dtype))
        resolved["dtype"] = str(vllm_config.model_config.dtype).removeprefix("torch.")
        if vllm_config.kv_transfer_config is not None and vllm_config.kv_transfer_config.kv_connector:
            from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
            from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorRole

            try:
                kv_cache_config = stage("kv_cache_plan", lambda: _kv_cache_config(vllm_config, platform))
            except Exception as exc:  # the stand-in's problem, not the engine's: the connector is still tried
                result["kv_cache_plan"] = f"not built ({type(exc).__name__}: {_first_line(exc)})"
                kv_cache_config = None
            connector = stage(
                "scheduler_connector",
                lambda: KVConnectorFactory.create_connector(vllm_config, KVConnectorRole.SCHEDULER, kv_cache_config),
            )
            resolved.update(_connector_facts(connector))
    except BaseException as exc:
        failed = running["stage"]
        missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
        if isinstance(exc, TimeoutError):
            outcome = "hangs"
        elif missing and missing.split(".")[0] not in ("vllm",):
            outcome = "not_reachable_offline"
            result["why"] = f"{failed} needs the {missing.split('.')[0]} package, which this venv does not have"
        elif "kv_cache_plan" in result and isinstance(exc, AssertionError | AttributeError | TypeError):
            # Built without the plan, the connector tripped over the missing KV cache config: not a refusal.
            outcome = "not_reachable_offline"
            result["why"] = "the connector needs the KV cache config, which the oracle could not plan here"
        else:
            outcome = "refused"
        result.update(
            {
                "outcome": outcome,
                "stage": failed,
                "exception": f"{type(exc).__module__}.{type(exc).__qualname__}",
                "message": _first_line(exc),
            }
        )
        if isinstance(exc, ParserExit):
            result["exception"] = f"SystemExit({exc.code}) from argparse"
        result["raised_at"] = _raised_at(exc)
    else:
        watched = case.get("disables") or {}
        off = bool(watched) and all(k in resolved and resolved[k] == v for k, v in watched.items())
        result["outcome"] = "disabled" if off else "works"
    result["resolved"] = resolved
    result["log_warnings"] = records.lines[:30]
    return {
        **{k: case[k] for k in case},
        "engine_model_config": str((CONFIGS / MODEL_CONFIGS[model]).relative_to(REPO)),
        "engine_argv_added": ["--skip-tokenizer-init", "--load-format", "dummy"],
        "provenance": {
            "vllm_version": vllm.__version__,
            "transformers_version": importlib.metadata.version("transformers"),
            "recorded_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "method": "vllm serve's parser and validate; AsyncEngineArgs.from_cli_args; create_engine_config"
            "(OPENAI_API_SERVER); the GPU worker's dtype check (current_platform.check_if_supports_dtype); with a "
            "KV connector: the KV cache planned on the meta-device model and "
            "KVConnectorFactory.create_connector(role=SCHEDULER); WARNING+ log records",
            "gpu": gpu["name"],
        },
        "engine": result,
    }


def _announce_engine(vllm_config: Any) -> None:
    engine_id = offload.engine_id_of(vllm_config)
    if engine_id:
        _ENGINE_IDS.add(engine_id)
        print(SHM_MARK + engine_id, flush=True)


def _one(case_json: str) -> int:
    case = json.loads(case_json)
    try:
        record = run_case(case)
    except Exception as exc:  # the driver records the failure with the case
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}))
        offload.remove_shm_regions(_ENGINE_IDS)
        return 1
    print("ORACLE-RECORD " + json.dumps(record), flush=True)
    offload.remove_shm_regions(_ENGINE_IDS)
    # A stage that hung left a thread behind (a socket waiting for a server): do not wait for it.
    os._exit(0)


# ----------------------------------------------------------------------------- the driver


def _text(output: str | bytes | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def run_case_process(command: list[str], env: dict[str, str] | None, timeout: float) -> tuple[int | None, str, str]:
    """Run one case's process: its return code (None: killed at ``timeout``), stdout and stderr. Whatever becomes
    of it, the shared-memory regions of the engines it announced are removed afterwards, and only those."""
    try:
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:  # run() killed it; what it printed until then is kept
        code, stdout, stderr = None, _text(exc.stdout), _text(exc.stderr)
    announced = {line.removeprefix(SHM_MARK).strip() for line in stdout.splitlines() if line.startswith(SHM_MARK)}
    offload.remove_shm_regions(announced)
    return code, stdout, stderr


def _case_env(base: dict[str, str], case: dict[str, Any], lmcache_dir: str | None) -> dict[str, str]:
    # CUDA_VISIBLE_DEVICES stays the oracle's (empty: real Triton, the stand-in's 8 devices).
    env = {**base, **{k: v for k, v in case["env"].items() if k != "CUDA_VISIBLE_DEVICES"}}
    if lmcache_dir and any(name in case["command"] for name in LMCACHE_CONNECTORS | {"lmcache"}):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (lmcache_dir, base.get("PYTHONPATH", "")) if p)
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--render-lines", help=argparse.SUPPRESS)
    parser.add_argument("--only", action="append", default=[], help="case id prefix to run (repeatable)")
    parser.add_argument(
        "--project-python", default="python3", help="a python with this project installed (renders the lines)"
    )
    parser.add_argument(
        "--lmcache-dir",
        default=None,
        help="an unpacked lmcache wheel and its dependencies' directories (os.pathsep-separated), for LMCache cases",
    )
    parser.add_argument(
        "--stub-dir", default=os.path.join(tempfile.gettempdir(), "engine-oracle-lib"), help="libcuda stub dir"
    )
    parser.add_argument("--out", default=None, help="record file (default tests/data/engine/rules-<vllm>.json)")
    args = parser.parse_args(argv)
    if args.render_lines:
        print(json.dumps(render_lines(args.render_lines)))
        return 0
    if args.one:
        return _one(args.one)

    import importlib.metadata

    version = importlib.metadata.version("vllm")
    out = Path(args.out) if args.out else REPO / "tests" / "data" / "engine" / f"rules-{version}.json"
    subprocess.run(["bash", str(HERE / "build_stub.sh"), args.stub_dir], check=True, capture_output=True, text=True)
    base = dict(os.environ)
    base["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (args.stub_dir, base.get("LD_LIBRARY_PATH", "")) if p)
    base.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    base["CUDA_VISIBLE_DEVICES"] = ""  # see oracle.py: keeps real Triton
    base["FLASHINFER_CUBINS_REPOSITORY"] = "http://127.0.0.1:9/"  # nothing leaves the machine
    base["HF_HUB_OFFLINE"] = "1"
    base["VLLM_NO_USAGE_STATS"] = "1"
    rendering = subprocess.run(
        [args.project_python, __file__, "--render-lines", version], capture_output=True, text=True
    )
    failures: dict[str, str] = {}
    if rendering.returncode != 0:  # the recorded render cases stay as they were
        failures["render"] = "\n".join(rendering.stderr.strip().splitlines()[-5:])
        print(f"render_config lines: FAILED\n{failures['render']}", flush=True)
    cases = [c for c in CASES if c["version"] == version] + (json.loads(rendering.stdout) if not failures else [])
    existing: dict[str, Any] = {}
    if out.exists():
        existing = {r["id"]: r for r in json.loads(out.read_text())["cases"]}
    started = time.monotonic()
    for case in cases:
        if args.only and not any(case["id"].startswith(p) for p in args.only):
            continue
        t0 = time.monotonic()
        command = [sys.executable, __file__, "--one", json.dumps(case)]
        code, stdout, stderr = run_case_process(command, _case_env(base, case, args.lmcache_dir), CASE_DEADLINE_S)
        lines = [line for line in stdout.splitlines() if line.startswith("ORACLE-RECORD ")]
        if code == 0 and lines:
            record = json.loads(lines[-1].removeprefix("ORACLE-RECORD "))
            record["provenance"]["seconds"] = round(time.monotonic() - t0, 1)
            if "PYTHONPATH" in _case_env(base, case, args.lmcache_dir) and args.lmcache_dir:
                record["provenance"]["lmcache"] = Path(args.lmcache_dir).name
            existing[case["id"]] = record
            engine = record["engine"]
            print(
                f"{case['id']}: {engine['outcome']} {engine.get('message', '')} ({time.monotonic() - t0:.0f} s)",
                flush=True,
            )
        else:
            killed = [f"killed after {CASE_DEADLINE_S} s"] if code is None else []
            failures[case["id"]] = "\n".join([*killed, *(stdout + stderr).strip().splitlines()[-25:]])
            print(f"{case['id']}: FAILED\n{failures[case['id']]}", flush=True)
    order = {c["id"]: i for i, c in enumerate(cases)}
    record_file = {
        "about": "What vLLM does with the command lines that trip the error-level review rules, and with "
        "render_config's vllm serve lines; recorded by scripts/engine_oracle/rules.py, read by "
        "tests/test_engine_rules.py. See knowledge/ENGINE.md.",
        "vllm_version": version,
        "cases": [existing[k] for k in sorted(existing, key=lambda k: order.get(k, len(order)))],
    }
    out.write_text(json.dumps(record_file, indent=1) + "\n")
    print(f"{len(record_file['cases'])} cases in {out} ({time.monotonic() - started:.0f} s); {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
