export VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random
export HF_HUB_OFFLINE=1
export TORCHINDUCTOR_COMPILE_THREADS=2
vllm serve cookbook/arch/nemotron-3.5-lightning-nvfp4 \
  --served-model-name nemotron-3.5-lightning \
  --mamba-backend flashinfer \
  --mamba-cache-mode align \
  --enable-prefix-caching \
  --max-num-batched-tokens 32768 \
  --kv-cache-dtype fp8 \
  --moe-backend marlin \
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
  --load-format dummy \
  --gpu-memory-utilization 0.2 \
  --kv-cache-memory-bytes 4294967296 \
  --host 0.0.0.0 \
  --port 8000
