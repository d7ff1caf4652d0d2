#!/bin/sh
# The pinned GPU stack on the offline device machine, step by step (one step per device call).
# Run from the repository root on the device machine. The vLLM bundle parts come from
# ../shared/gpu/build-vllm-parts.sh (README there); the kernel/papermill wheels are listed in
# docs/results/device/README.md. Files under /tmp stay only while the machine is held.
#
#   sh docs/results/device/stack.sh part 00        # calls 1-4: carry .gpu2/0.32.0/part-0K
#   sh docs/results/device/stack.sh assemble 04    # call 5: last part, unpack to /tmp/site2
#   . docs/results/device/env.sh                   # later calls: carry .whl, set PYTHONPATH
set -u
V=${VLLM_BUNDLE_VERSION:-0.32.0}
PARTS=/tmp/parts-$V
case "${1:-}" in
part)
    mkdir -p "$PARTS" && cp ".gpu2/$V/part-$2" "$PARTS/" && sh ".gpu2/$V/assemble.sh" --check "$PARTS"
    rc=$?; [ $rc -eq 3 ] && echo "parts still missing (expected until the last one)"; true ;;
assemble)
    mkdir -p "$PARTS" && cp ".gpu2/$V/part-$2" "$PARTS/" &&
    sh ".gpu2/$V/assemble.sh" "$PARTS" > /tmp/stack-env.sh && cat /tmp/stack-env.sh &&
    . /tmp/stack-env.sh && python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count())" ;;
*)
    echo "usage: stack.sh part NN | assemble NN" >&2 ;;
esac
