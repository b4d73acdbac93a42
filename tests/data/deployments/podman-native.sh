#!/bin/bash
IMAGE=docker.io/vllm/vllm-openai:v0.20.2
podman run --rm --device nvidia.com/gpu=all -p 8000:8000 --ipc=host \
  -e PYTHONHASHSEED=0 \
  $IMAGE \
  --model Qwen/Qwen2.5-7B-Instruct --kv-offloading-backend native --kv-offloading-size 32 \
  --disable-hybrid-kv-cache-manager
