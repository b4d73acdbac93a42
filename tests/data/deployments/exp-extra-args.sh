#!/bin/bash
TP=4
PP=2
EXTRA_ARGS="--enable-chunked-prefill --max-num-batched-tokens 8192"
exec python3 -m vllm.entrypoints.openai.api_server \
  --model meta-llama/Llama-3.3-70B-Instruct \
  --tensor-parallel-size $TP --pipeline-parallel-size $PP \
  $EXTRA_ARGS
