#!/bin/sh
# Execute notebooks/h200.ipynb with papermill on the offline H200, from the repository root,
# after the export line of the offline torch + vLLM bundle (see tools/device/README.md):
#
#   line=$(sh .gpu2/0.32.0/assemble.sh /tmp/parts-0.32.0) && eval "$line"
#   sh tools/device/run_notebook.sh KERNEL_WHEELS_DIR OUT_NAME [papermill -p/-y args...]
#
# KERNEL_WHEELS_DIR holds the wheels of tools/device/notebook-kernel-requirements.txt;
# they are unpacked once into /tmp/kernel-site (Python's zipfile, no pip, no network) and put
# on PYTHONPATH after the bundle, with the repository itself (so `import helpers` needs no
# install). The executed notebook lands in $OUT/OUT_NAME.ipynb; the server log, the benchmark
# JSONs and the plots in out/ (copied to $OUT/out-OUT_NAME/ at the end).
# Example (NVFP4 with the recipe's flags, then with Marlin MoE, then BF16):
#   sh tools/device/run_notebook.sh /tmp/kw h200-nvfp4 -p variant nvfp4
#   sh tools/device/run_notebook.sh /tmp/kw h200-nvfp4-marlin -p variant nvfp4 -p moe_backend marlin
#   sh tools/device/run_notebook.sh /tmp/kw h200-bf16 -p variant bf16
set -eu
wheels=$1; name=$2; shift 2
py=${PYTHON:-python3}
site=${KERNEL_SITE:-/tmp/kernel-site}
if [ ! -f "$site/.done" ]; then
  mkdir -p "$site"
  "$py" - "$wheels" "$site" <<'PY'
import sys, zipfile, pathlib
src, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for whl in sorted(src.glob("*.whl")):
    zipfile.ZipFile(whl).extractall(dest)
    print("unpacked", whl.name)
PY
  touch "$site/.done"
fi
export PYTHONPATH="${PYTHONPATH:-}:$site:$PWD" HF_HUB_OFFLINE=1
out=${OUT:-out/device}
mkdir -p "$out"
rc=0
"$py" -m papermill notebooks/h200.ipynb "$out/$name.ipynb" -k python3 --cwd notebooks \
  --log-output --execution-timeout 1800 \
  -p stand_in False -p weightless True "$@" || rc=$?
mkdir -p "$out/out-$name" && cp -r out/plots out/bench out/logs "$out/out-$name/" 2>/dev/null || true
exit $rc
