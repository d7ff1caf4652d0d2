#!/bin/bash
# Drafting and prefix reuse on one nvidia-h200 (tools/device/drafting_h200.py), weightless, in
# one device session. Here first, `bash tools/device/h200_drafting.sh sizes`: every carry below
# must fit 64 MiB with the tree (exit 1 if one does not). Calls, each guarded (a call on a
# fresh machine exits 9 at once):
#   bash tools/device/h200_drafting.sh wheels        # ALONE first: carry .whl; writes /tmp/t0
#   bash tools/device/h200_drafting.sh wheels-b      # first of the batch: carry .whl-b (the
#        wheels that do not fit beside the tree in the first call's 64 MiB)
#   sh tools/device/stack.sh chunk 0.32.0 K          # carry .gpu2/chunks-0.32.0/cK, all but the last
#   bash tools/device/h200_drafting.sh start LAST BUDGET_S [WAVES]   # carry the last chunk and
#        .gpu2/0.32.0/assemble.sh: joins and unpacks the bundle, starts the chain `draft` with
#        every server stopped by /tmp/t0 + BUDGET_S, then waits until t0 + 560
#   bash tools/device/h200_drafting.sh wait OFFSET   # until the chain ends or t0 + OFFSET; collect
# BUDGET_S: the device seconds left after the wheels call, minus about 90 (the last collect).
# WAVES: drafting_h200.py --waves (default 1,2, run 2026-12-05; then 4,3 or 5), then optionally
#   RELEASE:WAVES (e.g. 0.34.0:6) in that release's stack, after `sh tools/device/stack.sh join
#   RELEASE N` (its chunks and .gpu2/RELEASE/assemble.sh carried in calls before `start`), or
#   `tune [tune_h200.py args]`: the tuning step's drafting candidates, co-tenant
#   (tune_h200.py --no-grid --drafting --co-tenant, e.g. --only recipe mtp-k7 dspark-k7 ...), or
#   `lora [lora_overhead_h200.py args]`: LoRA adapters' overhead, two co-tenant waves of two
#   (base + base-marlin, then lora-r8 + lora-r32), every server stopped by the deadline.
#   bash tools/device/h200_drafting.sh release RELEASE BUDGET_S [WAVES]   # RELEASE alone (default
#        wave 6), after `sh tools/device/stack.sh join RELEASE N`: e.g. a new release's first start
#        when the budget left holds one stack, not two
# DRAFT_ONLY=a,b (environment): start only these servers of each wave (drafting_h200.py --only),
#   e.g. DRAFT_ONLY=none-as-loaded,none-uniform on an 80 GB GPU, which holds two co-tenants.
set -u
J="bash tools/device/jobs.sh"
R=/tmp/runs
# RELEASE's stack must be joined before anything runs in it
need_stack() { [ -f "/tmp/stack-env-$1.sh" ] || { echo "no /tmp/stack-env-$1.sh: join vLLM $1's chunks first (stack.sh join $1 N)"; exit 1; }; }
# the drafting run in RELEASE's stack: release_run RELEASE DEADLINE WAVES
release_run() { echo "COOKBOOK_OUT=$R/draft/cookbook python3 tools/device/drafting_h200.py --out $R/draft/out-$1 --deadline $2 --waves $3 --release $1${DRAFT_ONLY:+ --only $DRAFT_ONLY}"; }
case "${1:?usage: h200_drafting.sh sizes | wheels | wheels-b | start LAST BUDGET_S [WAVES [RELEASE:WAVES] | tune ARGS... | lora ARGS...] | release RELEASE BUDGET_S [WAVES] | wait OFFSET}" in
wheels)  # ALONE, the session's first call: carry .whl (tree + carry under 64 MiB: `sizes`)
    date +%s > /tmp/t0
    sh tools/device/wheels.sh .whl && ls /tmp/wheels | wc -l
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader ;;
wheels-b)  # the batch's first call: carry .whl-b, the rest of the kit
    [ -f /tmp/t0 ] || { echo "no /tmp/t0: the wheels call did not run on this machine"; exit 9; }
    sh tools/device/wheels.sh .whl-b && ls /tmp/wheels | wc -l ;;
