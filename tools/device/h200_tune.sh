#!/bin/bash
# The tuning grid on one nvidia-h200 (tools/device/tune_h200.py), as a detached job (jobs.sh)
# that outlasts one 10-minute device call; resumable across sessions. After the 0.32.0 stack
# is unpacked (stack.sh chunk/join 0.32.0), each call is one of:
#
#   bash tools/device/h200_tune.sh start BUDGET_LEFT_S [tune_h200.py args...]   # after the
#        wheels calls (h200_drafting.sh wheels carrying .whl, then wheels-b carrying .whl-b)
#        (carry out/tune-h200 too when an earlier session measured part of it: it resumes)
#   bash tools/device/h200_tune.sh wait [SECS]      # until the job ends (default 540 s)
#   bash tools/device/h200_tune.sh collect          # $OUT/tune.tar.gz: points, tune.json, plots
#
# The job runs `tune_h200.py --out out/tune-h200 --budget-s BUDGET_LEFT_S-120` (a candidate
# starts only when its budget, --candidate-s, is left; 120 s kept for collect). Then commit
# out/tune-h200/grid as docs/results/h200/tune/grid-0.32.0/ and rebuild the notebooks. --c1
# adds the concurrency-1 decode candidates; --releases 0.28.0 the grid's 256-sequence
# candidates on 0.28.0 (run in that stack's environment, same --out).
#
# `start` first precompiles the bundle's Python bytecode once per machine (compileall, 16
# processes) and times `import vllm.entrypoints.openai.api_server` without bytecode and with
# it ($OUT-bound in /tmp/runs/tune/bytecode.txt): the bundle is packed without __pycache__,
# so a machine's first server start would otherwise compile every module it imports, in each
# of its processes. `collect` copies the points measured so far (also while a candidate still
# runs: a cut-off session keeps them, and the next one resumes), the compile caches' sizes, and
# the caches themselves as $OUT/compile-caches.tar.gz when they fit one returned file: copy it to
# .cache-h200/ (ignored by git); the next session carries that folder in a call of its own
# (`mkdir -p /tmp/cache-h200 && cp .cache-h200/* /tmp/cache-h200/`), and `start` unpacks it
# before the first server starts.
#
# DRY=1 rehearses the same calls on any machine with the CPU stand-in (tune_h200.py --stand-in:
# tiny workloads, a 45 s budget per candidate), so the control flow is tried before a session.
set -u
J="bash tools/device/jobs.sh"
R=/tmp/runs
out=${TUNE_OUT:-$PWD/out/tune-h200}
[ "${DRY:-0}" = 1 ] && { export OUT=${OUT:-/tmp/tune-dry-out}; mkdir -p "$OUT"; }
secs() { awk -v a="$2" -v b="$EPOCHREALTIME" -v w="$1" 'BEGIN { printf "%s: %.1f s\n", w, b - a }'; }
precompile() {  # once per machine: the bundle's bytecode, timed before and after
    local site=${PYTHONPATH%%:*} imp="import vllm.entrypoints.openai.api_server" t
    [ -d "$site" ] && [ ! -f "$site/.bytecode-done" ] || return 0
    mkdir -p $R/tune
    # stack.sh's import check wrote some: start from none, as the bundle arrives
    find "$site" -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null
    t=$EPOCHREALTIME; PYTHONDONTWRITEBYTECODE=1 python3 -c "$imp" 2>/dev/null
    secs "import without bytecode" "$t" | tee $R/tune/bytecode.txt
    t=$EPOCHREALTIME; python3 -m compileall -q -j 16 "$site" > /dev/null 2>&1
    secs "compileall -j 16" "$t" | tee -a $R/tune/bytecode.txt
    t=$EPOCHREALTIME; python3 -c "$imp" 2>/dev/null
    secs "import with bytecode" "$t" | tee -a $R/tune/bytecode.txt
    touch "$site/.bytecode-done"
}
snapshot() {  # what the job measured so far, and the caches a later session could carry
    mkdir -p $R/tune && rm -rf $R/tune/out && cp -r "$out" $R/tune/out 2>/dev/null
    cp -r "${COOKBOOK_OUT:-/tmp/cookbook-out}/logs" $R/tune/ 2>/dev/null
    # the helpers keep vLLM's and Triton's caches under $COOKBOOK_OUT/cache/<release>-<arch>/
    du -sm "${COOKBOOK_OUT:-/tmp/cookbook-out}"/cache/*/* ~/.cache/flashinfer ~/.cache/torch \
        2>/dev/null > $R/tune/caches-mib.txt
    # bring the compile caches back for the next session's machine (carry .cache-h200/), when
    # they fit one returned file (16 MiB): vLLM's torch.compile and Triton caches with
    # FlashInfer's JIT kernels, else FlashInfer's alone (the SSU kernel, 28 s of a first start)
    [ "${DRY:-0}" = 1 ] || [ -z "${OUT:-}" ] && return 0
    local cache="${COOKBOOK_OUT:-/tmp/cookbook-out}/cache" mib
    mib=$(du -sm "$cache" 2>/dev/null | cut -f1)
    rm -f "$OUT/compile-caches.tar.gz"
    [ "${mib:-0}" -le 200 ] && tar czf "$OUT/compile-caches.tar.gz" -C / "${cache#/}" \
        root/.cache/flashinfer 2>/dev/null
    if [ "$(stat -c %s "$OUT/compile-caches.tar.gz" 2>/dev/null || echo 0)" -gt 16000000 ] ||
        [ ! -f "$OUT/compile-caches.tar.gz" ]; then
        tar czf "$OUT/compile-caches.tar.gz" -C / root/.cache/flashinfer 2>/dev/null
    fi
    true
}
restore_caches() {  # what an earlier session brought back: its own call copied .cache-h200/
    local f=/tmp/cache-h200/compile-caches.tar.gz  # to /tmp/cache-h200/ (64 MiB a call)
    [ -f $f ] || return 0
    tar xzf $f -C / && echo "compile caches restored:" &&
        tar tzf $f | awk -F/ 'NF>3 {print "/"$1"/"$2"/"$3"/"$4}' | sort -u
}
case "${1:?usage: h200_tune.sh start BUDGET_LEFT_S [args] | wait [SECS] | collect}" in
start)
    budget=${2:?start needs BUDGET_LEFT_S}; shift 2
    if [ "${DRY:-0}" = 1 ]; then
        py="${PYTHON:-$PWD/.venv/bin/python} tools/device/tune_h200.py --stand-in --candidate-s 45"
    else
        . tools/device/env.sh
        precompile
        restore_caches
        py="python3 tools/device/tune_h200.py"
    fi
    $J chain tune "$py --out $out --budget-s $(( budget - 120 )) $*" ;;
wait)
    $J wait "${2:-540}" tune ;;
collect)
    snapshot; $J collect tune ;;
esac
[ "${DRY:-0}" = 1 ] || nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader
