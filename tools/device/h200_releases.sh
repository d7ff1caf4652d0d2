#!/bin/bash
# vLLM 0.33.0 on one nvidia-h200 beside a 0.32.0 anchor measured on the same machine: the
# committed h200 notebook by papermill (weightless), (1) the recipe's NVFP4 command on 0.33.0,
# (2) BF16 with Triton MoE on 0.33.0, (3) the recipe's NVFP4 command on 0.32.0 (the default
# release; its quality steps skipped: only its sweep is compared). One chain on GPU 0, so the
# three sweeps share the machine and the releases are compared within one session
# (tools/results_pages.py, `python -m tools.results_pages releases h200`).
#
# Calls, after the wheels (.whl, which writes /tmp/t0) and the eval wheels (.whl-eval):
#   sh tools/device/stack.sh chunk 0.33.0 K         # carry .gpu2/chunks-0.33.0/cK, all but the last
#   sh tools/device/stack.sh chunk 0.32.0 K         # the same for 0.32.0
#   bash tools/device/h200_releases.sh anchor-join K    # carry 0.32.0's last chunk cK and
#        .gpu2/0.32.0/assemble.sh: joins and unpacks 0.32.0 to /tmp/site2 in the background
#        (detached: it outlasts the call), /tmp/join-0.32.0.rc when done
#   sh tools/device/stack.sh join 0.33.0 K && bash tools/device/h200_releases.sh start
#        # carry 0.33.0's last chunk and .gpu2/0.33.0/assemble.sh: the chain `rel`
#   bash tools/device/jobs.sh until OFFSET rel; bash tools/device/h200_releases.sh collect
#
# The chain precompiles each bundle's bytecode first (compileall, 16 processes: a start imports
# vLLM in two processes, each ~10 s faster with it), waits for the 0.32.0 unpack only before
# its own run, and writes /tmp/runs/<run>/ per notebook (jobs.sh `nb`).
set -u
J="bash tools/device/jobs.sh"
R=/tmp/runs
case "${1:?usage: h200_releases.sh anchor-join K | start | collect}" in
anchor-join)
    [ -f /tmp/t0 ] || { echo "no /tmp/t0: the wheels call did not run on this machine"; exit 9; }
    # the chunk is copied to /tmp first (stack.sh), so the unpack does not depend on the tree
    rm -f /tmp/join-0.32.0.rc
    setsid nohup sh -c "sh tools/device/stack.sh join 0.32.0 ${2:?K} > /tmp/join-0.32.0.log 2>&1;
        echo \$? > /tmp/join-0.32.0.rc" < /dev/null > /dev/null 2>&1 &
    sleep 5; ls -l /tmp/chunks-0.32.0 ;;
start)
    STACK_ENV=/tmp/stack-env-0.33.0.sh . tools/device/env.sh
    python3 -c "import vllm; print('vllm', vllm.__version__)"
    $J chain rel \
        "python3 -m compileall -q -j 16 /tmp/site-0.33.0 > /dev/null 2>&1; echo bytecode 0.33.0 done" \
        "nb nv33 0 -p vllm_version 0.33.0" \
        "nb bf33 0 -p variant bf16 -p moe_backend triton -p vllm_version 0.33.0" \
        "until [ -f /tmp/join-0.32.0.rc ]; do sleep 5; done; cat /tmp/join-0.32.0.log" \
        "STACK_ENV=/tmp/stack-env.sh . tools/device/env.sh" \
        "python3 -m compileall -q -j 16 /tmp/site2 > /dev/null 2>&1; echo bytecode 0.32.0 done" \
        "nb nv32 0 -y 'quality: {items: 0}'" ;;
collect)
    [ -d $R/rel ] || { echo "no chain rel on this machine"; exit 9; }
    $J collect rel nv33 bf33 nv32 ;;
esac
nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader 2>/dev/null
