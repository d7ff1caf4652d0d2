#!/bin/bash
# The tuning grid on one nvidia-h200 (tools/device/tune_h200.py), as a detached job (jobs.sh)
# that outlasts one 10-minute device call; resumable across sessions. After the 0.32.0 stack
# is unpacked (stack.sh chunk/join 0.32.0), each call is one of:
#
#   bash tools/device/h200_tune.sh start BUDGET_LEFT_S [tune_h200.py args...]   # carry .whl
#        (carry out/tune-h200 too when an earlier session measured part of it: it resumes)
#   bash tools/device/h200_tune.sh wait [SECS]      # until the job ends (default 540 s)
#   bash tools/device/h200_tune.sh collect          # $OUT/tune.tar.gz: points, tune.json, plots
#
# The job runs `tune_h200.py --out out/tune-h200 --budget-s BUDGET_LEFT_S-120` (a candidate
# starts only when about 600 s of budget are left for it; 120 s kept for collect). Then commit
# out/tune-h200/{grid,c1}/tune.json as docs/results/h200/tune/{grid,c1}-vllm-0.32.0.json and
# rebuild the notebooks. --c1 adds the concurrency-1 decode candidates; --releases 0.28.0 the
# grid's 256-sequence candidates on 0.28.0 (run in that stack's environment, same --out).
#
# DRY=1 rehearses the same calls on any machine with the CPU stand-in (tune_h200.py --stand-in:
# tiny workloads, a 45 s budget per candidate), so the control flow is tried before a session.
set -u
J="bash tools/device/jobs.sh"
R=/tmp/runs
out=${TUNE_OUT:-$PWD/out/tune-h200}
[ "${DRY:-0}" = 1 ] && { export OUT=${OUT:-/tmp/tune-dry-out}; mkdir -p "$OUT"; }
case "${1:?usage: h200_tune.sh start BUDGET_LEFT_S [args] | wait [SECS] | collect}" in
start)
    budget=${2:?start needs BUDGET_LEFT_S}; shift 2
    if [ "${DRY:-0}" = 1 ]; then
        py="${PYTHON:-.venv/bin/python} tools/device/tune_h200.py --stand-in --candidate-s 45"
    else
        . tools/device/env.sh
        py="python3 tools/device/tune_h200.py"
    fi
    keep="mkdir -p $R/tune && rm -rf $R/tune/out && cp -r $out $R/tune/out && cp -r \${COOKBOOK_OUT:-out}/logs $R/tune/ 2>/dev/null"
    $J chain tune "$py --out $out --budget-s $(( budget - 120 )) $*" "$keep" ;;
wait)
    $J wait "${2:-540}" tune ;;
collect)
    $J collect tune ;;
esac
[ "${DRY:-0}" = 1 ] || nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader
