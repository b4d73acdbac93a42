#!/bin/sh
# The same model on a bare-metal 8 x H200 node, as first written from an old runbook (vLLM 0.33.0).
# It has the mistakes `vllm-caching review` is for: weights offload taken for KV offload, the KV tier
# sized per GPU, and a misspelt option that vLLM would refuse at start-up.
set -eu
export HF_HOME=/data/hf
vllm serve meta-llama/Llama-3.1-70B-Instruct \
    --tensor-parallel-size 8 \
    --cpu-offload-gb 200 \
    --kv-offloading-size 160 \
    --kv-offloading-backend native \
    --max-modle-len 131072 \
    --port 8000
