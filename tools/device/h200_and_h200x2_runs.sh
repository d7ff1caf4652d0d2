#!/bin/bash
# One resumable device call of the run that measured the BF16 h200 notebook, the 1M-token
# long-context point and the 2x H200 layouts (docs/results/h200x2.md) on one nvidia-h200-x2
# machine, after `stack.sh part 00..03` and `stack.sh assemble 04`. Every call is the same:
#
#   bash tools/device/h200_and_h200x2_runs.sh BUDGET_LEFT_S      # carry .whl (first call)
#
# BUDGET_LEFT_S: the device seconds the session has left when the call starts (the previous
# call's lease.budget_left_s). What one call does, whatever it finds:
#   1. first call: start the BF16 notebook on GPU 0 (`nb bf16 0 -p variant bf16`) and the 1M
#      point on GPU 1 (long_context.py --lengths 1048576), both as detached jobs (jobs.sh);
#   2. when both have ended, start the 2x H200 run (run_h200x2.py, both GPUs) with a
#      --deadline that fits the budget left (at most 620 s); replica 1 gets a copy of the
#      Triton kernels the 1M server compiled (replica 0 and DP+EP share that folder anyway);
#   3. if the budget gets too short for the 2x run while GPU 0/1 jobs still run, stop them
#      (their chain's process group, then the process group of each process on a GPU) and
#      start the 2x run anyway;
#   4. before the call's 10 minutes end: $OUT/<job>.tar.gz for every job that ended since
#      the last call (jobs.sh collect).
# DRY=1 replaces the measurements by sleeps (a rehearsal of the control flow on any machine).
set -u
budget=${1:?usage: h200_and_h200x2_runs.sh BUDGET_LEFT_S}
call_end=${CALL_END:-560}          # seconds into this call at which collecting starts
x2_cap=${X2_CAP:-620}              # longest --deadline for the 2x run
reserve=${RESERVE:-210}            # device seconds kept after the 2x run (collect, margin)
x2_min=${X2_MIN:-540}              # the least --deadline worth stopping the 1-GPU jobs for
J="bash tools/device/jobs.sh"
R=/tmp/runs
if [ "${DRY:-0}" = 1 ]; then
    mkdir -p "${OUT:=/tmp/step-dry-out}"; export OUT
    BF16="sleep ${DRY_BF16:-20}"; LONG="sleep ${DRY_LONG:-10}"; X2="sleep 15; echo deadline"
else
    . tools/device/env.sh
    BF16="nb bf16 0 -p variant bf16"
    LONG="CUDA_VISIBLE_DEVICES=1 python3 tools/device/long_context.py --variant nvfp4 --lengths 1048576 --out \$RUNS/longctx1m/out"
    X2="python3 tools/device/run_h200x2.py --out \$RUNS/x2/out --deadline"
fi
left() { echo $(( budget - SECONDS )); }
say() { echo "[step $(date -u +%T) +${SECONDS}s left~$(left)s] $*"; }
ended() { [ -f "$R/$1/done" ]; }

if [ ! -f "$R/gpu0/log" ]; then
    $J chain gpu0 "$BF16" | tee "$R.gpu0.started"
    $J chain gpu1 "$LONG" | tee "$R.gpu1.started"
fi

start_x2() {
    local d=$1
    if [ "${DRY:-0}" != 1 ]; then
        mkdir -p /tmp/cookbook-out/cache/replica1
        [ -d /tmp/cookbook-out/cache/triton ] && cp -rn /tmp/cookbook-out/cache/triton /tmp/cookbook-out/cache/replica1/
    fi
    say "starting the 2x run, --deadline $d"
    $J chain x2 "$X2 $d"
}

stop_gpu_jobs() {
    for n in gpu0 gpu1; do
        ended $n && continue
        pid=$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' "$R.$n.started" 2>/dev/null)
        say "stopping $n (process group $pid) for the 2x run"
        [ -n "$pid" ] && kill -TERM -- -"$pid" 2>/dev/null
        echo "stopped for the 2x run at +${SECONDS}s" > "$R/$n/stopped"
    done
    if [ "${DRY:-0}" != 1 ]; then
        for p in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null); do
            g=$(ps -o pgid= -p "$p" | tr -d ' ')
            [ -n "$g" ] && say "stopping process group $g (GPU process $p)" && kill -TERM -- -"$g" 2>/dev/null
        done
        sleep 20
        for p in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    fi
    for n in gpu0 gpu1; do [ -f "$R/$n/done" ] || echo stopped > "$R/$n/done"; done
}

while [ $SECONDS -lt "$call_end" ]; do
    if [ ! -f "$R/x2/log" ]; then
        if ended gpu0 && ended gpu1; then
            d=$(( $(left) - reserve )); [ $d -gt "$x2_cap" ] && d=$x2_cap
            start_x2 "$d"
        elif [ $(( $(left) - reserve )) -lt "$x2_min" ]; then
            stop_gpu_jobs
            start_x2 $(( $(left) - reserve ))
        fi
    elif ended x2; then
        break
    fi
    sleep 5
done

for n in gpu0 gpu1 x2; do
    if ended $n && [ ! -f "$R/$n/.collected" ]; then
        case $n in gpu0) jobs="gpu0 bf16" ;; gpu1) jobs="gpu1 longctx1m" ;; *) jobs=x2 ;; esac
        $J collect $jobs && touch "$R/$n/.collected"
    fi
done
for n in gpu0 gpu1 x2; do
    echo "== $n: $( [ -f $R/$n/log ] || echo 'not started'; ended $n && echo ended) $(cat $R/$n/stopped 2>/dev/null)"
    tail -4 "$R/$n/log" 2>/dev/null
done
[ "${DRY:-0}" = 1 ] || nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv
say "call ends"
