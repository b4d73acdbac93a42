#!/usr/bin/env bash
# Sweep of CPU offload sizes for the caching experiments.
set -euo pipefail
MODEL=${MODEL:-Qwen/Qwen2.5-7B-Instruct}
OFFLOAD_GB=64
PORT=8100
export PYTHONHASHSEED=0

vllm serve "$MODEL" \
  --port $PORT \
  --kv-offloading-backend native \
  --kv-offloading-size ${OFFLOAD_GB} \
  --disable-hybrid-kv-cache-manager \
  --max-model-len 32768
