#!/bin/bash
docker run --runtime nvidia --gpus all --ipc=host -p 8000:8000 \
  --env "LMCACHE_LOCAL_CPU=True" --env "LMCACHE_MAX_LOCAL_CPU_SIZE=20" \
  lmcache/vllm-openai:v0.3.9 \
  serve Qwen/Qwen3-8B \
  --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
