"""review_deployment, asked the way operators ask: "what is wrong with this deployment on vLLM X?"

Every rule (a pitfall with `when:` in knowledge/pitfalls.yaml) has a failing and a passing
example in RULE_CASES; a test makes sure no rule is left without one. The manifests under
tests/data/deployments/ are reviewed end to end with the findings written out by hand.
"""

from __future__ import annotations

import gc
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from reading import review
from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.advice.deployment import Document, parse_documents, resolve
from vllm_caching_mcp.advice.deployment.flags import SWITCHES
from vllm_caching_mcp.advice.deployment.shell import tokenize_shell
from vllm_caching_mcp.advice.review import (
    HostFacts,
    ReviewRequest,
    ReviewResult,
    exit_code,
    list_rules,
    review_deployment,
    to_sarif,
)
from vllm_caching_mcp.advice.review_conditions import Context, _expression
from vllm_caching_mcp.knowledge import Knowledge, load_knowledge
from vllm_caching_mcp.knowledge_files import KnowledgeError
from vllm_caching_mcp.tools import ToolInputError, run_tool
from vllm_caching_mcp.versions import Version

DATA = Path(__file__).parent / "data" / "deployments"
M = "meta-llama/Llama-3.1-8B-Instruct"
IMAGE = "vllm/vllm-openai:v0.33.0"
NIXL = """--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'"""
LMCACHE_V1 = """--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'"""
LMCACHE_PRODUCER = LMCACHE_V1.replace("kv_both", "kv_producer")
MOONCAKE = """--kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_both"}'"""
TIERING_FS = (
    """--kv-transfer-config '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":"""
    """{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":107374182400,"""
    """"secondary_tiers":[{"type":"fs","root_dir":"/kv"}]}}'"""
)
TIERING_FS_PYTHON = TIERING_FS.replace('"type":"fs"', '"type":"fs_python"')
P2P_ALL = (
    "LMCACHE_ENABLE_P2P=True LMCACHE_TRANSFER_CHANNEL=nixl LMCACHE_ENABLE_CONTROLLER=True "
    "LMCACHE_CONTROLLER_PULL_URL=ctrl:8300 LMCACHE_CONTROLLER_REPLY_URL=ctrl:8400 "
    "LMCACHE_LMCACHE_WORKER_PORTS=8500 LMCACHE_P2P_INIT_PORTS=8200 LMCACHE_P2P_LOOKUP_PORTS=8201 "
    "LMCACHE_P2P_HOST=10.0.0.5 LMCACHE_ENABLE_ASYNC_LOADING=True"
)


# rule id -> (version, failing command, passing command, request extras). The commands differ in the
# one thing the rule is about; the comment says why each fails.
def _nixl(**fields: Any) -> str:
    config = {"kv_connector": "NixlConnector", "kv_role": "kv_both", **fields}
    return "--kv-transfer-config '" + json.dumps(config, separators=(",", ":")) + "'"


