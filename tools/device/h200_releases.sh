#!/bin/bash
# vLLM 0.33.0 on one nvidia-h200 beside a 0.32.0 anchor measured on the same machine: the
# committed h200 notebook by papermill (weightless), (1) the recipe's NVFP4 command on 0.33.0,
# (2) BF16 with Triton MoE on 0.33.0, (3) the recipe's NVFP4 command on 0.32.0 (the default
# release; its quality steps skipped: only its sweep is compared). One chain on GPU 0, so the
# three sweeps share the machine and the releases are compared within one session
# (tools/results_pages.py, `python -m tools.results_pages releases h200`).
#
# Calls, after the wheels (h200_drafting.sh wheels carrying .whl, which writes /tmp/t0, then
# wheels-b carrying .whl-b) and the eval wheels (.whl-eval):
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
#
# A newer release beside 0.32.0 with a drafting point, interleaved (`pair RELEASE`, after
# `stack.sh join RELEASE K` and `anchor-join K`): the GPU's own target notebook (h100.ipynb on an
# H100, which the lender may give for an nvidia-h200 call; else h200.ipynb) four times, NVFP4 on RELEASE,
# NVFP4 on 0.32.0, MTP (the registry's K and synthetic acceptance) on RELEASE, MTP on 0.32.0,
# each without the quality step; every weightless server routes MoE tokens uniformly
# (helpers.weights.weightless), so the releases compare on their code at every concurrency.
#   sh tools/device/stack.sh join 0.34.0 K && bash tools/device/h200_releases.sh pair 0.34.0
#   bash tools/device/jobs.sh until OFFSET rel; bash tools/device/h200_releases.sh collect 0.34.0
# `pair RELEASE mtp` runs only the two MTP notebooks (RELEASE, then 0.32.0): the drafting point
# of a session whose NVFP4 pair is already committed.
set -u
J="bash tools/device/jobs.sh"
R=/tmp/runs
case "${1:?usage: h200_releases.sh anchor-join K | start | pair RELEASE [mtp] | collect [RELEASE]}" in
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
pair)
    [ -f /tmp/t0 ] || { echo "no /tmp/t0: the wheels call did not run on this machine"; exit 9; }
    rel=${2:?RELEASE, e.g. 0.34.0}; tag=$(echo "$rel" | cut -d. -f2)
    [ -f "/tmp/stack-env-$rel.sh" ] || { echo "no /tmp/stack-env-$rel.sh: stack.sh join $rel K first"; exit 1; }
    new="STACK_ENV=/tmp/stack-env-$rel.sh . tools/device/env.sh"
    old="STACK_ENV=/tmp/stack-env.sh . tools/device/env.sh"
    skip="-y 'quality: {items: 0}'"
    book=h200; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H100 && book=h100
    echo "target notebook: $book.ipynb"
    first="$new; nbx $book nv$tag 0 -p vllm_version $rel $skip"
    nv_old="$old; nbx $book nv32 0 $skip"
    mtp_new="$new; nbx $book mtp$tag 0 -p speculative mtp -p vllm_version $rel $skip"
    case "${3:-all}" in
    all) ;;
    mtp) first=$mtp_new; mtp_new="echo MTP on $rel ran first"; nv_old="echo NVFP4 pair skipped" ;;
    *) echo "pair RELEASE [mtp]: unknown mode '$3' (mtp runs only the MTP pair)"; exit 2 ;;
    esac
    # the newer release runs while 0.32.0 still unpacks in the background
    $J chain rel \
        "$new; python3 -m compileall -q -j 16 /tmp/site-$rel > /dev/null 2>&1; echo bytecode $rel done" \
        "$first" \
        "until [ -f /tmp/join-0.32.0.rc ]; do sleep 5; done; cat /tmp/join-0.32.0.log" \
        "$old; python3 -m compileall -q -j 16 /tmp/site2 > /dev/null 2>&1; echo bytecode 0.32.0 done" \
        "$nv_old" \
        "$mtp_new" \
        "$old; nbx $book mtp32 0 -p speculative mtp $skip" ;;
collect)
    [ -d $R/rel ] || { echo "no chain rel on this machine"; exit 9; }
    if [ -n "${2:-}" ]; then
        tag=$(echo "$2" | cut -d. -f2)
        $J collect rel "nv$tag" nv32 "mtp$tag" mtp32
    else
        $J collect rel nv33 bf33 nv32
    fi ;;
esac
nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader 2>/dev/null
