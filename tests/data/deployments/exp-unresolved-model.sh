#!/bin/bash
# MODEL_PATH comes from the caller
CUDA_VISIBLE_DEVICES=0,1 vllm serve $MODEL_PATH --tensor-parallel-size 2 --port "$((8000 + 1))"
