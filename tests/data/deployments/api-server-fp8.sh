#!/bin/sh
# Older launch style kept in a systemd unit: the OpenAI API server module.
exec python3 -m vllm.entrypoints.openai.api_server \
    --model Qwen/Qwen2.5-72B-Instruct \
    --tensor-parallel-size=8 \
    --kv-cache-dtype fp8 \
    --calculate-kv-scales \
    --cpu-offload-gb 80 \
    --host 0.0.0.0 --port 8000
