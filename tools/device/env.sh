# Source on the device machine (bash) after stack.sh assemble: installs the carried wheels
# (.whl and .whl-b: papermill, ipykernel and their needs, vllm-router) once each and sets the environment.
# The answer-quality steps' wheels (lm-eval and its needs, tools/device/
# notebook-kernel-requirements.txt) travel in a call of their own as .whl-eval and go to
# /tmp/wheels-eval:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
#       --target /tmp/wheels-eval .whl-eval/*.whl
sh tools/device/wheels.sh .whl .whl-b  # each carried folder not installed yet (wheels.sh)
. "${STACK_ENV:-/tmp/stack-env.sh}"
export PYTHONPATH="$PYTHONPATH:/tmp/wheels:/tmp/wheels-eval:$(pwd)" PATH="/tmp/wheels/bin:$PATH"
# NVLink multicast stays off on these machines (device KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export COOKBOOK_OUT=/tmp/cookbook-out PYTHONUNBUFFERED=1
