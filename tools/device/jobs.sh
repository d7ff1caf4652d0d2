#!/bin/bash
# Detached jobs on the device machine, so a run can outlast one device call (10 min) while the
# machine stays held: each job runs in its own session (setsid) and leaves /tmp/runs/NAME/
# {log,rc,...}. Run from the repository root after `. tools/device/env.sh`.
#
#   bash tools/device/jobs.sh chain NAME 'CMD1' 'CMD2' ...  # start: CMDs one after another
#   bash tools/device/jobs.sh wait SECONDS NAME...          # until all end, or SECONDS pass
#   bash tools/device/jobs.sh collect NAME...               # $OUT/NAME.tar.gz per job
#   bash tools/device/jobs.sh until OFFSET NAME             # wait until /tmp/t0 + OFFSET s
#        (t0: `date +%s > /tmp/t0` in a session's first call); NAME is a chain or one of its
#        runs (done when its rc is written); exits 9 at once when no chain was started, so a
#        batch's later calls cost seconds after a failed start
#
# A chain runs from its own copy of the working tree (/tmp/tree-NAME, taken when it starts):
# every device call copies the working tree again, and a notebook importing the helpers while
# that copy is made can find a module missing (seen 2026-12-02: `No module named
# 'helpers.server.failures_setup'` six seconds into a run, while the next call began).
#
# Inside a CMD, `nb RUN GPU PAPERMILL_ARGS...` executes notebooks/h200.ipynb with papermill on
# GPU (CUDA_VISIBLE_DEVICES), stand_in=False weightless=True, outputs under /tmp/runs/RUN;
# `nbx NOTEBOOK RUN GPU ...` does the same for another notebook.
set -u
RUNS=/tmp/runs
nb() {
    local run=$1 gpu=$2; shift 2
    mkdir -p "$RUNS/$run"
    echo "$(date -u +%T) start $run on GPU $gpu: $*"
    CUDA_VISIBLE_DEVICES=$gpu COOKBOOK_OUT="$RUNS/$run/out" python3 -m papermill \
        notebooks/h200.ipynb "$RUNS/$run/$run.ipynb" -k python3 --cwd notebooks --log-output \
        --execution-timeout 1800 -p stand_in False -p weightless True "$@" \
        > "$RUNS/$run/papermill.log" 2>&1
    local rc=$?
    echo $rc > "$RUNS/$run/rc"
    echo "$(date -u +%T) end $run rc=$rc"
}
# `nbx NOTEBOOK RUN GPU PAPERMILL_ARGS...`: any notebook of notebooks/ (name without .ipynb),
# stand_in=False weightless=True install=False, outputs under /tmp/runs/RUN (e.g. the
# speculative-decoding notebook: nbx speculative_decoding spec 0 -p target h200 -y "modes: [none, mtp]").
nbx() {
    local book=$1 run=$2 gpu=$3; shift 3
    mkdir -p "$RUNS/$run"
    echo "$(date -u +%T) start $run ($book) on GPU $gpu: $*"
    CUDA_VISIBLE_DEVICES=$gpu COOKBOOK_OUT="$RUNS/$run/out" python3 -m papermill \
        "notebooks/$book.ipynb" "$RUNS/$run/$run.ipynb" -k python3 --cwd notebooks --log-output \
        --execution-timeout 3000 -p stand_in False -p weightless True -p install False "$@" \
        > "$RUNS/$run/papermill.log" 2>&1
    local rc=$?
    echo $rc > "$RUNS/$run/rc"
    echo "$(date -u +%T) end $run rc=$rc"
}
export -f nb nbx
export RUNS
case "$1" in
chain)
    name=$2; shift 2; mkdir -p "$RUNS/$name"; rm -f "$RUNS/$name/done"
    tree=/tmp/tree-$name; rm -rf "$tree"; mkdir -p "$tree"
    tar cf - --exclude=./.gpu2 --exclude=./.whl --exclude=./.whl-b --exclude=./.whl-eval --exclude=./.venv --exclude=./out . |
        tar xf - -C "$tree" || { echo "could not copy the tree to $tree"; exit 1; }
    script="cd $tree && export PYTHONPATH=$tree:\$PYTHONPATH; "
    for c in "$@"; do script="$script$c; "; done
    setsid nohup bash -c "$script echo done > $RUNS/$name/done" > "$RUNS/$name/log" 2>&1 < /dev/null &
    echo "started $name (pid $!) in $tree" ;;
wait)
    secs=$2; shift 2; end=$(( $(date +%s) + secs ))
    while [ "$(date +%s)" -lt $end ]; do
        all=1; for n in "$@"; do [ -f "$RUNS/$n/done" ] || [ -f "$RUNS/$n/rc" ] || all=0; done
        [ $all = 1 ] && break
        sleep 10
    done
    for n in "$@"; do
        echo "== $n: $( [ -f $RUNS/$n/done ] || [ -f $RUNS/$n/rc ] && echo done || echo running)"
        tail -5 "$RUNS/$n/log" 2>/dev/null || tail -3 "$RUNS/$n/papermill.log" 2>/dev/null
    done
    nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv ;;
until)
    offset=$2; name=$3
    # a run of a chain has no folder until its turn: wait for it while any chain is there
    [ -f /tmp/t0 ] && { [ -d "$RUNS/$name" ] || ls "$RUNS"/*/log > /dev/null 2>&1; } ||
        { echo "no chain on this machine (or no /tmp/t0): nothing to wait for"; exit 9; }
    secs=$(( $(cat /tmp/t0) + offset - $(date +%s) )); [ $secs -gt 0 ] || secs=1
    echo "t0+$(( $(date +%s) - $(cat /tmp/t0) )) s: waiting up to $secs s for $name"
    exec bash "$0" wait "$secs" "$name" ;;
collect)
    shift
    for n in "$@"; do
        python3 - "$RUNS/$n" "$OUT/$n.tar.gz" <<'PY'
import sys, tarfile, pathlib
src, dst = pathlib.Path(sys.argv[1]), sys.argv[2]
skip = ("/cache/", "/arch/", "/models/", "/run/")
with tarfile.open(dst, "w:gz") as t:
    for p in sorted(src.rglob("*")):
        if p.is_file() and not any(s in str(p) for s in skip) and p.stat().st_size < 50_000_000:
            t.add(p, arcname=str(p.relative_to(src.parent)))
print(dst, pathlib.Path(dst).stat().st_size)
PY
    done ;;
esac