RULE_CASES: dict[str, tuple[str | None, str, str, dict[str, Any]]] = {
    # checks across the objects of a deployment (tests/test_review_graph.py has them in manifests)
    "pitfall.no-gpu-requested": (
        "0.33.0",
        f"docker run {IMAGE} --model {M}",
        f"docker run --gpus 1 {IMAGE} --model {M}",
        {},
    ),
    # VLLM_RPC_TIMEOUT is read by no code from 0.23.0; VLLM_ENGINE_READY_TIMEOUT_S is
    # bool(int()) refuses "true"; 1 is the switch as vllm/envs.py reads it
    "pitfall.vllm-env-value-refused": (
        "0.33.0",
        f"VLLM_USE_DEEP_GEMM=true vllm serve {M}",
        f"VLLM_USE_DEEP_GEMM=1 vllm serve {M}",
        {},
    ),
    "pitfall.vllm-env-unread": (
        "0.33.0",
        f"VLLM_RPC_TIMEOUT=300 vllm serve {M}",
        f"VLLM_ENGINE_READY_TIMEOUT_S=300 vllm serve {M}",
        {},
    ),
    # the V1 engine's switch, gone in 0.11.1, set to the 1 it defaulted to: a leftover, not a lost setting
    "pitfall.vllm-env-leftover-default": (
        "0.33.0",
        f"VLLM_USE_V1=1 vllm serve {M}",
        f"VLLM_USE_V1=0 vllm serve {M}",
        {},
    ),
    # 70.6 B parameters in bfloat16 = 131 GiB: 65.7 GiB a GPU over TP 2, 32.9 GiB over TP 4, of an L40S's 44.7 GiB
    "pitfall.weights-exceed-gpu-memory": (
        "0.33.0",
        "vllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size 2",
        "vllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size 4",
        {"host": {"gpu": "L40S"}},
    ),
    # NIXL's kv_both, deprecated from 0.23.0
    "pitfall.nixl-kv-both-deprecated": (
        "0.33.0",
        f"vllm serve {M} {NIXL}",
        f"""vllm serve {M} --kv-transfer-config '{{"kv_connector":"NixlConnector","kv_role":"kv_producer"}}'""",
        {},
    ),
    # a Ray cluster started for the engine, and vLLM left to pick its executor
    "pitfall.ray-cluster-without-ray-backend": (
        "0.33.0",
        f"ray start --head --port 6379 && vllm serve {M} --tensor-parallel-size 8 --pipeline-parallel-size 2",
        f"ray start --head --port 6379 && vllm serve {M} --tensor-parallel-size 8 --pipeline-parallel-size 2 "
        "--distributed-executor-backend ray",
        {},
    ),
    # a pinned release pip refuses to install into the Python the script chose
    "pitfall.python-outside-requires-python": (
        "0.33.0",
        f"uv venv --python 3.10 && uv pip install vllm==0.33.0 && vllm serve {M}",
        f"uv venv --python 3.12 && uv pip install vllm==0.33.0 && vllm serve {M}",
        {},
    ),
    # an unpinned install into a Python only an old release admits
    "pitfall.unpinned-install-old-python": (
        None,
        f"conda create -n vllm python=3.9 -y && pip install vllm && vllm serve {M}",
        f"conda create -n vllm python=3.12 -y && pip install vllm && vllm serve {M}",
        {},
    ),
    # transformers pinned outside the vLLM release's Requires-Dist
    "pitfall.pin-outside-vllm-requirement": (
        None,
        f"pip install vllm==0.15.1 transformers==5.1.0 && vllm serve {M}",
        f"pip install vllm==0.15.1 transformers==4.57.1 && vllm serve {M}",
        {},
    ),
    # one option twice: argparse keeps the second value
    "pitfall.option-given-twice": (
        "0.33.0",
        f"vllm serve {M} --max-num-seqs 8 --max-num-seqs 16",
        f"vllm serve {M} --max-num-seqs 16 --middleware a.b --middleware c.d",
        {},
    ),
    # the development endpoints (/collective_rpc, /sleep) on the served API
    "pitfall.server-dev-mode-endpoints": (
        "0.33.0",
        f"VLLM_SERVER_DEV_MODE=1 vllm serve {M}",
        f"VLLM_SERVER_DEV_MODE=0 vllm serve {M}",
        {},
    ),
    # the demo server module: gone from 0.25.0, a warning before
    "pitfall.demo-api-server-removed": (
        "0.33.0",
        f"python -m vllm.entrypoints.api_server --model {M}",
        f"python -m vllm.entrypoints.openai.api_server --model {M}",
        {},
    ),
    "pitfall.demo-api-server": (
        "0.22.1",
        f"python -m vllm.entrypoints.api_server --model {M}",
        f"python -m vllm.entrypoints.openai.api_server --model {M}",
        {},
    ),
    # the LMCache variable does nothing without a connector that loads LMCache
    "pitfall.lmcache-settings-without-connector": (
        "0.33.0",
        f"LMCACHE_CONFIG_FILE=cpu-offload.yaml vllm serve {M}",
        f"LMCACHE_CONFIG_FILE=cpu-offload.yaml vllm serve {M} {LMCACHE_V1}",
        {},
    ),
    # each of the two TP workers pins its own 200 GiB
    "pitfall.lmcache-cpu-size-per-rank": (
        "0.33.0",
        f"LMCACHE_MAX_LOCAL_CPU_SIZE=200 vllm serve {M} --tensor-parallel-size 2 {LMCACHE_V1}",
        f"LMCACHE_MAX_LOCAL_CPU_SIZE=200 vllm serve {M} {LMCACHE_V1}",
        {},
    ),
    # two NIXL servers of one script on one host: both on the side-channel port 5600 unless told otherwise
    "pitfall.ports-bound-twice": (
        "0.33.0",
        f"vllm serve {M} --port 8100 {NIXL} & vllm serve {M} --port 8200 {NIXL}",
        f"vllm serve {M} --port 8100 {NIXL} & VLLM_NIXL_SIDE_CHANNEL_PORT=5700 vllm serve {M} --port 8200 {NIXL}",
        {},
    ),
    # ubuntu holds no vLLM; a pinned install before the launch brings it
    "pitfall.vllm-not-in-image": (
        "0.33.0",
        f"docker run --gpus 1 ubuntu:22.04 vllm serve {M}",
        f"docker run --gpus 1 ubuntu:22.04 sh -c 'pip install vllm==0.33.0 && vllm serve {M}'",
        {},
    ),
    # vLLM binds 8000 unless --port says otherwise; -p publishes the container's 8080
    "pitfall.server-port-not-reached": (
        "0.33.0",
        f"docker run --gpus 1 -p 8000:8080 {IMAGE} --model {M}",
        f"docker run --gpus 1 -p 8000:8080 {IMAGE} --model {M} --port 8080",
        {},
    ),
    # TP 2 x DP 2 on one host is four ranks, four GPUs
    "pitfall.gpus-fewer-than-ranks": (
        "0.33.0",
        f"docker run --gpus 2 {IMAGE} --model {M} -tp 2 --data-parallel-size 2",
        f"docker run --gpus 4 {IMAGE} --model {M} -tp 2 --data-parallel-size 2",
        {},
    ),
    "pitfall.shm-above-memory-limit": (
        "0.33.0",
        f"docker run --gpus 1 --memory 32g --shm-size 64g {IMAGE} --model {M}",
        f"docker run --gpus 1 --memory 32g --shm-size 16g {IMAGE} --model {M}",
        {},
    ),
    # the shorthand writes OffloadingConnector and kv_both over NIXL (recorded: rules-0.27.1.json)
    "pitfall.shorthand-replaces-transfer-config": (
        "0.34.0",
        f"vllm serve {M} --kv-offloading-size 200 --kv-transfer-config "
        + """'{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'""",
        f"vllm serve {M} --kv-offloading-size 200 --kv-transfer-config "
        + """'{"kv_connector":"OffloadingConnector","kv_role":"kv_both"}'""",
        {},
    ),
    # recorded: rules-0.27.1.json, expandable-segments/trips and /control
    "pitfall.expandable-segments-with-kv-connector": (
        "0.27.1",
        f"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True vllm serve {M} --kv-offloading-size 4",
        f"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True vllm serve {M} --kv-offloading-size 4 "
        "--enable-cumem-allocator",
        {},
    ),
    # recorded: rules-0.27.1.json, kv-role-missing/trips and /control
    "pitfall.kv-role-missing": (
        "0.27.1",
        f"vllm serve {M} --kv-transfer-config " + """'{"kv_connector":"NixlConnector"}'""",
        f"vllm serve {M} --kv-transfer-config " + """'{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'""",
        {},
    ),
    # recorded: rules-0.27.1.json, bf16-pre-ampere/trips and /control (a T4 stand-in)
    "pitfall.bf16-on-pre-ampere-gpu": (
        "0.27.1",
        f"vllm serve {M} --dtype bfloat16",
        f"vllm serve {M} --dtype half",
        {"host": {"gpu": "T4"}},
    ),
    "pitfall.memory-limit-below-server": (
        "0.33.0",
        f"docker run --gpus 1 --memory 2g {IMAGE} --model {M}",
        f"docker run --gpus 1 --memory 32g {IMAGE} --model {M}",
        {},
    ),
    # weights offload is not KV offload
    "pitfall.cpu-offload-gb-is-weights": ("0.33.0", f"vllm serve {M} --cpu-offload-gb 10", f"vllm serve {M}", {}),
    # 100 GiB over TP 8 = 12.5 GiB a rank, less than one H100's 80 GB (74.5 GiB); 800 / 8 = 100 GiB is not
    "pitfall.kv-offloading-size-per-rank": (
        "0.33.0",
        f"vllm serve {M} -tp 8 --kv-offloading-size 100",
        f"vllm serve {M} -tp 8 --kv-offloading-size 800",
        {"host": {"gpu": "H100 SXM"}},
    ),
    # 0.22.0+: OffloadingConnector supports HMA, so forcing it off costs hybrid models (Llama has nothing to lose)
    "pitfall.hma-flag-with-hma-connector": (
        "0.22.0",
        "vllm serve openai/gpt-oss-20b --kv-offloading-size 100 --disable-hybrid-kv-cache-manager",
        f"vllm serve {M} --kv-offloading-size 100 --disable-hybrid-kv-cache-manager",
        {},
    ),
    # 0.20.2: OffloadingConnector has no HMA support and the shorthand needs the flag
    "pitfall.hma-flag-missing-with-shorthand": (
        "0.20.2",
        f"vllm serve {M} --kv-offloading-backend native --kv-offloading-size 100",
        f"vllm serve {M} --kv-offloading-backend native --kv-offloading-size 100 --disable-hybrid-kv-cache-manager",
        {},
    ),
    "pitfall.lmcache-v1-hybrid-model": (
        "0.33.0",
        f"vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct {LMCACHE_V1}",
        f"vllm serve google/gemma-3-27b-it {LMCACHE_V1}",
        {},
    ),
    "pitfall.lmcache-v1-sliding-window-model": (
        "0.33.0",
        f"vllm serve google/gemma-3-27b-it {LMCACHE_V1} --disable-hybrid-kv-cache-manager",
        f"vllm serve {M} {LMCACHE_V1}",
        {},
    ),
    # 0.23.0: the lmcache backend means LMCacheMPConnector (a separate server); 0.22.1 still in-process
    "pitfall.lmcache-backend-means-mp-server": (
        "0.23.0",
        f"vllm serve {M} --kv-offloading-backend lmcache --kv-offloading-size 50",
        f"vllm serve {M} --kv-offloading-backend native --kv-offloading-size 50",
        {},
    ),
    "pitfall.native-backend-before-0.14": (
        "0.13.0",
        f"vllm serve {M} --kv-offloading-backend native --kv-offloading-size 10 --disable-hybrid-kv-cache-manager",
        f"vllm serve {M} --kv-offloading-size 10",  # no backend: the shorthand is off before 0.14.0
        {},
    ),
    # SimpleCPUOffloadConnector (the native shorthand with VLLM_USE_SIMPLE_KV_OFFLOAD) turns itself off
    # without prefix caching; OffloadingConnector (the shorthand without the variable) keeps offloading
    "pitfall.prefix-caching-disabled": (
        "0.33.0",
        f"VLLM_USE_SIMPLE_KV_OFFLOAD=1 vllm serve {M} --kv-offloading-size 100 --no-enable-prefix-caching",
        f"vllm serve {M} --kv-offloading-size 100 --no-enable-prefix-caching",
        {},
    ),
    # no connector: nothing hashes the blocks, so shared prefixes are prefilled again
    "pitfall.prefix-caching-off-without-connector": (
        "0.33.0",
        f"vllm serve {M} --no-enable-prefix-caching",
        f"vllm serve {M} --kv-offloading-size 100 --no-enable-prefix-caching",
        {},
    ),
    # 0.33.0 registers fs, not the 0.22.x name fs_python
    "pitfall.tier-type-not-registered": (
        "0.33.0",
        f"vllm serve {M} {TIERING_FS_PYTHON}",
        f"vllm serve {M} {TIERING_FS}",
        {},
    ),
    # TP 4 on the two GPUs CUDA_VISIBLE_DEVICES leaves
    # 3 GPUs held for a server of TP 1; TP 2 x 2 data-parallel engines use all 4 of theirs
    "pitfall.gpus-given-unused": (
        "0.33.0",
        f"docker run --gpus 3 {IMAGE} --model {M}",
        f"docker run --gpus 4 {IMAGE} --model {M} -tp 2 --data-parallel-size 2",
        {},
    ),
    "pitfall.world-size-over-visible-gpus": (
        "0.33.0",
        f"CUDA_VISIBLE_DEVICES=0,1 vllm serve {M} -tp 4",
        f"CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve {M} -tp 4",
        {},
    ),
    # a shared LMCache remote without one hash seed
    "pitfall.lmcache-sharing-without-hash-seed": (
        "0.33.0",
        f"LMCACHE_REMOTE_URL=lm://cache:65432 vllm serve {M} {LMCACHE_V1}",
        f"PYTHONHASHSEED=0 LMCACHE_REMOTE_URL=lm://cache:65432 vllm serve {M} {LMCACHE_V1}",
        {},
    ),
    # the redis-lookup P2P key LMCache stopped reading in 0.3.7
    "pitfall.lmcache-legacy-lookup-keys": (
        "0.33.0",
        f"LMCACHE_LOOKUP_URL=redis:6379 vllm serve {M} {LMCACHE_V1}",
        f"LMCACHE_ENABLE_P2P=True vllm serve {M} {LMCACHE_V1}",
        {},
    ),
    "pitfall.fp8-kv-without-scales": (
        "0.33.0",
        f"vllm serve {M} --kv-cache-dtype fp8",
        "vllm serve nvidia/Llama-3.1-8B-Instruct-FP8 --kv-cache-dtype fp8",
        {},
    ),
    "pitfall.p2p-nccl-removed": (
        "0.24.0",
        f"""vllm serve {M} --kv-transfer-config '{{"kv_connector":"P2pNcclConnector","kv_role":"kv_producer"}}'""",
        f"vllm serve {M} {NIXL}",
        {},
    ),
    "pitfall.tiering-store-threshold": (
        "0.22.0",
        f"vllm serve {M} " + TIERING_FS.replace('"cpu_bytes_to_use"', '"store_threshold":2,"cpu_bytes_to_use"'),
        f"vllm serve {M} {TIERING_FS}",
        {},
    ),
    "pitfall.shared-tier-without-hash-seed": (
        "0.25.0",
        f"vllm serve {M} {TIERING_FS}",
        f"PYTHONHASHSEED=0 vllm serve {M} {TIERING_FS}",
        {},
    ),
    # 0.22.1 passes 100 / 2 = 50 GiB a rank to LMCache, overriding the 40 in the environment
    "pitfall.lmcache-cpu-size-mismatch": (
        "0.22.1",
        f"LMCACHE_MAX_LOCAL_CPU_SIZE=40 vllm serve {M} -tp 2 --kv-offloading-backend lmcache --kv-offloading-size 100",
        f"LMCACHE_MAX_LOCAL_CPU_SIZE=50 vllm serve {M} -tp 2 --kv-offloading-backend lmcache --kv-offloading-size 100",
        {},
    ),
    "pitfall.lmcache-p2p-incomplete": (
        "0.33.0",
        f"LMCACHE_ENABLE_P2P=True LMCACHE_TRANSFER_CHANNEL=nixl vllm serve {M} {LMCACHE_V1}",
        f"{P2P_ALL} vllm serve {M} {LMCACHE_V1}",
        {},
    ),
    "pitfall.lmcache-local-cpu-false": (
        "0.33.0",
        f"LMCACHE_LOCAL_CPU=False vllm serve {M} {LMCACHE_V1}",
        f"LMCACHE_LOCAL_CPU=True vllm serve {M} {LMCACHE_V1}",
        {},
    ),
    "pitfall.nixl-ucx-without-cuda": (
        "0.33.0",
        f"UCX_TLS=tcp vllm serve {M} {NIXL}",
        f"UCX_TLS=cuda_copy,sm,tcp vllm serve {M} {NIXL}",
        {},
    ),
    # From 0.16.0 MooncakeConnector needs the Mooncake proxy; NIXL's toy proxy never sends transfer_id.
    "pitfall.pd-proxy-mismatch": (
        "0.33.0",
        f"python3 /opt/proxy/toy_proxy_server.py --port 8192 ; vllm serve {M} {MOONCAKE}",
        f"python3 /opt/proxy/mooncake_connector_proxy.py --port 8192 ; vllm serve {M} {MOONCAKE}",
        {},
    ),
    "pitfall.nixl-side-channel-service-address": (
        "0.33.0",
        f"VLLM_NIXL_SIDE_CHANNEL_HOST=vllm-prefill.default.svc.cluster.local vllm serve {M} {NIXL}",
        f"VLLM_NIXL_SIDE_CHANNEL_HOST=10.42.0.17 vllm serve {M} {NIXL}",
        {},
    ),
    "pitfall.enforce-eager-on-datacenter-gpu": (
        "0.33.0",
        f"vllm serve {M} --enforce-eager",
        f"vllm serve {M}",
        {"host": {"gpu": "H200"}},
    ),
    # p99 16 000 tokens x 4 = 64 000; 128k = 128 000 (decimal k) is above, 32768 is not
    "pitfall.max-model-len-far-above-workload": (
        "0.33.0",
        f"vllm serve {M} --max-model-len 128k",
        f"vllm serve {M} --max-model-len 32768",
        {"p99_context_tokens": 16000},
    ),
    # 80 % of 256 GiB = 204.8 GiB; a 400 GiB tier does not fit, 150 GiB does
    "pitfall.offload-exceeds-host-ram": (
        "0.33.0",
        f"vllm serve {M} --kv-offloading-size 400",
        f"vllm serve {M} --kv-offloading-size 150",
        {"host": {"ram_gib": 256}},
    ),
    # 100 GiB x 1.1 + 4 GiB = 114 GiB pinned: over a 64g limit (Docker's g is GiB), within 128g
    "pitfall.pinned-memory-over-pod-limit": (
        "0.33.0",
        f"docker run --ipc=host --memory 64g vllm/vllm-openai:v0.33.0 --model {M} --kv-offloading-size 100",
        f"docker run --ipc=host --memory 128g vllm/vllm-openai:v0.33.0 --model {M} --kv-offloading-size 100",
        {},
    ),
    # from 0.28.0 the tier's /dev/shm file is checked at start-up; Docker's default /dev/shm is 64 MiB
    "pitfall.offload-tier-over-shm": (
        "0.28.0",
        f"docker run vllm/vllm-openai:v0.28.0 --model {M} --kv-offloading-size 100",
        f"docker run --shm-size 101g vllm/vllm-openai:v0.28.0 --model {M} --kv-offloading-size 100",
        {},
    ),
    "pitfall.offload-tier-over-shm-unchecked": (
        "0.27.1",
        f"docker run vllm/vllm-openai:v0.27.1 --model {M} --kv-offloading-size 100",
        f"docker run --ipc=host vllm/vllm-openai:v0.27.1 --model {M} --kv-offloading-size 100",
        {},
    ),
    # TP 2: 10 x (16 + 2 x 24) MiB = 640 MiB of message queues, more than 64 MiB
    "pitfall.shm-too-small-for-workers": (
        "0.33.0",
        f"docker run vllm/vllm-openai:v0.33.0 --model {M} -tp 2",
        f"docker run --shm-size 1g vllm/vllm-openai:v0.33.0 --model {M} -tp 2",
        {},
    ),
    # a producer alone stores into its own CPU cache; a remote store both sides reach carries the KV
    "pitfall.lmcache-pd-without-shared-backend": (
        "0.33.0",
        f"vllm serve {M} {LMCACHE_PRODUCER}",
        f"LMCACHE_REMOTE_URL=lm://cache:8100 vllm serve {M} {LMCACHE_PRODUCER}",
        {},
    ),
    # 0.33.x shows its hidden metrics for "0.32" only
    "pitfall.hidden-metrics-version-mismatch": (
        "0.33.0",
        f"vllm serve {M} --show-hidden-metrics-for-version 0.10",
        f"vllm serve {M} --show-hidden-metrics-for-version 0.32",
        {},
    ),
    # the same queues before 0.27.0, which creates them unchecked (sparse) and fails later, with SIGBUS
    "pitfall.shm-small-for-workers-unchecked": (
        "0.22.1",
        f"docker run vllm/vllm-openai:v0.22.1 --model {M} -tp 2",
        f"docker run --shm-size 1g vllm/vllm-openai:v0.22.1 --model {M} -tp 2",
        {},
    ),
    "pitfall.lmcache-async-loading-with-disk": (
        "0.33.0",
        f"LMCACHE_ENABLE_ASYNC_LOADING=True LMCACHE_LOCAL_DISK=file:///nvme/ vllm serve {M} {LMCACHE_V1}",
        f"LMCACHE_ENABLE_ASYNC_LOADING=True vllm serve {M} {LMCACHE_V1}",
        {},
    ),
    "pitfall.calculate-kv-scales-removed": (
        "0.28.0",
        f"vllm serve {M} --kv-cache-dtype fp8 --calculate-kv-scales",
        f"vllm serve {M} --kv-cache-dtype auto",
        {},
    ),
    "pitfall.calculate-kv-scales-deprecated": (
        "0.19.0",
        f"vllm serve {M} --kv-cache-dtype fp8 --calculate-kv-scales",
        f"vllm serve {M} --kv-cache-dtype fp8 --no-calculate-kv-scales",
        {},
    ),
    # --swap-space is gone from 0.18.0
    "pitfall.flag-not-in-release": ("0.18.0", f"vllm serve {M} --swap-space 4", f"vllm serve {M}", {}),
    "pitfall.connector-not-in-release": (
        "0.13.0",
        f"""vllm serve {M} --kv-transfer-config '{{"kv_connector":"SharedStorageConnector","kv_role":"kv_both"}}'""",
        f"vllm serve {M} {NIXL}",
        {},
    ),
    # prefix_caching_hash_algo's Literal is argparse's choices: 'builtin' is not one
    "pitfall.option-value-refused": (
        "0.33.0",
        f"vllm serve {M} --prefix-caching-hash-algo builtin --enable-prefix-caching",
        f"vllm serve {M} --prefix-caching-hash-algo xxhash --enable-prefix-caching",
        {},
    ),
    # an empty variable, unquoted, leaves --max-model-len with no word after it: argparse stops
    "pitfall.option-value-empty": (
        "0.33.0",
        f'MAX_LEN=""; vllm serve {M} --max-model-len $MAX_LEN --enforce-eager',
        f"MAX_LEN=8192; vllm serve {M} --max-model-len $MAX_LEN --enforce-eager",
        {},
    ),
    # kv_buffer_size left KVTransferConfig in 0.32.0, whose fields are closed from 0.16.0
    "pitfall.transfer-config-field-refused": (
        "0.33.0",
        f"vllm serve {M} " + _nixl(kv_buffer_size=5e9),
        f"vllm serve {M} " + _nixl(),
        {},
    ),
    # LMCache reads chunk_size as LMCACHE_CHUNK_SIZE; no code of it spells LMCACHE_CHUNKSIZE
    "pitfall.lmcache-key-ignored": (
        "0.33.0",
        f"LMCACHE_CHUNKSIZE=256 vllm serve {M} {LMCACHE_V1}",
        f"LMCACHE_CHUNK_SIZE=256 vllm serve {M} {LMCACHE_V1}",
        {},
    ),
    # LMCache stopped reading LMCACHE_USE_EXPERIMENTAL in 0.3.12; True was its default until then
    "pitfall.lmcache-leftover-default": (
        "0.33.0",
        f"LMCACHE_USE_EXPERIMENTAL=True vllm serve {M} {LMCACHE_V1}",
        f"LMCACHE_USE_EXPERIMENTAL=False vllm serve {M} {LMCACHE_V1}",
        {},
    ),
    # NixlConnector reads no eviction_policy: OffloadingConnector's key does nothing there
    "pitfall.transfer-config-key-ignored": (
        "0.33.0",
        f"vllm serve {M} " + _nixl(kv_connector_extra_config={"eviction_policy": "lru"}),
        f"vllm serve {M} " + _nixl(kv_connector_extra_config={"backends": ["UCX"]}),
        {},
    ),
    # a key written into the command line (not a placeholder, not a variable the environment fills in)
    "pitfall.secret-in-plain-text": (
        "0.33.0",
        f"vllm serve {M} --api-key sk-proj-Zq8rT2vXk4LmN7pQ9sW1",
        f'vllm serve {M} --api-key "$VLLM_API_KEY"',
        {},
    ),
    # an unpinned package installed before the server starts; pinned with == it is not
    "pitfall.install-at-start": (
        "0.33.0",
        f"pip install 'lmcache>=0.3' && vllm serve {M}",
        f"pip install lmcache==0.3.9 && vllm serve {M}",
        {},
    ),
    # no tag names the release: --disable-log-requests is refused by 0.17.0 - 0.32.0, accepted by 0.33.0
    # a build whose image names no vLLM: its option may be its fork's own; on a vLLM image it is an error
    "pitfall.unknown-flag-vendor-build": (
        None,
        f"docker run --entrypoint vllm acme/gaudi-runtime:1.20.0 serve {M} --device hpu",
        f"docker run --entrypoint vllm acme/gaudi-runtime:1.20.0 serve {M} --max-num-seqs 8",
        {},
    ),
    "pitfall.flag-depends-on-release": (
        None,
        f"vllm serve {M} --disable-log-requests",
        f"vllm serve {M} --enable-log-requests",
        {},
    ),
    # a clean-up that kills by a name every Python program has, against one that kills the servers by theirs
    "pitfall.kill-by-name": (
        "0.33.0",
        f"pkill -f python; vllm serve {M}",
        f"pkill -f 'vllm serve'; vllm serve {M}",
        {},
    ),
    # the dashboard, and its job API, on every interface of a bare host; with token authentication it asks
    "pitfall.ray-dashboard-exposed": (
        "0.33.0",
        f"ray start --head --dashboard-host 0.0.0.0; vllm serve {M} -tp 2 --distributed-executor-backend ray",
        f"RAY_AUTH_MODE=token ray start --head --dashboard-host=0.0.0.0; vllm serve {M} -tp 2 "
        "--distributed-executor-backend ray",
        {},
    ),
    # $(PORT) runs a command called PORT; ${PORT} is the variable the script set
    "pitfall.variable-run-as-command": (
        "0.33.0",
        f"PORT=8000; lsof -t -i:$(PORT) | xargs -r kill; vllm serve {M} --port 8000",
        f"PORT=8000; lsof -t -i:${{PORT}} | xargs -r kill; vllm serve {M} --port 8000",
        {},
    ),
    # unquoted, `>=0.3` is a redirection of pip's output; quoted it is a version bound
    "pitfall.install-pin-redirected": (
        "0.33.0",
        f"pip install lmcache>=0.3 && vllm serve {M}",
        f"pip install 'lmcache>=0.3' && vllm serve {M}",
        {},
    ),
    # :latest moves with every push; a release tag does not
    "pitfall.floating-image-tag": (
        "0.33.0",
        f"docker run --gpus all vllm/vllm-openai:latest --model {M}",
        f"docker run --gpus all vllm/vllm-openai:v0.33.0 --model {M}",
        {},
    ),
}
# Checked against a small fake CLI inventory in test_unknown_flag_suggests_the_closest_option.
# A memory request is only written in a manifest: test_pinned_memory_against_the_pod_request_and_limit.
# Only compose and Kubernetes give `bash -c` its words one by one: test_a_server_that_never_starts_is_an_error.
# An LMCache server (in another pod than vLLM, or alone) is read from manifests: tests/test_review_graph.py.
SEPARATELY_TESTED = {
    "pitfall.ingress-backend-missing",  # tests/test_review_graph.py: manifests, not a command line
    "pitfall.systemd-restart-ignored",  # tests/test_read_systemd.py: a unit file, not a command line
    "pitfall.lmcache-server-unreachable",
    "pitfall.lmcache-server-keeps-every-chunk",
    "pitfall.lmcache-server-option-unknown",
    "pitfall.unknown-flag",
    "pitfall.pinned-memory-over-pod-request",
    "pitfall.server-does-not-start",
    "pitfall.lmcache-value-refused",  # a config file's value: test_an_lmcache_value_its_converter_refuses
    # Kubernetes objects only (env values, keys, probes, claims): tests/test_review_hygiene.py
    "pitfall.env-value-not-expanded",
    "pitfall.duplicate-yaml-key",
    "pitfall.liveness-probe-kills-model-load",
    "pitfall.probe-fails-on-one-miss",
    "pitfall.rwo-volume-shared-by-replicas",
    "pitfall.compose-services-collide",  # compose files: tests/test_review_hygiene.py
    "pitfall.secret-data-not-base64",  # a Secret object: tests/test_review_hygiene.py
    # the release must come from the pip install itself: test_a_pip_installed_release_that_breaks_the_model_class
    "pitfall.install-breaks-model-class",
    "pitfall.api-exposed-without-key",  # a Service beside the server: tests/test_review_graph.py
    # the volume the LMCache disk tier is written to: tests/test_review_volumes.py
    "pitfall.lmcache-disk-tier-over-volume",
    "pitfall.lmcache-disk-tier-in-memory",
    "pitfall.lmcache-disk-tier-on-container-layer",
    "pitfall.lmcache-disk-tier-unbounded-emptydir",
}


