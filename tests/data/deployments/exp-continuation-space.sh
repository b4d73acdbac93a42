#!/bin/bash
vllm serve Qwen/Qwen2.5-14B-Instruct \ 
  --enable-prefix-caching \
  --max-model-len 16384
