# Qwen3-Next on 2 GPUs with the LMCache backend, from the official image.
docker run --rm --gpus all --ipc=host -p 8000:8000 \
  -v /models:/root/.cache/huggingface \
  -e LMCACHE_LOCAL_CPU=True \
  -e LMCACHE_MAX_LOCAL_CPU_SIZE=20 \
  -e HF_TOKEN \
  vllm/vllm-openai:v0.21.0-cu130 \
  --model Qwen/Qwen3-Next-80B-A3B-Instruct \
  --tensor-parallel-size 2 \
  --kv-offloading-backend lmcache \
  --kv-offloading-size 80 \
  --disable-hybrid-kv-cache-manager