def fired(result: ReviewResult) -> set[str]:
    return {f.rule_id for f in result.findings}


def test_every_rule_has_a_passing_and_a_failing_example(knowledge: Knowledge) -> None:
    rule_ids = {r.id for r in list_rules(knowledge)}
    assert rule_ids == set(RULE_CASES) | SEPARATELY_TESTED
    assert len(rule_ids) == 103


@pytest.mark.parametrize("rule_id", sorted(RULE_CASES))
def test_rule_fires_on_the_failing_example_only(knowledge: Knowledge, rule_id: str) -> None:
    version, failing, passing, extra = RULE_CASES[rule_id]
    bad = review(failing, version=version, **extra)
    assert rule_id in fired(bad), bad.summary()
    good = review(passing, version=version, **extra)
    assert rule_id not in fired(good), good.summary()
    finding = next(f for f in bad.findings if f.rule_id == rule_id)
    assert finding.location.file == "serve0.sh" and finding.location.line == 1
    assert finding.sources and finding.fix


def _pd_compose(tag: str, proxy_script: str) -> str:
    def engine(role: str) -> str:
        config = json.dumps({"kv_connector": "MooncakeConnector", "kv_role": role})
        return f"    image: vllm/vllm-openai:{tag}\n    command: [--model, {M}, --kv-transfer-config, '{config}']\n"

    return (
        f"services:\n  prefill:\n{engine('kv_producer')}  decode:\n{engine('kv_consumer')}"
        f"  proxy:\n    image: vllm/vllm-openai:{tag}\n"
        "    # toy_proxy_server.py and mooncake_connector_proxy.py, named in a comment, are not run\n"
        f"    entrypoint: [python3, /opt/proxy/{proxy_script}, --port, '8192']\n"
    )


@pytest.mark.parametrize(
    ("tag", "proxy_script", "wrong"),
    [
        ("v0.15.1", "toy_proxy_server.py", False),  # through 0.15.1 the connector reads remote_host/remote_port
        ("v0.15.1", "mooncake_connector_proxy.py", True),
        ("v0.16.0", "toy_proxy_server.py", True),
        ("v0.16.0", "mooncake_connector_proxy.py", False),
    ],
)
def test_the_pd_proxy_is_judged_by_the_connector_and_release(
    knowledge: Knowledge, tag: str, proxy_script: str, wrong: bool
) -> None:
    doc = Document(name="compose.yaml", text=_pd_compose(tag, proxy_script))
    result = review_deployment(ReviewRequest(detail="full", documents=[doc]), knowledge)
    found = [f for f in result.findings if f.rule_id == "pitfall.pd-proxy-mismatch"]
    if not wrong:
        assert found == [], result.summary()
        return
    # Both roles share the one proxy: one finding, at the proxy's line, naming both workloads.
    [finding] = found
    assert (finding.location.file, finding.location.line) == ("compose.yaml", 11)
    assert finding.workload == "service prefill, service decode"
    assert f"{proxy_script} routes the requests" in finding.message


def test_version_gate_keeps_a_rule_quiet_outside_its_releases(knowledge: Knowledge) -> None:
    # The lmcache backend only means the separate LMCache server from 0.23.0.
    cmd = f"vllm serve {M} --kv-offloading-backend lmcache --kv-offloading-size 50"
    assert "pitfall.lmcache-backend-means-mp-server" not in fired(review(cmd, version="0.22.1"))
    # OffloadingConnector supports HMA from 0.21.0: the shorthand no longer needs the flag there.
    native = f"vllm serve {M} --kv-offloading-backend native --kv-offloading-size 100"
    assert "pitfall.hma-flag-missing-with-shorthand" not in fired(review(native, version="0.21.0"))


def test_rules_that_need_an_input_say_which(knowledge: Knowledge) -> None:
    result = review(f"vllm serve {M} --kv-offloading-size 400 --enforce-eager", version="0.33.0")
    needs = {n.rule_id: n.needs for n in result.not_checked}
    assert needs["pitfall.offload-exceeds-host-ram"] == ["host.ram_gib"]
    assert needs["pitfall.enforce-eager-on-datacenter-gpu"] == ["host.gpu (or a nvidia.com/gpu.product node selector)"]
    # No --max-model-len in the command: nothing to compare, so the rule is simply quiet.
    assert "pitfall.max-model-len-far-above-workload" not in needs


def test_hash_seed_must_agree_across_instances(knowledge: Knowledge) -> None:
    a = f"PYTHONHASHSEED=0 vllm serve {M} {TIERING_FS}"
    b = f"PYTHONHASHSEED=1 vllm serve {M} {TIERING_FS}"
    result = review(a, b, version="0.25.0")
    assert [f.workload for f in result.findings if f.rule_id == "pitfall.shared-tier-without-hash-seed"] == [
        "vllm #1",
        "vllm #1",
    ]
    assert "differs between workloads" in result.findings[0].message
    assert "pitfall.shared-tier-without-hash-seed" not in fired(review(a, a, version="0.25.0"))


def test_unknown_flag_suggests_the_closest_option(knowledge_copy: Path) -> None:
    # A small inventory stands in for knowledge/cli_inventory.yaml, which another change fills.
    inventory = {
        "sources": ["pypi:vllm"],
        "verified_at": "2026-11-30",
        "flags": [
            {"flag": "--kv-offloading-size", "introduced": "0.11.1"},
            {"flag": "--tensor-parallel-size"},
            {"flag": "--enable-prefix-caching", "takes_value": False},
            {"flag": "--swap-space", "removed": "0.18.0"},
        ],
    }
    (knowledge_copy / "cli_inventory.yaml").write_text(yaml.safe_dump(inventory))
    k = load_knowledge(str(knowledge_copy))
    cmd = f"vllm serve {M} --kv-ofloading-size 10 --tensor_parallel_size 2 --no-enable-prefix-caching --swap-space 4"
    result = review(cmd, version="0.22.1", knowledge=k)
    unknown = [f for f in result.findings if f.rule_id == "pitfall.unknown-flag"]
    # --tensor_parallel_size (underscores) and --no-enable-prefix-caching are accepted; --swap-space is
    # reported by pitfall.flag-not-in-release with its removal release instead.
    assert [f.message for f in unknown] == [
        "An option `vllm serve` does not accept in this release: --kv-ofloading-size is not an option of "
        "vLLM 0.22.1; did you mean --kv-offloading-size?"
    ]
    assert "pitfall.flag-not-in-release" in fired(result)
    # Without inventory data the rule is reported as not checked, never as a finding.
    bare = knowledge_copy.parent / "bare-knowledge"
    shutil.copytree(knowledge_copy, bare)
    (bare / "cli_inventory.yaml").write_text(yaml.safe_dump({**inventory, "flags": []}))
    empty = review(cmd, version="0.22.1", knowledge=load_knowledge(str(bare)))
    assert any(n.rule_id == "pitfall.unknown-flag" for n in empty.not_checked)
    assert "pitfall.unknown-flag" not in fired(empty)


def test_disabled_rules_are_skipped_and_unknown_ids_rejected(knowledge: Knowledge) -> None:
    cmd = f"vllm serve {M} --cpu-offload-gb 10"
    result = review(cmd, disabled_rules=["pitfall.cpu-offload-gb-is-weights"])
    assert "pitfall.cpu-offload-gb-is-weights" not in fired(result)
    with pytest.raises(ToolInputError, match=r"^disabled_rules: .*Did you mean pitfall.cpu-offload-gb-is-weights"):
        review(cmd, disabled_rules=["pitfall.cpu-offload-gb"])


def test_bad_input_names_the_field(knowledge: Knowledge) -> None:
    with pytest.raises(ToolInputError, match=r"^documents: no vLLM server found"):
        review("echo hello")
    with pytest.raises(AdviceError, match=r"^documents\[0\]\.text: "):
        review_deployment(ReviewRequest(detail="full", documents=[Document(name="x.yaml", text="a: [b")]), knowledge)
    with pytest.raises(ToolInputError, match=r"^version: "):
        review(f"vllm serve {M}", version="latest")
    with pytest.raises(ToolInputError, match=r"^host\.gpu: 'TPU v5' is not a GPU"):
        review(f"vllm serve {M}", host={"gpu": "TPU v5"})


# ------------------------------------------------------------------------------------ parsing


def test_flags_with_equals_space_negation_dotted_json_and_env(knowledge: Knowledge) -> None:
    text = (
        "export PYTHONHASHSEED=0\n"
        "VLLM_USE_SIMPLE_KV_OFFLOAD=1 vllm serve Qwen/Qwen3-8B \\\n"
        "  --max_model_len=32k --no-enable-prefix-caching \\\n"
        "  --kv-transfer-config.kv_connector OffloadingConnector\n"
    )
    deployment = parse_documents([Document(name="run.sh", text=text)], knowledge)
    (w,) = deployment.workloads
    assert w.model == "Qwen/Qwen3-8B"
    assert [(f.name, f.value, f.location.line) for f in w.flags] == [
        ("--max-model-len", "32k", 3),
        ("--no-enable-prefix-caching", True, 3),
        ("--kv-transfer-config.kv_connector", "OffloadingConnector", 4),
    ]
    assert [(e.name, e.value) for e in w.env] == [("PYTHONHASHSEED", "0"), ("VLLM_USE_SIMPLE_KV_OFFLOAD", "1")]
    result = review(text, version="0.33.0")
    assert result.workloads[0].connectors == ["OffloadingConnector"]
    assert result.workloads[0].facts["max_model_len"] == 32_000  # k is decimal in vLLM's parser


