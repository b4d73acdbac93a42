#!/bin/bash
MAX_LEN=${MAX_LEN-}
vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len $MAX_LEN --enforce-eager
