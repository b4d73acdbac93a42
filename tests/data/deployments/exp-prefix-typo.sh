#!/bin/bash
# prefix of a long option, and an option that does not exist
vllm serve meta-llama/Llama-3.1-8B-Instruct \
    --max-num-seq 128 \
    --gpu-memory-utilisation 0.92 \
    --enable-prefix-caching