def test_native_shorthand_picks_the_simple_connector_when_the_env_says_so(knowledge: Knowledge) -> None:
    cmd = f"vllm serve {M} --kv-offloading-size 100"
    assert review(cmd, version="0.33.0").workloads[0].connectors == ["OffloadingConnector"]
    simple = review("VLLM_USE_SIMPLE_KV_OFFLOAD=1 " + cmd, version="0.33.0")
    assert simple.workloads[0].connectors == ["SimpleCPUOffloadConnector"]
    assert review("VLLM_USE_SIMPLE_KV_OFFLOAD=1 " + cmd, version="0.18.1").workloads[0].connectors == [
        "OffloadingConnector"
    ]


def test_shell_tokens_keep_their_lines() -> None:
    tokens = tokenize_shell('a \'b c\' \\\n  "d\\"e" # note\nf')
    assert [(t.text, t.line, t.separator) for t in tokens] == [
        ("a", 1, False),
        ("b c", 1, False),
        ('d"e', 2, False),
        ("\n", 2, True),
        ("f", 3, False),
    ]


def test_image_tag_decides_the_version_and_says_so(knowledge: Knowledge) -> None:
    cmd = "docker run --gpus all vllm/vllm-openai:v0.22.1-cu130 --model m --kv-offloading-size 10"
    result = review(cmd, version="0.30.0")
    w = result.workloads[0]
    assert (w.vllm_version, w.version_source) == ("0.22.1", "image-tag")
    assert any("image tag says vLLM 0.22.1, not the stated 0.30.0" in n for n in result.notes)
    other = review("docker run lmcache/vllm-openai:v0.3.9 --model m")
    assert (other.workloads[0].vllm_version, other.workloads[0].version_source) == ("0.34.0", "assumed-newest")


# ------------------------------------------------------------------- real-looking manifests


# The files of tests/data/deployments/ this module reviews (tests/test_corpus.py reviews them all, with
# their expectations beside them).
REVIEWED_HERE = (
    "api-server-fp8.sh",
    "docker-compose.yaml",
    "docker-run-lmcache.sh",
    "k8s-nixl-pd.yaml",
    "lmcache-config.yaml",
    "lws-lmcache-p2p.yaml",
    "production-stack-values.yaml",
    "serve-llama70b-h100.sh",
    "tiered-fs-deployment.yaml",
)


def data_file(name: str) -> tuple[str, str]:
    return name, (DATA / name).read_text()


def brief(result: ReviewResult) -> list[tuple[str, int | None, str | None]]:
    """The configuration findings; security advisories (rule ids advisory.*) are tested in test_security_floor.py."""
    return [(f.rule_id, f.location.line, f.location.path) for f in result.findings if not is_advisory(f.rule_id)]


def is_advisory(rule_id: str) -> bool:
    return rule_id.startswith("advisory.")


def test_vllm_serve_script_on_0_20_2(knowledge: Knowledge) -> None:
    result = review(data_file("serve-llama70b-h100.sh"), version="0.20.2", host={"ram_gib": 256, "gpu": "H100 SXM"})
    # 400 GiB native tier > 0.8 x 256 = 204.8 GiB; 0.20.2 shorthand without the HMA flag fails at start-up.
    # 400 / TP 4 = 100 GiB a rank is more than one H100's 74.5 GiB, so no per-rank warning.
    assert brief(result) == [
        ("pitfall.hma-flag-missing-with-shorthand", 12, None),
        ("pitfall.offload-exceeds-host-ram", 12, None),
    ]


def test_api_server_module_on_0_28(knowledge: Knowledge) -> None:
    result = review(data_file("api-server-fp8.sh"), version="0.28.0", host={"ram_gib": 1024})
    # --cpu-offload-gb 80 per GPU x TP 8 = 640 GiB pinned, within 0.8 x 1024 = 819.2 GiB.
    assert brief(result) == [
        ("pitfall.calculate-kv-scales-removed", 7, None),
        ("pitfall.cpu-offload-gb-is-weights", 8, None),
    ]
    assert result.workloads[0].facts["host_offload_gib"] == 640


def test_docker_run_with_lmcache_backend(knowledge: Knowledge) -> None:
    result = review(data_file("docker-run-lmcache.sh"))
    assert result.workloads[0].vllm_version == "0.21.0"
    assert result.workloads[0].env_by_reference == ["HF_TOKEN"]
    # 20 GiB x TP 2 = 40 GiB in the environment against 80 GiB on the flag; Qwen3-Next is hybrid.
    assert brief(result) == [
        ("pitfall.lmcache-v1-hybrid-model", 10, None),
        ("pitfall.lmcache-cpu-size-mismatch", 5, None),
        ("pitfall.lmcache-cpu-size-per-rank", 5, None),  # 20 GiB pinned by each of the two workers
    ]
    assert not any("No vLLM version was given" in w for w in result.version_context.warnings)


def test_docker_compose_with_a_removed_connector(knowledge: Knowledge) -> None:
    result = review(data_file("docker-compose.yaml"))
    assert [w.name for w in result.workloads] == ["service vllm-prefill"]
    assert brief(result) == [("pitfall.p2p-nccl-removed", 12, "services.vllm-prefill.command[5]")]


def test_kubernetes_nixl_prefill_decode(knowledge: Knowledge) -> None:
    result = review(data_file("k8s-nixl-pd.yaml"))
    assert [w.gpu for w in result.workloads] == ["gpu.h100-sxm", "gpu.h100-sxm"]
    # TP 4 on 0.27.0 in pods that mount no /dev/shm: the workers' queues do not fit its 64 MiB (found at
    # the container, where a /dev/shm volume would be mounted). The decode pod requests no GPU. The
    # headless Service's port 5600 is the NIXL side channel the prefill engine binds, not a mismatch.
    assert brief(result) == [
        ("pitfall.shm-too-small-for-workers", 29, "spec.template.spec.containers[0]"),
        ("pitfall.nixl-ucx-without-cuda", 39, "spec.template.spec.containers[0].env[0]"),
        ("pitfall.nixl-side-channel-service-address", 41, "spec.template.spec.containers[0].env[1]"),
        ("pitfall.shm-too-small-for-workers", 65, "spec.template.spec.containers[0]"),
        ("pitfall.enforce-eager-on-datacenter-gpu", 35, "spec.template.spec.containers[0].args[3]"),
        ("pitfall.no-gpu-requested", 65, "spec.template.spec.containers[0]"),
    ]
    # The decode pod takes the side-channel host from the downward API: unknown, so not checked.
    assert [(n.rule_id, n.workload) for n in result.not_checked if not is_advisory(n.rule_id)] == [
        ("pitfall.nixl-side-channel-service-address", "Deployment/vllm-decode container vllm")
    ]


def test_leaderworkerset_with_lmcache_config_map(knowledge: Knowledge) -> None:
    result = review(data_file("lws-lmcache-p2p.yaml"), host={"ram_gib": 512})
    (w,) = result.workloads
    assert w.name == "LeaderWorkerSet/vllm-dsv3 leaderTemplate container vllm-leader"
    # LMCache 40 GiB a rank x TP 8 x PP 2 = 640 GiB over 2 hosts = 320 GiB a host <= 0.8 x 512 = 409.6.
    assert w.facts["host_offload_gib"] == 320
    assert brief(result) == [
        ("pitfall.lmcache-local-cpu-false", 9, "local_cpu"),
        ("pitfall.lmcache-p2p-incomplete", 11, "enable_p2p"),
        # the group's containers request no GPU
        ("pitfall.no-gpu-requested", 26, "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0]"),
        # multi-node-serving.sh starts Ray; with no --distributed-executor-backend 0.26.0 refuses TP 8 x PP 2
        ("pitfall.ray-cluster-without-ray-backend", 26, "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0]"),
        # v0.26.0, 8 ranks a pod on the default 64 MiB /dev/shm, which that release does not check
        ("pitfall.shm-small-for-workers-unchecked", 26, "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0]"),
        ("pitfall.lmcache-cpu-size-per-rank", 10, "max_local_cpu_size"),  # 40 GiB by each of 8 workers a host
    ]
    p2p = result.findings[1].message
    assert "LMCACHE_CONTROLLER_PULL_URL is not set" in p2p and "LMCACHE_TRANSFER_CHANNEL" not in p2p


def test_tiered_fs_deployment(knowledge: Knowledge) -> None:
    result = review(data_file("tiered-fs-deployment.yaml"))
    assert result.workloads[0].tiers == ["fs"]
    assert result.workloads[0].facts["offload_tier_gib"] == 200  # 214748364800 bytes / 2^30
    path = "spec.template.spec.containers[0].args[2]"
    assert brief(result) == [
        ("pitfall.tiering-store-threshold", 20, path),
        ("pitfall.no-gpu-requested", 15, "spec.template.spec.containers[0]"),  # no resources at all
        ("pitfall.shared-tier-without-hash-seed", 20, path),
        # TP 2 on v0.25.0 with the default 64 MiB /dev/shm: the queues are not checked before 0.27.0
        ("pitfall.shm-small-for-workers-unchecked", 26, "spec.template.spec.containers[0].volumeMounts"),
    ]


def test_production_stack_helm_values(knowledge: Knowledge) -> None:
    result = review(data_file("production-stack-values.yaml"))
    (w,) = result.workloads
    assert (w.model, w.vllm_version, w.connectors) == (
        "meta-llama/Llama-3.1-8B-Instruct",
        "0.19.1",
        ["LMCacheConnectorV1"],
    )
    # enablePrefixCaching: false with LMCacheConnectorV1 is no finding: the engine hashes blocks for any connector
    assert brief(result) == []


def test_lmcache_config_alone(knowledge: Knowledge) -> None:
    result = review(data_file("lmcache-config.yaml"))
    assert brief(result) == [
        ("pitfall.lmcache-local-cpu-false", 3, "local_cpu"),
        ("pitfall.lmcache-async-loading-with-disk", 7, "enable_async_loading"),
    ]


def test_an_lmcache_config_written_for_0_3_is_judged_by_the_lmcache_release_it_runs(knowledge: Knowledge) -> None:
    # enable_nixl / nixl_role / nixl_peer_host: keys up to 0.3.6; LMCache 0.5.6 drops them as unknown keys
    config = ("lmcache.yaml", "chunk_size: 256\nenable_nixl: true\nnixl_role: sender\nnixl_peer_host: 10.0.0.2\n")
    transfer = """--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_producer"}'"""
    served = (
        f"LMCACHE_CONFIG_FILE=/c/lmcache.yaml LMCACHE_LOG_LEVEL=DEBUG LMCACHE_CHUNKSIZE=1 vllm serve {M} {transfer}"
    )
    result = review(config, served)
    found = [f for f in result.findings if f.rule_id == "pitfall.lmcache-key-ignored"]
    assert [(f.location.file, f.location.path) for f in found] == [
        ("lmcache.yaml", "enable_nixl"),
        ("lmcache.yaml", "nixl_role"),
        ("lmcache.yaml", "nixl_peer_host"),
        ("serve1.sh", None),
    ], result.summary()
    assert all("assumed LMCache 0.5.6, the newest covered" in f.message for f in found)
    assert "use pd_role" in found[1].message and "Unknown configuration key: nixl_role" in found[1].message
    assert "LMCACHE_CHUNKSIZE" in found[3].message and found[3].severity == "warning"
    # a variable LMCache stopped reading, set to what it defaulted to: a leftover, at info
    leftover = review(f"LMCACHE_USE_EXPERIMENTAL=True vllm serve {M} {transfer}")
    (drop,) = [f for f in leftover.findings if f.rule_id == "pitfall.lmcache-leftover-default"]
    assert drop.severity == "info" and "pitfall.lmcache-key-ignored" not in fired(leftover)
    # no LMCache connector: a leftover LMCACHE_* variable is read by nothing and harmless
    plain = review(f"LMCACHE_USE_EXPERIMENTAL=True LMCACHE_CHUNKSIZE=1 vllm serve {M}")
    assert "pitfall.lmcache-key-ignored" not in fired(plain)
    # the image tag names LMCache 0.3.3, where those keys are read
    image = f"docker run lmcache/vllm-openai:v0.3.3 {M} {transfer}"
    assert "pitfall.lmcache-key-ignored" not in fired(review(config, image))
    newer = review(config, image.replace("v0.3.3", "v0.4.1"))
    assert any("LMCache 0.4.1 (the image's tag)" in f.message for f in newer.findings)


def test_an_lmcache_value_its_converter_refuses(knowledge: Knowledge) -> None:
    config = ("lmcache.yaml", "chunk_size: abc\nlocal_cpu: true\nmax_local_cpu_size: 5\n")
    transfer = """--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'"""
    old = review(config, f"docker run lmcache/vllm-openai:v0.3.9 {M} {transfer}")
    (refused,) = [f for f in old.findings if f.rule_id == "pitfall.lmcache-value-refused"]
    assert refused.severity == "error" and (refused.location.file, refused.location.path) == (
        "lmcache.yaml",
        "chunk_size",
    )
    assert "invalid literal for int() with base 10: 'abc'" in refused.message and "LMCache 0.3.9" in refused.message
    new = review(config, f"vllm serve {M} {transfer}")
    assert "pitfall.lmcache-value-refused" not in fired(new)
    (ignored,) = [f for f in new.findings if f.rule_id == "pitfall.lmcache-key-ignored"]
    assert "sets chunk_size to None" in ignored.message and ignored.severity == "warning"
    assert not fired(review(("lmcache.yaml", "chunk_size: 512\n"), f"vllm serve {M} {transfer}")) & {
        "pitfall.lmcache-value-refused",
        "pitfall.lmcache-key-ignored",
    }


def test_a_workloads_lmcache_keys_are_checked_once_for_both_lmcache_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """lmcache-value-refused and lmcache-key-ignored share one reading per workload (the review's Shared)."""
    from vllm_caching_mcp.advice import review_conditions

    calls: list[int] = []
    original = review_conditions._lmcache_findings

    def counted(ctx: Context) -> review_conditions.LMCacheFindings:
        calls.append(id(ctx.effective))
        return original(ctx)

    monkeypatch.setattr(review_conditions, "_lmcache_findings", counted)
    config = ("lmcache.yaml", "chunk_size: abc\nnixl_role: sender\n")
    transfer = """--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'"""
    result = review(config, f"docker run lmcache/vllm-openai:v0.3.9 {M} {transfer}")
    assert {"pitfall.lmcache-value-refused", "pitfall.lmcache-key-ignored"} <= fired(result)
    assert len(calls) == len(set(calls)) == 1


