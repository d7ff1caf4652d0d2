#!/bin/sh
# The pinned GPU stack on the offline device machine, step by step (one step per device call).
# Run from the repository root on the device machine. The vLLM bundle parts are the offline
# torch + vLLM bundle (see tools/device/README.md, which also lists the kernel/papermill
# wheels). Files under /tmp stay only while the machine is held.
#
# A 60 MiB part travels beside the working tree only while the tree is under 4 MiB. Once it is
# larger, cut the same bytes into chunks that fit (here, before the session). The limit is on
# the tree and the carry as a tar (about 35 MiB of tree on 2026-12-06: a 25 MB chunk leaves
# room for the tree to grow; 30 MB ones stopped fitting):
#   V=0.32.0; mkdir -p .gpu2/chunks-$V && cat .gpu2/$V/part-* |
#     split -b 25000000 -d -a 2 - .gpu2/chunks-$V/c
#   (git ls-files; echo .gpu2/chunks-$V/c00) | tar -cf - -T - | wc -c   # under 67108864
# and carry one chunk per call:
#   sh tools/device/stack.sh chunk 0.32.0 00  # calls 1..N-1: carry .gpu2/chunks-V/cK
#   sh tools/device/stack.sh join 0.32.0 11   # call N: last chunk, back into the parts, unpack
# or, with a small tree, the parts themselves:
#   sh tools/device/stack.sh part 00          # calls 1-4: carry .gpu2/0.32.0/part-0K
#   sh tools/device/stack.sh assemble 04      # call 5: last part, unpack
#   . tools/device/env.sh                     # later calls: carry .whl, set PYTHONPATH
# vLLM 0.32.0 unpacks to /tmp/site2 (env: /tmp/stack-env.sh), any other release V to
# /tmp/site-V (env: /tmp/stack-env-V.sh; STACK_ENV=/tmp/stack-env-V.sh . env.sh selects it).
set -u
V=${VLLM_BUNDLE_VERSION:-0.32.0}
[ "${1:-}" = chunk ] || [ "${1:-}" = join ] && V=${2:?version}
PARTS=/tmp/parts-$V
if [ "$V" = 0.32.0 ]; then DEST=/tmp/site2; ENV=/tmp/stack-env.sh; else DEST=/tmp/site-$V; ENV=/tmp/stack-env-$V.sh; fi
unpack() {
    sh ".gpu2/$V/assemble.sh" "$PARTS" "$DEST" > "$ENV" && cat "$ENV" &&
    . "$ENV" && python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count())"
}
case "${1:-}" in
part)
    mkdir -p "$PARTS" && cp ".gpu2/$V/part-$2" "$PARTS/" && sh ".gpu2/$V/assemble.sh" --check "$PARTS"
    rc=$?; [ $rc -eq 3 ] && echo "parts still missing (expected until the last one)"; true ;;
assemble)
    mkdir -p "$PARTS" && cp ".gpu2/$V/part-$2" "$PARTS/" && unpack ;;
chunk)
    mkdir -p "/tmp/chunks-$V" && cp ".gpu2/chunks-$V/c$3" "/tmp/chunks-$V/" && ls -l "/tmp/chunks-$V" ;;
join)
    mkdir -p "/tmp/chunks-$V" "$PARTS" && cp ".gpu2/chunks-$V/c$3" "/tmp/chunks-$V/" &&
    cat $(ls /tmp/chunks-$V/c* | sort -V) | split -b 62914560 -d -a 2 - "$PARTS/part-" && unpack ;;
*)
    echo "usage: stack.sh part NN | assemble NN | chunk V K | join V K" >&2 ;;
esac
