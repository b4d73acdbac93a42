#!/bin/bash
# Two LMCache config files are given with this script; LMCACHE_CONFIG_FILE names one of them, so the
# other (lmcache-config.yaml, with local_cpu off and async loading from disk) is not this server's.
export LMCACHE_CONFIG_FILE=/etc/lmcache/lmcache-prod.yaml
export PYTHONHASHSEED=0
vllm serve Qwen/Qwen3-8B \
  --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