# ------------------------------------------------------------------------- outputs for CI


def test_exit_code_gates_on_severity(knowledge: Knowledge) -> None:
    result = review(data_file("k8s-nixl-pd.yaml"))  # errors and a warning
    assert [exit_code(result, level) for level in ("error", "warning", "info", "never")] == [1, 1, 1, 0]
    warning_only = review(f"vllm serve {M} --kv-cache-dtype fp8")
    assert [exit_code(warning_only, level) for level in ("error", "warning")] == [0, 1]


def test_sarif_has_the_structure_code_scanning_needs(knowledge: Knowledge) -> None:
    result = review(data_file("k8s-nixl-pd.yaml"))
    sarif = json.loads(json.dumps(to_sarif(result, knowledge)))
    assert sarif["version"] == "2.1.0"
    (run,) = sarif["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules if not is_advisory(r["id"])] == [r.id for r in list_rules(knowledge)]
    assert run["results"][0]["ruleId"] == "pitfall.shm-too-small-for-workers"  # line 33, before 39
    first = run["results"][1]
    assert rules[first["ruleIndex"]]["id"] == first["ruleId"] == "pitfall.nixl-ucx-without-cuda"
    assert first["level"] == "error"
    assert first["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "k8s-nixl-pd.yaml"},
        "region": {"startLine": 39},
    }
    assert first["locations"][0]["logicalLocations"] == [
        {"fullyQualifiedName": "spec.template.spec.containers[0].env[0]", "kind": "member"}
    ]
    assert {r["level"] for r in run["results"]} <= {"error", "warning", "note"}


def test_sarif_validates_against_the_published_schema(knowledge: Knowledge) -> None:
    schema_file = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
    if not schema_file.exists():
        pytest.skip("the SARIF 2.1.0 schema is not vendored in tests/data")
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(schema_file.read_text())
    for name in ("k8s-nixl-pd.yaml", "docker-compose.yaml", "lmcache-config.yaml"):
        jsonschema.validate(to_sarif(review(data_file(name)), knowledge), schema)


def test_summary_reads_like_a_linter(knowledge: Knowledge) -> None:
    text = review(data_file("docker-compose.yaml")).summary()
    assert "service vllm-prefill (docker-compose.yaml): vLLM 0.24.0 (from the image tag); P2pNcclConnector" in text
    assert "error   pitfall.p2p-nccl-removed  docker-compose.yaml:12 (services.vllm-prefill.command[5])" in text


def test_rule_conditions_only_name_facts_the_interpreter_knows(knowledge: Knowledge) -> None:
    # Every operand of every comparison in pitfalls.yaml must evaluate (a typo would raise).
    deployment = parse_documents([Document(name="s.sh", text=f"vllm serve {M} --kv-offloading-size 1")], knowledge)
    effective = resolve(deployment.workloads[0], deployment, knowledge, Version("0.33.0"), "stated")
    ctx = Context(effective, [], knowledge, Version("0.33.0"), HostFacts(ram_gib=1, gpu="L40S"), 1000)

    def walk(condition: Any) -> None:
        if condition.compare is not None:
            _expression(condition.compare.left, ctx)
            _expression(condition.compare.right, ctx)
        for child in (*(condition.all_ or ()), *(condition.any_ or ()), condition.not_):
            if child is not None:
                walk(child)

    for rule in knowledge.pitfalls:
        if rule.when is not None:
            walk(rule.when)


@pytest.mark.parametrize("options", ["-p8000:8000", "-dit", "-v=/models:/models", "-p 8000:8000 --"])
def test_docker_run_options_are_read_as_docker_reads_them(options: str) -> None:
    """`-p8000:8000` (a value run into its short option), `-dit` (short switches run together) and `--`
    take no following word: the image after them is still the image."""
    line = f"docker run --gpus all {options} vllm/vllm-openai:v0.20.2 --model m --kv-offloading-size 64"
    result = run_tool("review_deployment", {"documents": [{"name": "run.sh", "text": line}]})
    [workload] = result.workloads
    assert (workload.image, workload.vllm_version, workload.version_source) == (
        "vllm/vllm-openai:v0.20.2",
        "0.20.2",
        "image-tag",
    )


# ------------------------------------------------------- resolve is pure, caches are per knowledge


def test_reviewing_changes_neither_the_request_nor_the_parsed_deployment(knowledge: Knowledge) -> None:
    # resolve wrote into the parsed workload: the model a switch had taken as its value, and the model
    # named by --model.
    shell = f"vllm serve --enable-prefix-caching {M} --kv-offloading-size 10 ; vllm serve --model {M} -tp 2"
    corpus = [Document(name=name, text=(DATA / name).read_text()) for name in REVIEWED_HERE]
    for documents in ([Document(name="serve.sh", text=shell)], *([doc] for doc in corpus), corpus):
        request = ReviewRequest(detail="full", documents=documents, host=HostFacts(ram_gib=512))
        asked = request.model_dump_json()
        review_deployment(request, knowledge)
        assert request.model_dump_json() == asked
        deployment = parse_documents(documents, knowledge)
        parsed = deployment.model_dump_json()
        first = [resolve(w, deployment, knowledge, Version("0.33.0"), "stated") for w in deployment.workloads]
        assert deployment.model_dump_json() == parsed, [d.name for d in documents]
        assert [resolve(w, deployment, knowledge, Version("0.33.0"), "stated") for w in deployment.workloads] == first
    served = parse_documents([Document(name="serve.sh", text=shell)], knowledge)
    effective = resolve(served.workloads[0], served, knowledge, Version("0.33.0"), "stated")
    assert (effective.model, effective.flags["--enable-prefix-caching"].value) == (M, True)


def _without_switches(knowledge: Knowledge) -> Knowledge:
    """A Knowledge object in which no flag is a switch (no bool settings, no inventory)."""
    return knowledge.model_copy(
        update={"settings": (), "cli_inventory": knowledge.cli_inventory.model_copy(update={"flags": ()})}
    )


def _served_model(knowledge: Knowledge, command: str) -> str | None:
    deployment = parse_documents([Document(name="serve.sh", text=command)], knowledge)
    return resolve(deployment.workloads[0], deployment, knowledge, Version("0.33.0"), "stated").model


def test_switches_are_worked_out_for_each_knowledge_object_and_forgotten_with_it(knowledge: Knowledge) -> None:
    command = f"vllm serve --enforce-eager {M}"  # the model, unless --enforce-eager takes a value
    held = len(SWITCHES)
    # Objects are made and dropped in turn, so that one is given the id of another collected
    # before it: a cache keyed by id alone then answers with the other's switches.
    for _ in range(5):
        plain = _without_switches(knowledge)
        assert _served_model(plain, command) is None
        del plain
        same = knowledge.model_copy()
        assert _served_model(same, command) == M
        del same
    gc.collect()
    assert len(SWITCHES) == held  # nothing kept for the objects that are gone


def test_lmcache_config_keys_come_from_the_knowledge_object_asked(knowledge: Knowledge) -> None:
    doc = Document(name="lmcache.yaml", text=(DATA / "lmcache-config.yaml").read_text())
    assert parse_documents([doc], knowledge).lmcache_configs
    no_lmcache = knowledge.model_copy(
        update={"settings": tuple(s for s in knowledge.settings if s.component != "lmcache")}
    )
    with pytest.raises(AdviceError, match="no vLLM server found"):
        parse_documents([doc], no_lmcache)


# ------------------------------------------------------------ connector tier sizes, from the knowledge


def _transfer(connector: str, **extra: Any) -> str:
    config = {"kv_connector": connector, "kv_role": "kv_both", "kv_connector_extra_config": extra}
    return f"--kv-transfer-config '{json.dumps(config)}'"


def _facts(knowledge: Knowledge, command: str, version: str = "0.33.0") -> dict[str, float]:
    return review(command, version=version).workloads[0].facts


def test_each_connector_reads_its_own_tier_size_keys(knowledge: Knowledge) -> None:
    sizes = {"cpu_bytes_to_use": 100 * 2**30, "cpu_bytes_to_use_per_rank": 30 * 2**30}
    # cpu_bytes_to_use_per_rank is SimpleCPUOffloadConnector's; OffloadingConnector's spec reads only the total.
    assert (
        _facts(knowledge, f"vllm serve {M} -tp 2 {_transfer('OffloadingConnector', **sizes)}")["offload_tier_gib"]
        == 100
    )
    simple = _facts(knowledge, f"vllm serve {M} -tp 2 {_transfer('SimpleCPUOffloadConnector', **sizes)}")
    assert simple["offload_tier_gib"] == 60  # 30 GiB a rank x TP 2 overrides the total
    # LMCache sizes each rank's pool from its variable; the 0.22.1 shorthand's size overrides it.
    lmcache = f"LMCACHE_MAX_LOCAL_CPU_SIZE=20 vllm serve {M} -tp 2"
    assert _facts(knowledge, f"{lmcache} {LMCACHE_V1}")["offload_tier_gib"] == 40
    shorthand = f"{lmcache} --kv-offloading-backend lmcache --kv-offloading-size 100"
    assert _facts(knowledge, shorthand, "0.22.1")["offload_tier_gib"] == 100
    # From 0.23.0 the lmcache shorthand means LMCacheMPConnector, whose server the size is not passed to.
    assert "offload_tier_gib" not in _facts(knowledge, shorthand, "0.23.0")


def test_a_multi_connector_with_two_cpu_tiers_takes_both_from_host_memory(knowledge: Knowledge) -> None:
    children = [
        {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"},
        {"kv_connector": "OffloadingConnector", "kv_connector_extra_config": {"cpu_bytes_to_use": 200 * 2**30}},
    ]
    command = f"LMCACHE_MAX_LOCAL_CPU_SIZE=20 vllm serve {M} -tp 2 {_transfer('MultiConnector', connectors=children)}"
    result = review(command, version="0.33.0", host={"ram_gib": 256})
    # 20 GiB a rank x TP 2 for LMCache, plus OffloadingConnector's 200 GiB: 240 > 0.8 x 256 = 204.8.
    assert result.workloads[0].facts["host_offload_gib"] == 240
    assert "pitfall.offload-exceeds-host-ram" in fired(result)


def test_tier_sizes_and_wrapped_connectors_are_read_as_the_knowledge_says(knowledge: Knowledge) -> None:
    nixl_and_offload = [
        {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
        {"kv_connector": "OffloadingConnector", "kv_connector_extra_config": {"cpu_bytes_to_use": 64 * 2**30}},
    ]
    command = f"vllm serve {M} {_transfer('MultiConnector', connectors=nixl_and_offload)}"
    full = review(command).workloads[0]
    assert (full.connectors, full.facts["offload_tier_gib"]) == (
        ["MultiConnector", "NixlConnector", "OffloadingConnector"],
        64,
    )
    unsized = tuple(
        c.model_copy(update={"tier_size": (), "children_key": None})
        if c.name in ("OffloadingConnector", "MultiConnector")
        else c
        for c in knowledge.connectors
    )
    bare = review(command, knowledge=knowledge.model_copy(update={"connectors": unsized})).workloads[0]
    assert (bare.connectors, "offload_tier_gib" in bare.facts) == (["MultiConnector"], False)


def test_a_tier_too_large_for_the_host_points_at_where_its_size_is_written(knowledge: Knowledge) -> None:
    config = json.dumps(
        {"kv_connector": "OffloadingConnector", "kv_connector_extra_config": {"cpu_bytes_to_use": 200 * 2**30}}
    )
    manifest = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: v}\nspec:\n  template:\n    spec:\n"
        f"      containers:\n      - name: vllm\n        image: vllm/vllm-openai:v0.22.1\n"
        f"        args: [--model, {M}, --kv-transfer-config, '{config}']\n"
    )
    result = review_deployment(
        ReviewRequest(detail="full", documents=[Document(name="d.yaml", text=manifest)], host=HostFacts(ram_gib=100)),
        knowledge,
    )
    [finding] = [f for f in result.findings if f.rule_id == "pitfall.offload-exceeds-host-ram"]
    assert (finding.location.line, finding.location.path) == (
        10,
        "spec.template.spec.containers[0].args[2]",
    )  # was the container, line 8


@pytest.mark.parametrize(
    ("extra", "note"),
    [
        ({"connectors": 5}, "kv_connector_extra_config.connectors is not a list; it is not used"),
        ({"connectors": [], "secondary_tiers": 5}, "kv_connector_extra_config.secondary_tiers is not a list"),
    ],
)
def test_a_list_given_as_something_else_is_left_out_with_a_note(
    knowledge: Knowledge, extra: dict[str, Any], note: str
) -> None:
    result = review(f"vllm serve {M} {_transfer('MultiConnector', **extra)}")
    assert result.workloads[0].connectors == ["MultiConnector"]
    assert any(note in n for n in result.notes), result.notes


def test_the_tier_readings_agree_with_the_settings_they_read(knowledge: Knowledge) -> None:
    def scope(setting: Any) -> str:
        # LMCache builds one engine in each vLLM worker process, one per TP x PP rank.
        return "per_rank" if setting.scope == "per_process" else str(setting.scope)

    readings = [(c.name, r) for c in knowledge.connectors for r in c.tier_size]
    assert {name for name, _ in readings} >= {"OffloadingConnector", "SimpleCPUOffloadConnector", "LMCacheConnectorV1"}
    for name, reading in readings:
        if reading.given_by == "kv_offloading_size":
            settings = [s for s in knowledge.settings if s.name == "--kv-offloading-size"]
        elif reading.given_by == "env":
            settings = [s for s in knowledge.settings if s.name == reading.key]
        else:
            settings = [s for s in knowledge.settings if (s.config_path or "").endswith(f"extra_config.{reading.key}")]
        assert settings, (name, reading.key)
        assert {(s.unit, scope(s)) for s in settings} == {(reading.unit, reading.scope)}, (name, reading.key)


@pytest.mark.parametrize(
    ("reading", "expected"),
    [
        ({"given_by": "extra_config", "unit": "bytes", "scope": "per_rank"}, r"a extra_config reading names its key"),
        ({"given_by": "kv_offloading_size", "key": "x", "unit": "GiB", "scope": "total_across_ranks"}, r"takes no key"),
        ({"given_by": "flag", "key": "x", "unit": "GiB", "scope": "per_rank"}, r"field 'tier_size\.0\.given_by'"),
    ],
)
def test_a_tier_reading_the_code_cannot_follow_fails_the_load(
    knowledge_copy: Path, reading: dict[str, Any], expected: str
) -> None:
    path = knowledge_copy / "connectors.yaml"
    data = yaml.safe_load(path.read_text())
    data["connectors"][0]["tier_size"] = [{**reading, "sources": ["pypi:vllm"], "verified_at": "2026-11-30"}]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(KnowledgeError, match=r"connectors\.yaml: .*" + expected):
        load_knowledge(str(knowledge_copy))


# ------------------------------------------------------------------------- rules resting on proven facts

SIMPLE_CPU = """--kv-transfer-config '{"kv_connector":"SimpleCPUOffloadConnector","kv_role":"kv_both"}'"""
OFFLOADING = """--kv-transfer-config '{"kv_connector":"OffloadingConnector","kv_role":"kv_both"}'"""
LMCACHE_MP = """--kv-transfer-config '{"kv_connector":"LMCacheMPConnector","kv_role":"kv_both"}'"""


@pytest.mark.parametrize(
    ("version", "connector", "fires"),
    [
        ("0.33.0", SIMPLE_CPU, "pitfall.prefix-caching-disabled"),
        ("0.19.0", SIMPLE_CPU, "pitfall.prefix-caching-disabled"),
        # the engine hashes blocks for every connector; these offload with prefix caching off
        ("0.33.0", OFFLOADING, None),
        ("0.33.0", LMCACHE_V1, None),
        ("0.33.0", LMCACHE_MP, None),
        ("0.33.0", NIXL, None),
        ("0.11.0", OFFLOADING, None),
        ("0.33.0", "", "pitfall.prefix-caching-off-without-connector"),
    ],
)
def test_prefix_caching_off_is_reported_only_where_it_bites(
    knowledge: Knowledge, version: str, connector: str, fires: str | None
) -> None:
    result = review(f"vllm serve {M} {connector} --no-enable-prefix-caching", version=version)
    prefix_rules = {r for r in fired(result) if r.startswith("pitfall.prefix-caching")}
    assert prefix_rules == ({fires} if fires else set()), result.summary()
    severities = {f.severity for f in result.findings if f.rule_id == "pitfall.prefix-caching-off-without-connector"}
    assert severities <= {"info"}


@pytest.mark.parametrize(
    ("version", "tier", "fires"),
    [
        ("0.22.1", '{"type":"fs","root_dir":"/kv"}', True),  # 0.22.x registered fs_python
        ("0.22.1", '{"type":"fs_python","root_dir":"/kv"}', False),
        ("0.33.0", '{"type":"fs_python","root_dir":"/kv"}', True),
        ("0.24.0", '{"type":"p2p"}', True),  # p2p from 0.25.0
        ("0.25.0", '{"type":"p2p"}', False),
        # an out-of-tree tier is imported from module_path from 0.28.0, refused before
        ("0.28.0", '{"type":"mine","module_path":"my.tiers"}', False),
        ("0.27.1", '{"type":"mine","module_path":"my.tiers"}', True),
    ],
)
def test_a_tier_type_the_release_does_not_register(knowledge: Knowledge, version: str, tier: str, fires: bool) -> None:
    config = (
        '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":'
        '{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":1073741824,"secondary_tiers":[' + tier + "]}}"
    )
    result = review(f"vllm serve {M} --kv-transfer-config '{config}'", version=version)
    assert ("pitfall.tier-type-not-registered" in fired(result)) is fires, result.summary()
    if fires:
        finding = next(f for f in result.findings if f.rule_id == "pitfall.tier-type-not-registered")
        assert f"is not registered in vLLM {version}" in finding.message


@pytest.mark.parametrize(
    ("command", "version", "fires"),
    [
        (f"CUDA_VISIBLE_DEVICES=0,1 vllm serve {M} -tp 2 -pp 2", "0.33.0", True),
        (f"CUDA_VISIBLE_DEVICES= vllm serve {M}", "0.33.0", False),  # world size 1 on no GPU: another failure
        (f"CUDA_VISIBLE_DEVICES=GPU-1f2e,GPU-77aa vllm serve {M} -tp 4", "0.33.0", True),
        (f"vllm serve {M} -tp 4", "0.33.0", False),  # nothing says how many GPUs it sees
        (f"CUDA_VISIBLE_DEVICES=0,1 vllm serve {M} -tp 4 --distributed-executor-backend ray", "0.33.0", False),
        (f"CUDA_VISIBLE_DEVICES=0,1 vllm serve {M} -tp 4 --nnodes 2", "0.33.0", False),
        (f"CUDA_VISIBLE_DEVICES=0,1 vllm serve {M} -tp 4", "0.11.0", False),  # 0.11.0 fell back to Ray
    ],
)
def test_world_size_over_the_visible_gpus(knowledge: Knowledge, command: str, version: str, fires: bool) -> None:
    result = review(command, version=version)
    assert ("pitfall.world-size-over-visible-gpus" in fired(result)) is fires, result.summary()


@pytest.mark.parametrize(
    ("env", "connector", "fires"),
    [
        ("LMCACHE_ENABLE_PD=True", LMCACHE_V1, True),
        ("LMCACHE_REMOTE_URL=lm://cache:65432", LMCACHE_V1, True),
        ("LMCACHE_REMOTE_URL=lm://cache:65432 PYTHONHASHSEED=0", LMCACHE_V1, False),
        ("LMCACHE_LOCAL_CPU=True", LMCACHE_V1, False),  # nothing shared: LMCache does not warn
        ("LMCACHE_REMOTE_URL=lm://cache:65432", OFFLOADING, False),  # not LMCache's token database
    ],
)
def test_lmcache_sharing_without_a_hash_seed(knowledge: Knowledge, env: str, connector: str, fires: bool) -> None:
    result = review(f"{env} vllm serve {M} {connector}", version="0.33.0")
    assert ("pitfall.lmcache-sharing-without-hash-seed" in fired(result)) is fires, result.summary()


def test_lmcache_sharing_with_differing_hash_seeds(knowledge: Knowledge) -> None:
    one = f"PYTHONHASHSEED=0 LMCACHE_REMOTE_URL=lm://cache:65432 vllm serve {M} {LMCACHE_V1}"
    result = review(one, one.replace("PYTHONHASHSEED=0", "PYTHONHASHSEED=1"), version="0.33.0")
    assert "pitfall.lmcache-sharing-without-hash-seed" in fired(result)


def test_lmcache_legacy_lookup_keys_from_a_config_file(knowledge: Knowledge) -> None:
    config = Document(name="lmcache.yaml", text="chunk_size: 256\nlocal_cpu: true\ndistributed_url: 10.0.0.5:8200\n")
    serve = Document(name="serve.sh", text=f"LMCACHE_CONFIG_FILE=lmcache.yaml vllm serve {M} {LMCACHE_V1}")
    result = review_deployment(ReviewRequest(detail="full", documents=[serve, config], version="0.33.0"), knowledge)
    assert "pitfall.lmcache-legacy-lookup-keys" in fired(result), result.summary()


def test_unknown_flag_follows_argparse_abbreviations(knowledge_copy: Path) -> None:
    inventory = {
        "sources": ["pypi:vllm"],
        "verified_at": "2026-11-30",
        "flags": [{"flag": "--max-num-seqs"}, {"flag": "--max-num-batched-tokens"}, {"flag": "--max-model-len"}],
    }
    (knowledge_copy / "cli_inventory.yaml").write_text(yaml.safe_dump(inventory))
    k = load_knowledge(str(knowledge_copy))
    # an unambiguous prefix is the option, as vLLM's parser (argparse, allow_abbrev on) reads it
    assert "pitfall.unknown-flag" not in fired(review(f"vllm serve {M} --max-num-seq 8 --max-model 4096", knowledge=k))
    ambiguous = [
        f for f in review(f"vllm serve {M} --max-num 8", knowledge=k).findings if f.rule_id == "pitfall.unknown-flag"
    ]
    assert [f.message.split(": ", 1)[1] for f in ambiguous] == [
        f"--max-num is ambiguous in vLLM {k.newest()}: it could be --max-num-batched-tokens, --max-num-seqs; "
        "write the option in full"
    ]


def test_an_option_no_release_takes_is_an_error_on_a_vllm_image_and_a_warning_on_a_vendor_build() -> None:
    vendor = review(f"docker run --entrypoint vllm acme/gaudi-runtime:1.20.0 serve {M} --device hpu")
    assert "pitfall.unknown-flag" not in fired(vendor) and "pitfall.unknown-flag-vendor-build" in fired(vendor)
    for upstream in (f"docker run vllm/vllm-openai:latest {M} --device hpu", f"vllm serve {M} --device hpu"):
        assert "pitfall.unknown-flag" in fired(review(upstream))
    stated = review(f"docker run --entrypoint vllm acme/gaudi-runtime:1.20.0 serve {M} --device hpu", version="0.33.0")
    assert "pitfall.unknown-flag" in fired(stated) and "pitfall.unknown-flag-vendor-build" not in fired(stated)


def test_every_condition_key_has_an_evaluator() -> None:
    from vllm_caching_mcp.advice.review_conditions import EVALUATORS
    from vllm_caching_mcp.knowledge import Condition

    assert set(EVALUATORS) == set(Condition.model_fields)


def test_an_error_rule_rests_on_a_fact_verified_in_the_wheels(knowledge: Knowledge) -> None:
    from vllm_caching_mcp.verification import verification_state

    for rule in list_rules(knowledge):
        assert rule.premises, f"{rule.id} names no premise"
        if rule.severity == "error":
            verified = [p for p in rule.premises if verification_state(p).status == "verified"]
            assert verified, f"{rule.id} is error-severity but no premise of it was verified against the wheels"


def test_a_premise_that_does_not_resolve_fails_the_load(knowledge_copy: Path) -> None:
    path = knowledge_copy / "pitfalls.yaml"
    data = yaml.safe_load(path.read_text())
    data["pitfalls"][0]["premises"] = ["feature.no-such-fact"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(KnowledgeError, match=r"field 'premises': no entry has the id 'feature\.no-such-fact'"):
        load_knowledge(str(knowledge_copy))


def test_a_finding_carries_the_reason_and_its_premises(knowledge: Knowledge) -> None:
    result = review(RULE_CASES["pitfall.prefix-caching-disabled"][1], version="0.33.0")
    finding = next(f for f in result.findings if f.rule_id == "pitfall.prefix-caching-disabled")
    assert "Detected prefix caching disabled" in finding.why
    assert "feature.simple-offload-needs-prefix-caching" in finding.premises and finding.sources
    sarif = to_sarif(result, knowledge)
    (rule,) = [r for r in sarif["runs"][0]["tool"]["driver"]["rules"] if r["id"] == finding.rule_id]
    assert "Detected prefix caching disabled" in rule["help"]["text"] and finding.sources[0] in rule["help"]["text"]
    assert rule["properties"]["premises"] == finding.premises


# ------------------------------------------------------------------ the container: memory, /dev/shm, GPUs


def _pod(args: str, resources: str = "", volumes: str = "", tag: str = "v0.33.0", host_ipc: bool = False) -> str:
    """A Deployment running vllm/vllm-openai:<tag> with ``args`` (a YAML flow list's items)."""
    pod = "      hostIPC: true\n" if host_ipc else ""
    mounts = "        volumeMounts: [{name: shm, mountPath: /dev/shm}]\n" if volumes else ""
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm}\nspec:\n  selector: {matchLabels: {app: vllm}}\n"
        "  template:\n    metadata: {labels: {app: vllm}}\n    spec:\n"
        f"{pod}      containers:\n      - name: vllm\n        image: vllm/vllm-openai:{tag}\n"
        f"        args: [{args}]\n{resources}{mounts}"
        + (f"      volumes: [{{name: shm, emptyDir: {volumes}}}]\n" if volumes else "")
    )


