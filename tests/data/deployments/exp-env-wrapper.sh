#!/bin/sh
env VLLM_USE_V1=1 LMCACHE_CHUNK_SIZE=256 LMCACHE_LOCAL_CPU=True LMCACHE_MAX_LOCAL_CPU_SIZE=40 \
  vllm serve mistralai/Mistral-7B-Instruct-v0.3 \
  --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