start)
    [ -f /tmp/t0 ] || { echo "no /tmp/t0: the wheels call did not run on this machine"; exit 9; }
    sh tools/device/stack.sh join 0.32.0 "${2:?LAST}" || exit 1
    . tools/device/env.sh
    deadline=$(( $(cat /tmp/t0) + ${3:?BUDGET_S} ))
    what=${4:-}
    case "$what" in tune|lora)  # the script's own arguments, quoted for the chain's bash -c
        shift 4; extra=""; [ $# -gt 0 ] && extra=$(printf '%q ' "$@") ;;  # none: nothing, not ''
    esac
    if [ "$what" = tune ]; then  # the tuning step's drafting part, co-tenant (tune_h200.py)
        # the budget left when the job starts, at least 1 s (0 would mean "no limit")
        run="COOKBOOK_OUT=$R/draft/cookbook python3 tools/device/tune_h200.py --no-grid --drafting --co-tenant --out $R/draft/out --budget-s \$(( (left = $deadline - \$(date +%s)) > 1 ? left : 1 )) $extra"
    elif [ "$what" = lora ]; then  # LoRA adapters' overhead, co-tenant (lora_overhead_h200.py; e.g. --variant bf16)
        run="COOKBOOK_OUT=$R/draft/cookbook python3 tools/device/lora_overhead_h200.py --out $R/draft/out --deadline $deadline $extra"
    else
        # RELEASE:WAVES runs after WAVES, with the last RELEASE_S (default 540) of the budget
        first=$deadline; [ -n "${5:-}" ] && first=$(( deadline - ${RELEASE_S:-540} ))
        run="COOKBOOK_OUT=$R/draft/cookbook python3 tools/device/drafting_h200.py --out $R/draft/out --deadline $first --waves ${4:-1,2}${DRAFT_ONLY:+ --only $DRAFT_ONLY}"
        if [ -n "${5:-}" ]; then  # RELEASE:WAVES next, in that release's stack (joined before)
            case "$5" in *?:?*) ;; *) echo "RELEASE:WAVES, e.g. 0.34.0:6 (got '$5')"; exit 2 ;; esac
            rel=${5%%:*}
            need_stack "$rel"
            run="$run; STACK_ENV=/tmp/stack-env-$rel.sh . tools/device/env.sh; python3 -m compileall -q -j 16 /tmp/site-$rel > /dev/null 2>&1; $(release_run "$rel" "$deadline" "${5#*:}")"
        fi
    fi
    $J chain draft \
        "python3 -m compileall -q -j 16 /tmp/site2 > /dev/null 2>&1; echo bytecode done" "$run"
    $J until 560 draft
    $J collect draft ;;
release)  # RELEASE alone, its chunks joined before (stack.sh join RELEASE N): no 0.32.0 stack
    [ -f /tmp/t0 ] || { echo "no /tmp/t0: the wheels call did not run on this machine"; exit 9; }
    rel=${2:?RELEASE, e.g. 0.34.0}
    need_stack "$rel"
    deadline=$(( $(cat /tmp/t0) + ${3:?BUDGET_S} ))
    STACK_ENV=/tmp/stack-env-$rel.sh . tools/device/env.sh
    $J chain draft "python3 -m compileall -q -j 16 /tmp/site-$rel > /dev/null 2>&1; echo bytecode done" \
        "$(release_run "$rel" "$deadline" "${4:-6}")"
    $J until 560 draft
    $J collect draft ;;
sizes)  # HERE, before a session: each carry beside the tree as the lender counts it (a tar)
    tree=$(git ls-files | tar -cf - -T - 2>/dev/null | wc -c)  # the tree, counted once
    over=0
    for c in .whl .whl-b .gpu2/chunks-*/c*; do
        [ -e "$c" ] || continue
        # tree + carry as two archives: their end blocks count twice, a few KiB on the safe side
        n=$(( tree + $(find "$c" -type f | tar -cf - -T - 2>/dev/null | wc -c) ))
        big=""; [ "$n" -gt 67108864 ] && { over=1; big=": over 64 MiB, the call is refused; cut smaller (stack.sh)"; }
        printf '%-28s %3d MiB%s\n' "$c" $((n >> 20)) "$big"
    done
    exit $over ;;
wait)
    [ -f /tmp/t0 ] && [ -d $R/draft ] || { echo "no chain draft on this machine"; exit 9; }
    [ -f $R/draft/done ] || $J until "${2:?OFFSET}" draft
    $J collect draft
    du -sh $R/draft/cookbook/cache 2>/dev/null ;;
esac
nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader 2>/dev/null