TIER_100 = f"--model, {M}, --kv-offloading-size, '100'"
SHM_200 = "{medium: Memory, sizeLimit: 200Gi}"


@pytest.mark.parametrize(
    ("request_gib", "limit_gib", "expected"),
    [
        (64, 256, {"pitfall.pinned-memory-over-pod-request"}),  # 114 GiB pinned > the 64 GiB request
        (64, 100, {"pitfall.pinned-memory-over-pod-limit"}),  # over the limit: the error alone
        (128, 256, set()),
    ],
)
def test_pinned_memory_against_the_pod_request_and_limit(
    knowledge: Knowledge, request_gib: int, limit_gib: int, expected: set[str]
) -> None:
    resources = f"        resources: {{requests: {{memory: {request_gib}Gi}}, limits: {{memory: {limit_gib}Gi}}}}\n"
    result = review(("vllm.yaml", _pod(TIER_100, resources, SHM_200)))
    pinned = {"pitfall.pinned-memory-over-pod-request", "pitfall.pinned-memory-over-pod-limit"}
    assert fired(result) & pinned == expected, result.summary()
    for finding in result.findings:
        if finding.rule_id in pinned:
            assert "pinned host GiB * 1.1 + 4 = 114 >" in finding.message
            assert "judgement" in finding.why and finding.location.file == "vllm.yaml"


@pytest.mark.parametrize(
    ("volumes", "resources", "host_ipc", "fires"),
    [
        ("", "", False, True),  # no /dev/shm mount: the container's 64 MiB
        ("{medium: Memory, sizeLimit: 50Gi}", "", False, True),
        (SHM_200, "", False, False),
        ("{medium: Memory}", "", False, False),  # no size and no limit: the node's memory bounds it
        ("{medium: Memory}", "        resources: {limits: {memory: 64Gi}}\n", False, True),  # the limit bounds it
        ("", "", True, False),  # hostIPC: the node's /dev/shm
    ],
)
def test_the_cpu_tier_against_the_pods_dev_shm(
    knowledge: Knowledge, volumes: str, resources: str, host_ipc: bool, fires: bool
) -> None:
    result = review(("vllm.yaml", _pod(TIER_100, resources, volumes, host_ipc=host_ipc)))
    assert ("pitfall.offload-tier-over-shm" in fired(result)) is fires, result.summary()


