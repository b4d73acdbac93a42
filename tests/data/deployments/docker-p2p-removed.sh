docker run --gpus all --ipc=host vllm/vllm-openai:v0.33.0 \
  --model Qwen/Qwen2.5-7B-Instruct \
  --kv-transfer-config '{"kv_connector":"P2pNcclConnector","kv_role":"kv_producer"}'
