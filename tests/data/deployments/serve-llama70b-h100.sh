#!/usr/bin/env bash
# Llama 3.3 70B on one 4x H100 node with native CPU KV offload (vLLM 0.20.2 venv).
set -euo pipefail
export PYTHONHASHSEED=0
export HF_HOME=/models/hf

vllm serve meta-llama/Llama-3.3-70B-Instruct \
  --tensor-parallel-size 4 \
  --max-model-len 131072 \
  --gpu-memory-utilization 0.92 \
  --kv-offloading-backend native \
  --kv-offloading-size 400 \
  --enable-prefix-caching \
  --port 8000