def test_the_shm_rules_follow_the_release_that_put_the_tier_there(knowledge: Knowledge) -> None:
    for tag, expected in [
        ("v0.26.0", set()),  # the CPU spec's tier was a private pinned tensor
        ("v0.27.0", {"pitfall.offload-tier-over-shm-unchecked"}),
        ("v0.28.0", {"pitfall.offload-tier-over-shm"}),
    ]:
        shm_rules = {"pitfall.offload-tier-over-shm", "pitfall.offload-tier-over-shm-unchecked"}
        result = review(("vllm.yaml", _pod(TIER_100, tag=tag)))
        assert fired(result) & shm_rules == expected, (tag, result.summary())
    # SimpleCPUOffloadConnector (VLLM_USE_SIMPLE_KV_OFFLOAD) keeps no tier in /dev/shm
    simple = review(
        f"docker run -e VLLM_USE_SIMPLE_KV_OFFLOAD=1 vllm/vllm-openai:v0.33.0 --model {M} --kv-offloading-size 100"
    )
    assert "pitfall.offload-tier-over-shm" not in fired(simple), simple.summary()


def test_compose_shm_size_ipc_and_mem_limit_are_read(knowledge: Knowledge) -> None:
    def compose(extra: str) -> str:
        return (
            "services:\n  vllm:\n    image: vllm/vllm-openai:v0.33.0\n"
            f"    command: [--model, {M}, --kv-offloading-size, '100']\n{extra}"
        )

    assert "pitfall.offload-tier-over-shm" in fired(review(compose("")))
    assert "pitfall.offload-tier-over-shm" not in fired(review(compose("    shm_size: 200g\n")))
    assert "pitfall.offload-tier-over-shm" not in fired(review(compose("    ipc: host\n")))
    (w,) = parse_documents(
        [Document(name="c.yaml", text=compose("    mem_limit: 64g\n    shm_size: 8g\n"))], knowledge
    ).workloads
    assert (w.memory_limit_gib, w.shm_gib) == (64, 8)  # Docker's g is GiB, not 10^9 bytes


def test_docker_memory_is_in_binary_units(knowledge: Knowledge) -> None:
    text = f"docker run --memory 64g vllm/vllm-openai:v0.33.0 --model {M}"
    (w,) = parse_documents([Document(name="run.sh", text=text)], knowledge).workloads
    assert w.memory_limit_gib == 64


@pytest.mark.parametrize(
    ("gpus", "fires"),
    [("2", True), ("4", False)],
)
def test_world_size_against_the_nvidia_gpu_resource(knowledge: Knowledge, gpus: str, fires: bool) -> None:
    resources = f"        resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}\n"
    result = review(("vllm.yaml", _pod(f"--model, {M}, -tp, '4'", resources, SHM_200)))
    assert ("pitfall.world-size-over-visible-gpus" in fired(result)) is fires, result.summary()


def test_world_size_against_docker_gpus(knowledge: Knowledge) -> None:
    def run(gpus: str) -> set[str]:
        return fired(review(f"docker run --ipc=host --gpus {gpus} vllm/vllm-openai:v0.33.0 --model {M} -tp 4"))

    assert "pitfall.world-size-over-visible-gpus" in run("'\"device=0,1\"'")
    assert "pitfall.world-size-over-visible-gpus" in run("2")
    assert "pitfall.world-size-over-visible-gpus" not in run("4")
    assert "pitfall.world-size-over-visible-gpus" not in run("all")  # the host's GPUs: not known here


def test_expressions_add_a_headroom_left_to_right(knowledge: Knowledge) -> None:
    deployment = parse_documents([Document(name="s.sh", text=f"vllm serve {M} --kv-offloading-size 100")], knowledge)
    version = Version("0.33.0")
    effective = resolve(deployment.workloads[0], deployment, knowledge, version, "stated")
    ctx = Context(effective, [], knowledge, version, HostFacts(), p99_context_tokens=None)
    value, label, missing, absent = _expression("fact:host_offload_gib * 1.1 + 4 - 2", ctx)
    assert value == pytest.approx(112) and label == "pinned host GiB * 1.1 + 4 - 2" and not missing and not absent


def test_the_nodes_dev_shm_mounted_as_a_host_path_is_not_judged_as_the_64_mib_default(knowledge: Knowledge) -> None:
    # render_config mounts the node's /dev/shm into the LMCache MP pods; that is the node's, like hostIPC.
    default = _pod(f"--model, {M}, --tensor-parallel-size, '4'")
    host_path = default.replace(
        "        args:", "        volumeMounts: [{name: shm, mountPath: /dev/shm}]\n        args:"
    )
    host_path += "      volumes: [{name: shm, hostPath: {path: /dev/shm, type: Directory}}]\n"
    assert "pitfall.shm-too-small-for-workers" in fired(review(("vllm.yaml", default)))
    assert "pitfall.shm-too-small-for-workers" not in fired(review(("vllm.yaml", host_path)))


def test_a_gpu_count_written_as_a_string_quantity_is_read(knowledge: Knowledge) -> None:
    # Kubernetes quantities are strings as often as numbers: nvidia.com/gpu: "2" is two GPUs.
    resources = '        resources: {limits: {nvidia.com/gpu: "2"}}\n'
    result = review(("vllm.yaml", _pod(f"--model, {M}, --tensor-parallel-size, '4'", resources, SHM_200)))
    assert "pitfall.world-size-over-visible-gpus" in fired(result), result.summary()
    assert not any("nvidia.com/gpu" in note for note in result.notes)


BASH_C_COMPOSE = """services:
  engine:
    image: vllm/vllm-openai:v0.33.0
    entrypoint: [bash, -c]
    command: %s
"""


def test_a_server_that_never_starts_is_an_error(knowledge: Knowledge) -> None:
    # compose splits a command: string into words, so `bash -c` runs `vllm` alone (it prints its help)
    split = Document(name="compose.yaml", text=BASH_C_COMPOSE % f"vllm serve {M} --max-num-seqs 64")
    result = review_deployment(ReviewRequest(detail="full", documents=[split]), knowledge)
    [finding] = [f for f in result.findings if f.rule_id == "pitfall.server-does-not-start"]
    assert finding.severity == "error" and (finding.location.file, finding.location.line) == ("compose.yaml", 3)
    assert "compose.yaml:5 (services.engine.command): `bash -c` runs only the word after it, 'vllm'" in finding.message
    assert finding.premises == ["feature.vllm-cli-without-subcommand-prints-help"]
    # the line as one item is a script bash runs whole: the server starts
    whole = Document(name="compose.yaml", text=BASH_C_COMPOSE % f"['vllm serve {M} --max-num-seqs 64']")
    assert "pitfall.server-does-not-start" not in fired(
        review_deployment(ReviewRequest(detail="full", documents=[whole]), knowledge)
    )


def test_an_option_left_without_its_value_fires_once_per_option(knowledge: Knowledge) -> None:
    text = f'A=""; B=""\nvllm serve {M} --max-model-len $A \\\n  --max-num-seq $B --enforce-eager'
    result = review(text, version="0.33.0")
    found = [f for f in result.findings if f.rule_id == "pitfall.option-value-empty"]
    assert [(f.location.line, f.message.split(": ", 1)[1].split(":")[0]) for f in found] == [
        (2, "--max-model-len"),
        (3, "--max-num-seq"),  # argparse's prefix of --max-num-seqs takes a value too
    ]
    assert found[0].premises == ["feature.serve-option-needs-its-value"]


def test_an_empty_expansion_after_a_switch_or_an_empty_word_is_not_a_missing_value(knowledge: Knowledge) -> None:
    # a switch takes no value, so nothing is missing; an empty word ("$E") is an argument (some options'
    # types read it as None), which this rule does not judge
    for text in (f'E=""; vllm serve {M} --enforce-eager $E --max-num-seqs 8', f'E=""; vllm serve {M} --api-key "$E"'):
        assert "pitfall.option-value-empty" not in fired(review(text, version="0.33.0")), text


def test_allow_empty_is_a_field_of_the_request_not_of_the_command_line() -> None:
    # The MCP tool and the CLI take it alike: nothing to review is a clean review, and only that.
    workflow = {"name": "ci.yaml", "text": "on: push\njobs: {}\n"}
    with pytest.raises(ToolInputError, match=r"^documents: no vLLM server found"):
        run_tool("review_deployment", {"documents": [workflow]})
    with pytest.raises(ToolInputError, match=r"^documents: List should have at least 1 item"):
        run_tool("review_deployment", {"documents": []})
    clean = run_tool("review_deployment", {"documents": [workflow], "allow_empty": True})
    assert isinstance(clean, ReviewResult)
    assert (clean.workloads, clean.findings, clean.notes) == ([], [], ["ci.yaml: no vLLM server found in it"])
    none = run_tool("review_deployment", {"documents": [], "allow_empty": True, "detail": "full"})
    assert isinstance(none, ReviewResult) and none.notes == ["no files to review"]
    # The other options are still checked, and a document with a server is still reviewed.
    with pytest.raises(ToolInputError, match=r"^disabled_rules: no rule has the id 'pitfall\.nope'"):
        run_tool("review_deployment", {"documents": [], "allow_empty": True, "disabled_rules": ["pitfall.nope"]})
    served = {"name": "s.sh", "text": f"vllm serve {M} --kv-offloading-size 1"}
    reviewed = run_tool("review_deployment", {"documents": [workflow, served], "allow_empty": True})
    assert isinstance(reviewed, ReviewResult) and [w.file for w in reviewed.workloads] == ["s.sh"]


def test_a_transfer_config_field_is_judged_by_the_release_that_reads_it(knowledge: Knowledge) -> None:
    # kv_buffer_size: a field through 0.31.0, refused from 0.32.0 (the class forbids unknown fields from 0.16.0);
    # a misspelt field before 0.16.0 is dropped silently: a warning, not an error
    line = f"vllm serve {M} " + _nixl(kv_buffer_size=5e9)
    assert "pitfall.transfer-config-field-refused" not in fired(review(line, version="0.31.0"))
    refused = review(line, version="0.32.0")
    finding = next(f for f in refused.findings if f.rule_id == "pitfall.transfer-config-field-refused")
    assert "removed in 0.32.0" in finding.message and "Unexpected keyword argument" in finding.message
    assert finding.premises[0] == "feature.kv-transfer-config-forbids-unknown-fields"
    misspelt = line.replace("kv_buffer_size", "kv_rol")
    old = fired(review(misspelt, version="0.15.1"))
    assert "pitfall.transfer-config-key-ignored" in old and "pitfall.transfer-config-field-refused" not in old


def test_each_multiconnector_child_is_checked_as_its_own_transfer_config(knowledge: Knowledge) -> None:
    config = {
        "kv_connector": "MultiConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "connectors": [
                {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_rank": 0},
                {
                    "kv_connector": "OffloadingConnector",
                    "kv_role": "kv_both",
                    "kv_connector_extra_config": {"cpu_bytes_to_use": 1 << 30},
                },
            ]
        },
    }
    result = review(f"vllm serve {M} --kv-transfer-config '{json.dumps(config)}'", version="0.33.0")
    refused = [f for f in result.findings if f.rule_id == "pitfall.transfer-config-field-refused"]
    assert len(refused) == 1 and "kv_rank" in refused[0].message, result.summary()
    assert "pitfall.transfer-config-key-ignored" not in fired(result)


def test_a_release_older_than_the_knowledge_is_not_judged_as_another(knowledge: Knowledge) -> None:
    # --swap-space left in 0.12.0; vLLM 0.10.0 takes it, so calling it removed there would be wrong
    line = "docker run --gpus all vllm/vllm-openai:v0.10.0 --model m --swap-space 16 --kv-offloading-sise 1"
    result = review(line)
    assert not [f for f in result.findings if not f.rule_id.startswith("advisory.")], result.summary()
    assert any("older than 0.11.0" in n and "not judged" in n for n in result.notes), result.notes
    assert any(f.rule_id.startswith("advisory.") for f in result.findings)  # advisories still apply
    newer = review(line.replace("v0.10.0", "v0.33.0"))
    assert {"pitfall.unknown-flag", "pitfall.flag-not-in-release"} & fired(newer), newer.summary()


def test_local_cpu_off_is_no_hang_where_lmcache_builds_no_cpu_backend(knowledge: Knowledge) -> None:
    # LMCache creates its CPU backend only when not enable_pd or local_cpu, and with a size above 0
    # (lmcache/v1/storage_backend/__init__.py): the documented P/D config has nothing that can fill
    serve = "LMCACHE_CONFIG_FILE=lm.yaml vllm serve m " + _transfer("LMCacheConnectorV1")
    for config, fires in [
        ("local_cpu: false\nmax_local_cpu_size: 0\nenable_pd: true\npd_role: sender\n", False),
        ("local_cpu: false\nenable_pd: true\n", False),
        ("local_cpu: false\nmax_local_cpu_size: 0\n", False),
        ("local_cpu: false\nmax_local_cpu_size: 5\n", True),
        ("local_cpu: false\n", True),  # the default size is above 0
    ]:
        result = review(("serve.sh", serve), ("lm.yaml", config), version="0.33.0")
        assert ("pitfall.lmcache-local-cpu-false" in fired(result)) is fires, config


def test_fp8_e5m2_needs_no_kv_scales(knowledge: Knowledge) -> None:
    # vLLM warns of a 1.0 scale only when "e5m2" is not in the cache dtype (quantization/kv_cache.py)
    rule = "pitfall.fp8-kv-without-scales"
    assert rule not in fired(review(f"vllm serve {M} --kv-cache-dtype fp8_e5m2", version="0.33.0"))
    for dtype in ("fp8", "fp8_e4m3"):
        assert rule in fired(review(f"vllm serve {M} --kv-cache-dtype {dtype}", version="0.33.0")), dtype


