# one server on GPU 0
export HF_HUB_OFFLINE=1
export CUDA_VISIBLE_DEVICES=0
export NCCL_NVLS_ENABLE=0
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NVSHMEM_DISABLE_NVLS=1
vllm serve $COOKBOOK_OUT/arch/nemotron-3.5-lightning-nvfp4 \
  --served-model-name nemotron-3.5-lightning \
  --mamba-backend flashinfer \
  --mamba-cache-mode align \
  --enable-prefix-caching \
  --max-num-batched-tokens 32768 \
  --kv-cache-dtype fp8 \
  --moe-backend humming \
  --quantization modelopt_fp4 \
  --linear-backend humming \
  --mamba-ssu-algorithm horizontal \
  --async-scheduling \
  --max-num-seqs 256 \
  --reasoning-parser nemotron_v3 \
  --enable-auto-tool-choice \
  --tool-call-parser qwen3_coder \
  --mamba-ssm-cache-dtype float16 \
  --enable-mamba-cache-stochastic-rounding \
  --mamba-cache-philox-rounds 5 \
  --tensor-parallel-size 1 \
  --max-model-len 8192 \
  --compilation-config '{"cudagraph_capture_sizes":[1,2,4,8,16,32,48,64,96,128,192,256]}' \
  --load-format dummy \
  --host 0.0.0.0 \
  --port 8000

# N replicas behind vllm-router: 2 x 1x H200 141GB (recipe's recommended command)

# replica 0
HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 CUDA_VISIBLE_DEVICES=0 \
vllm serve $COOKBOOK_OUT/arch/nemotron-3.5-lightning-nvfp4 \
  --served-model-name nemotron-3.5-lightning \
  --mamba-backend flashinfer \
  --mamba-cache-mode align \
  --enable-prefix-caching \
  --max-num-batched-tokens 32768 \
  --kv-cache-dtype fp8 \
  --moe-backend humming \
  --quantization modelopt_fp4 \
  --linear-backend humming \
  --mamba-ssu-algorithm horizontal \
  --async-scheduling \
  --max-num-seqs 256 \
  --reasoning-parser nemotron_v3 \
  --enable-auto-tool-choice \
  --tool-call-parser qwen3_coder \
  --mamba-ssm-cache-dtype float16 \
  --enable-mamba-cache-stochastic-rounding \
  --mamba-cache-philox-rounds 5 \
  --tensor-parallel-size 1 \
  --max-model-len 8192 \
  --compilation-config '{"cudagraph_capture_sizes":[1,2,4,8,16,32,48,64,96,128,192,256]}' \
  --load-format dummy \
  --host 0.0.0.0 \
  --port 8000 &

# replica 1
HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 CUDA_VISIBLE_DEVICES=1 \
vllm serve $COOKBOOK_OUT/arch/nemotron-3.5-lightning-nvfp4 \
  --served-model-name nemotron-3.5-lightning \
  --mamba-backend flashinfer \
  --mamba-cache-mode align \
  --enable-prefix-caching \
  --max-num-batched-tokens 32768 \
  --kv-cache-dtype fp8 \
  --moe-backend humming \
  --quantization modelopt_fp4 \
  --linear-backend humming \
  --mamba-ssu-algorithm horizontal \
  --async-scheduling \
  --max-num-seqs 256 \
  --reasoning-parser nemotron_v3 \
  --enable-auto-tool-choice \
  --tool-call-parser qwen3_coder \
  --mamba-ssm-cache-dtype float16 \
  --enable-mamba-cache-stochastic-rounding \
  --mamba-cache-philox-rounds 5 \
  --tensor-parallel-size 1 \
  --max-model-len 8192 \
  --compilation-config '{"cudagraph_capture_sizes":[1,2,4,8,16,32,48,64,96,128,192,256]}' \
  --load-format dummy \
  --host 0.0.0.0 \
  --port 8001 &

# router (waits for the replicas' /health)
vllm-router \
  --host 127.0.0.1 \
  --port 30000 \
  --worker-urls http://127.0.0.1:8000 http://127.0.0.1:8001 \
  --policy round_robin \
  --worker-startup-check-interval 1 \
  --worker-startup-timeout-secs 1800 \
  --health-check-interval-secs 2 \
  --health-failure-threshold 2 \
  --health-success-threshold 1 \
  --health-check-timeout-secs 5

