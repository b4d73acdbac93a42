#!/bin/bash
vllm serve Qwen/Qwen3-8B --kv-transfer-config '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":34359738368,"secondary_tiers":[{"type":"fs_python","path":"/mnt/nvme/kv"}]}}'