def test_a_build_derived_from_the_official_image_gives_its_release_with_a_note(knowledge: Knowledge) -> None:
    image = "registry.example.com/aibrix/vllm-openai-aibrix-kvcache:v0.22.1-20251022"
    result = review(f"docker run --gpus all {image} --model {M}")
    assert [w.vllm_version for w in result.workloads] == ["0.22.1"]
    assert any("a build of vLLM (not vllm/vllm-openai itself)" in n for n in result.notes), result.notes
    # LMCache's image tags are LMCache's releases, and other vendors' names say nothing of vLLM's
    for other in ("lmcache/vllm-openai:v0.3.5", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0"):
        workload = review(f"docker run --gpus all {other} --model {M}").workloads[0]
        assert workload.version_source == "assumed-newest", other


def test_a_dated_lmcache_nightly_image_is_judged_as_the_lmcache_release_of_its_day(knowledge: Knowledge) -> None:
    # enable_nixl was an LMCache key until 0.3.7 (2025-09-29); 0.3.0 is dated 2025-05-28
    def run(tag: str) -> list[str]:
        image = f"lmcache/vllm-openai:{tag}"
        line = f"docker run -e LMCACHE_ENABLE_NIXL=True {image} --model {M} {_transfer('LMCacheConnectorV1')}"
        result = review(line, version="0.33.0")
        return [f.message for f in result.findings if f.rule_id == "pitfall.lmcache-key-ignored"]

    assert run("2025-05-27-v1") == []  # before any release the knowledge covers: not judged
    assert run("2025-08-01") == []  # LMCache 0.3.2's day: the key was read
    [late] = run("2025-12-01")
    assert "LMCACHE_ENABLE_NIXL" in late and "build date 2025-12-01" in late


def test_ucx_without_cuda_is_no_fault_of_a_build_that_runs_no_cuda() -> None:
    image = "vault.habana.ai/gaudi-docker/1.18.0/pytorch-installer-2.4.0:latest"
    gaudi = f"docker run -e UCX_TLS=tcp {image} vllm serve {M} {NIXL}"
    assert "pitfall.nixl-ucx-without-cuda" not in fired(review(gaudi))
    assert "pitfall.nixl-ucx-without-cuda" in fired(review(gaudi.replace(image, "nvcr.io/nvidia/pytorch:25.01-py3")))


def test_vllm_in_a_base_image_is_not_judged_where_an_install_may_bring_it() -> None:
    base = f"docker run --gpus 1 python:3.12 sh -c 'pip install -r requirements.txt && vllm serve {M}'"
    assert "pitfall.vllm-not-in-image" not in fired(review(base))
    assert "pitfall.vllm-not-in-image" not in fired(review(f"docker run --gpus 1 nvcr.io/nvidia/vllm:25.09-py3 {M}"))


def test_a_ray_cluster_counts_where_a_command_starts_it_not_a_comment() -> None:
    rule, serve = "pitfall.ray-cluster-without-ray-backend", f"vllm serve {M} --tensor-parallel-size 8"
    assert rule not in fired(review(f"# run `ray start --head` on the first node\n{serve}\n", version="0.33.0"))
    assert rule in fired(review(f"ray start --head\n{serve}\n", version="0.33.0"))


def test_weights_are_judged_only_for_the_checkpoint_the_knowledge_describes() -> None:
    rule, host = "pitfall.weights-exceed-gpu-memory", {"gpu": "L40S"}
    assert rule in fired(review("vllm serve meta-llama/Llama-3.3-70B-Instruct -tp 2", version="0.33.0", host=host))
    # another org's repository of the same name, a quantization, offloaded weights: not the figures known here
    for command in (
        "vllm serve someorg/Llama-3.3-70B-Instruct -tp 2",
        "vllm serve meta-llama/Llama-3.3-70B-Instruct -tp 2 --quantization fp8",
        "vllm serve meta-llama/Llama-3.3-70B-Instruct -tp 2 --cpu-offload-gb 40",
    ):
        assert rule not in fired(review(command, version="0.33.0", host=host)), command
    # an instance type a node selector names gives the GPU
    manifest = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: m}\nspec:\n  template:\n    spec:\n"
        "      nodeSelector: {node.kubernetes.io/instance-type: g6.12xlarge}\n      containers:\n"
        "      - name: vllm\n        image: vllm/vllm-openai:v0.33.0\n"
        "        args: [--model, meta-llama/Llama-3.3-70B-Instruct, --tensor-parallel-size, '4']\n"
        "        resources: {limits: {nvidia.com/gpu: 4}}\n"
    )
    [hit] = [f for f in review(("deploy.yaml", manifest)).findings if f.rule_id == rule]
    assert "NVIDIA L4 24GB" in hit.message and "32.9 GiB a GPU" in hit.message


def test_lmcache_variables_without_a_connector_are_judged_only_where_the_launch_is_whole() -> None:
    rule = "pitfall.lmcache-settings-without-connector"
    assert rule in fired(review(f"export LMCACHE_CHUNK_SIZE=256\nvllm serve {M} --port 8000\n", version="0.33.0"))
    # a --kv-transfer-config the files do not settle may name LMCache's connector
    unsettled = f'LMCACHE_CHUNK_SIZE=256 vllm serve {M} --kv-transfer-config "$KV_CONFIG"\n'
    assert rule not in fired(review(unsettled, version="0.33.0"))
    # Dynamo's worker configures connectors with options of its own in some releases
    dynamo = f"LMCACHE_CHUNK_SIZE=256 python3 -m dynamo.vllm --model {M} --connector lmcache\n"
    assert rule not in fired(review(dynamo, version="0.33.0"))
    # beside an LMCache server the variables may be the server's
    server = f"export LMCACHE_CHUNK_SIZE=256\nlmcache server localhost 65432 &\nvllm serve {M}\n"
    assert rule not in fired(review(server, version="0.33.0"))


def test_a_vllm_variable_the_files_own_script_expands_is_not_vllm_s() -> None:
    script = f"export VLLM_MAX_NUM_SEQS=64 VLLM_RPC_TIMEOUT=300\nvllm serve {M} --max-num-seqs $VLLM_MAX_NUM_SEQS\n"
    found = [f.message for f in review(script, version="0.33.0").findings if f.rule_id == "pitfall.vllm-env-unread"]
    assert len(found) == 1 and "VLLM_RPC_TIMEOUT" in found[0]


def test_two_servers_of_one_script_on_one_http_port() -> None:
    script = f"vllm serve {M} &\nvllm serve {M} --port 8000\n"
    (hit,) = [f for f in review(script, version="0.33.0").findings if f.rule_id == "pitfall.ports-bound-twice"]
    assert hit.location.line == 2 and "port 8000: its HTTP server (--port 8000" in hit.message
    apart = f"vllm serve {M} &\nvllm serve {M} --port 8001\n"
    assert "pitfall.ports-bound-twice" not in fired(review(apart, version="0.33.0"))


def test_a_server_the_script_waits_for_frees_its_ports_before_the_next_starts() -> None:
    sequential = f"vllm serve {M} {NIXL}\nvllm serve {M} --port 8001 {NIXL}\n"
    assert "pitfall.ports-bound-twice" not in fired(review(sequential, version="0.33.0"))
    recipes = f"prefill:\n    vllm serve {M} --port 8100 {NIXL}\n\ndecode:\n    vllm serve {M} --port 8200 {NIXL}\n"
    assert "pitfall.ports-bound-twice" in fired(review(("Justfile", recipes), version="0.33.0"))


BASE_WITH_PLACEHOLDER_IMAGE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      containers:
      - name: inference-server
        image: replaced-by-kustomize
        args: [--tensor-parallel-size=2, --enable-prefix-caching]
        command: [vllm, serve, Qwen/Qwen3-32B]
        resources: {}
"""


def test_a_base_whose_image_an_overlay_sets_is_not_judged_for_what_the_overlay_adds(knowledge: Knowledge) -> None:
    # `image: replaced-by-kustomize` says the pod is completed elsewhere: its GPUs and its tag are the overlay's.
    result = review(("base/deployment.yaml", BASE_WITH_PLACEHOLDER_IMAGE))
    assert not {"pitfall.no-gpu-requested", "pitfall.floating-image-tag", "pitfall.shm-too-small-for-workers"} & {
        f.rule_id for f in result.findings
    }
    real = review(
        ("base/deployment.yaml", BASE_WITH_PLACEHOLDER_IMAGE.replace("replaced-by-kustomize", "vllm/vllm-openai"))
    )
    assert {"pitfall.no-gpu-requested", "pitfall.floating-image-tag"} <= {f.rule_id for f in real.findings}


def test_on_a_build_of_an_unnamed_release_only_a_variable_no_covered_release_reads_is_called_unread() -> None:
    # VLLM_RPC_TIMEOUT is read up to 0.22: a dated dev build may read it; VLLM_NO_SUCH_KNOB no release reads.
    env = "-e VLLM_RPC_TIMEOUT=300 -e VLLM_NO_SUCH_KNOB=1"
    dev_build = f"docker run --gpus all {env} rocm/vllm-dev:open-mi300-08052025 vllm serve {M}"
    found = [f.message for f in review(dev_build).findings if f.rule_id == "pitfall.vllm-env-unread"]
    assert len(found) == 1 and "VLLM_NO_SUCH_KNOB" in found[0] and "VLLM_RPC_TIMEOUT" not in found[0]
    # :latest is the newest release, which reads neither
    latest = dev_build.replace("rocm/vllm-dev:open-mi300-08052025", "vllm/vllm-openai:latest")
    found = [f.message for f in review(latest).findings if f.rule_id == "pitfall.vllm-env-unread"]
    assert "VLLM_RPC_TIMEOUT" in " ".join(found)


SERVICE_NAMED_VLLM = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  template:
    metadata: {labels: {app: vllm}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.33.0
        args: [Qwen/Qwen3-8B]
        resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: v1
kind: Service
metadata: {name: vllm}
spec:
  selector: {app: vllm}
  ports: [{port: 8000, targetPort: 8000}]
"""


def test_a_service_named_vllm_gives_its_namespace_s_pods_a_vllm_port_the_engine_refuses() -> None:
    def refused(text: str) -> list[str]:
        found = review(("vllm.yaml", text)).findings
        return [f.message for f in found if f.rule_id == "pitfall.vllm-env-value-refused"]

    (message,) = refused(SERVICE_NAMED_VLLM)
    assert "VLLM_PORT='tcp://<cluster IP>:8000', set by the kubelet for Service vllm" in message
    assert "appears to be a URI" in message
    assert (
        refused(
            SERVICE_NAMED_VLLM.replace(
                "    spec:\n      containers:", "    spec:\n      enableServiceLinks: false\n      containers:"
            )
        )
        == []
    )
    assert (
        refused(
            SERVICE_NAMED_VLLM.replace(
                "metadata: {name: vllm}\nspec:\n  selector",
                "metadata: {name: vllm, namespace: other}\nspec:\n  selector",
            )
        )
        == []
    )
    own = SERVICE_NAMED_VLLM.replace(
        "        args: [Qwen/Qwen3-8B]\n",
        "        args: [Qwen/Qwen3-8B]\n        env: [{name: VLLM_PORT, value: '12345'}]\n",
    )
    assert refused(own) == []  # the container's own variable wins over the kubelet's
    assert (
        refused(
            SERVICE_NAMED_VLLM.replace(
                "metadata: {name: vllm}\nspec:\n  selector", "metadata: {name: qwen}\nspec:\n  selector"
            )
        )
        == []
    )


def test_an_lmcache_pd_pair_is_judged_by_the_backend_its_config_file_gives() -> None:
    producer = f"LMCACHE_CONFIG_FILE=/etc/lmcache/lmcache.yaml vllm serve m {LMCACHE_PRODUCER}\n"
    rule = "pitfall.lmcache-pd-without-shared-backend"
    # the file it names is not among the documents: its backend is not known, so nothing is said
    assert rule not in fired(review(("serve.sh", producer), version="0.33.0"))
    shared = review(
        ("serve.sh", producer), ("lmcache.yaml", "chunk_size: 256\nremote_url: lm://cache:8100\n"), version="0.33.0"
    )
    assert rule not in fired(shared)
    local = review(
        ("serve.sh", producer), ("lmcache.yaml", "chunk_size: 256\nmax_local_cpu_size: 20\n"), version="0.33.0"
    )
    assert rule in fired(local)


def test_a_ray_start_in_a_comment_of_a_containers_script_is_no_ray_cluster() -> None:
    rule = "pitfall.ray-cluster-without-ray-backend"

    def pod(script: str) -> str:
        return (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: v}\nspec:\n  template:\n    spec:\n"
            "      containers:\n      - name: vllm\n        image: vllm/vllm-openai:v0.33.0\n"
            "        command: [bash, -c]\n        args:\n        - |\n"
            + "".join(f"          {line}\n" for line in script.splitlines())
            + "        resources: {limits: {nvidia.com/gpu: 8}}\n"
        )

    serve = f"vllm serve {M} --tensor-parallel-size 8"
    assert rule not in fired(review(("deploy.yaml", pod(f"# on the head node: ray start --head\n{serve}"))))
    assert rule in fired(review(("deploy.yaml", pod(f"ray start --head\n{serve}"))))


def test_a_pip_installed_release_that_breaks_the_model_class() -> None:
    # vLLM 0.28.0 asks for transformers>=5.5.3 only; pip takes the newest, whose Pixtral module lacks the class
    # vLLM's imports (rules-0.28.0.json: the engine refused Mistral3ForConditionalGeneration with it).
    mistral = "vllm serve mistralai/Mistral-Small-3.1-24B-Instruct-2503 --max-model-len 32768\n"
    rule = "pitfall.install-breaks-model-class"
    for install, fires in (
        ("pip install vllm==0.28.0", True),
        ("pip install vllm==0.28.0 transformers", True),  # an unpinned transformers is the newest too
        ("pip install vllm==0.28.0 transformers==5.25.0", True),
        ("pip install vllm==0.28.0 'transformers<5.17'", False),
        ("pip install vllm==0.28.0 transformers==5.16.1", False),
        ("pip install vllm==0.31.0", False),  # 0.31.0 picks the class by the installed transformers
        ("pip install vllm==0.22.1", False),  # transformers<5 there
    ):
        found = [f for f in review(install + "\n" + mistral).findings if f.rule_id == rule]
        assert bool(found) is fires, install
    # the image of the release was built with the transformers of its day
    image = review("docker run --gpus 1 vllm/vllm-openai:v0.28.0 --model mistralai/Mistral-Small-3.1-24B-Instruct-2503")
    assert rule not in fired(image)
    # a model whose class does not import the Pixtral module
    llama = review(f"pip install vllm==0.28.0\nvllm serve {M}\n")
    assert rule not in fired(llama)