# one server, data parallel attention + expert-parallel MoE: 2 x 1x H200 141GB (recipe's recommended command)

# server
HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 CUDA_VISIBLE_DEVICES=0,1 \
vllm serve $COOKBOOK_OUT/arch/nemotron-3.5-lightning-nvfp4 \
  --served-model-name nemotron-3.5-lightning \
  --mamba-backend flashinfer \
  --mamba-cache-mode align \
  --enable-prefix-caching \
  --max-num-batched-tokens 32768 \
  --kv-cache-dtype fp8 \
  --moe-backend humming \
  --quantization modelopt_fp4 \
  --linear-backend humming \
  --mamba-ssu-algorithm horizontal \
  --async-scheduling \
  --max-num-seqs 256 \
  --reasoning-parser nemotron_v3 \
  --enable-auto-tool-choice \
  --tool-call-parser qwen3_coder \
  --mamba-ssm-cache-dtype float16 \
  --enable-mamba-cache-stochastic-rounding \
  --mamba-cache-philox-rounds 5 \
  --tensor-parallel-size 1 \
  --max-model-len 8192 \
  --compilation-config '{"cudagraph_capture_sizes":[1,2,4,8,16,32,48,64,96,128,192,256]}' \
  --load-format dummy \
  --enable-expert-parallel \
  --data-parallel-size 2 \
  --host 0.0.0.0 \
  --port 8000 &

# one server, data parallel attention + expert-parallel MoE: 4 x 1x H200 141GB (recipe's recommended command)

# head node
HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 CUDA_VISIBLE_DEVICES=0,1 \
vllm serve $COOKBOOK_OUT/arch/nemotron-3.5-lightning-nvfp4 \
  --served-model-name nemotron-3.5-lightning \
  --mamba-backend flashinfer \
  --mamba-cache-mode align \
  --enable-prefix-caching \
  --max-num-batched-tokens 32768 \
  --kv-cache-dtype fp8 \
  --moe-backend humming \
  --quantization modelopt_fp4 \
  --linear-backend humming \
  --mamba-ssu-algorithm horizontal \
  --async-scheduling \
  --max-num-seqs 256 \
  --reasoning-parser nemotron_v3 \
  --enable-auto-tool-choice \
  --tool-call-parser qwen3_coder \
  --mamba-ssm-cache-dtype float16 \
  --enable-mamba-cache-stochastic-rounding \
  --mamba-cache-philox-rounds 5 \
  --tensor-parallel-size 1 \
  --max-model-len 8192 \
  --compilation-config '{"cudagraph_capture_sizes":[1,2,4,8,16,32,48,64,96,128,192,256]}' \
  --load-format dummy \
  --enable-expert-parallel \
  --data-parallel-size 4 \
  --data-parallel-size-local 2 \
  --data-parallel-address HEAD_NODE_IP \
  --data-parallel-rpc-port 13345 \
  --host 0.0.0.0 \
  --port 8000 &

# node 1 (headless)
HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 CUDA_VISIBLE_DEVICES=0,1 \
vllm serve $COOKBOOK_OUT/arch/nemotron-3.5-lightning-nvfp4 \
  --served-model-name nemotron-3.5-lightning \
  --mamba-backend flashinfer \
  --mamba-cache-mode align \
  --enable-prefix-caching \
  --max-num-batched-tokens 32768 \
  --kv-cache-dtype fp8 \
  --moe-backend humming \
  --quantization modelopt_fp4 \
  --linear-backend humming \
  --mamba-ssu-algorithm horizontal \
  --async-scheduling \
  --max-num-seqs 256 \
  --reasoning-parser nemotron_v3 \
  --enable-auto-tool-choice \
  --tool-call-parser qwen3_coder \
  --mamba-ssm-cache-dtype float16 \
  --enable-mamba-cache-stochastic-rounding \
  --mamba-cache-philox-rounds 5 \
  --tensor-parallel-size 1 \
  --max-model-len 8192 \
  --compilation-config '{"cudagraph_capture_sizes":[1,2,4,8,16,32,48,64,96,128,192,256]}' \
  --load-format dummy \
  --enable-expert-parallel \
  --data-parallel-size 4 \
  --data-parallel-size-local 2 \
  --data-parallel-address HEAD_NODE_IP \
  --data-parallel-rpc-port 13345 \
  --headless \
  --data-parallel-start-rank 2 &
