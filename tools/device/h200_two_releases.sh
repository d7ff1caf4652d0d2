#!/bin/bash
# Third device session of docs/results/h200.md (one nvidia-h200): the committed h200 notebook, by
# papermill, (1) BF16 on vLLM 0.32.0 with moe_backend="triton" and (2) NVFP4 on the seeds'
# pin vLLM 0.28.0 (vllm_version="0.28.0"), one after the other on GPU 0. After the 0.32.0
# stack is unpacked (stack.sh chunk/join 0.32.0), each call is one of:
#
#   bash tools/device/h200_two_releases.sh start-bf16    # carry .whl; starts job bf16
#   sh tools/device/stack.sh chunk 0.28.0 K             # while bf16 runs (carry cK)
#   sh tools/device/stack.sh join 0.28.0 N              # last chunk: /tmp/site-0.28.0
#   bash tools/device/h200_two_releases.sh next [SECS]   # waits for bf16 (at most SECS,
#        default 540), collects it into $OUT/bf16.tar.gz and starts job nv28 on vLLM 0.28.0
#   bash tools/device/h200_two_releases.sh collect [SECS]  # waits for nv28, collects it
#
# Jobs are detached (jobs.sh), so a call may end while one runs; `nb` is jobs.sh's papermill
# runner (stand_in=False, weightless=True).
set -u
J="bash tools/device/jobs.sh"
R=/tmp/runs
case "${1:?usage: h200_two_releases.sh start-bf16 | next [SECS] | collect [SECS]}" in
start-bf16)
    . tools/device/env.sh
    $J chain bf16 "nb bf16 0 -p variant bf16 -p moe_backend triton" ;;
next)
    . tools/device/env.sh
    $J wait "${2:-540}" bf16
    if [ -f $R/bf16/done ]; then
        $J collect bf16
        STACK_ENV=/tmp/stack-env-0.28.0.sh . tools/device/env.sh
        python3 -c "import vllm; print('vllm', vllm.__version__)"
        $J chain nv28 "nb nv28 0 -p variant nvfp4 -p vllm_version 0.28.0"
    fi ;;
collect)
    . tools/device/env.sh
    $J wait "${2:-540}" nv28
    [ -f $R/nv28/done ] && $J collect nv28 ;;
esac
nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader
