#!/bin/sh
# The carried wheel folders into /tmp/wheels on the device machine, each once:
#   sh tools/device/wheels.sh .whl .whl-b      # each folder present here; marker /tmp/wheels/.done-<folder>
# The kit travels in two folders, `.whl` (the first call of a session, alone) and `.whl-b`
# (the next call), since the lender refuses a call whose tree and carry pass 64 MiB as a tar
# (`bash tools/device/h200_drafting.sh sizes`). No --upgrade: pip --target --upgrade replaces a
# folder two installs share (bin/), so the second folder would delete the first's scripts.
for d in "$@"; do
    [ -d "$d" ] || continue
    [ -f "/tmp/wheels/.done-${d#.}" ] && continue
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target /tmp/wheels "$d"/*.whl && touch "/tmp/wheels/.done-${d#.}" || exit 1
done
