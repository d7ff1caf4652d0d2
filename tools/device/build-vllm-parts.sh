#!/usr/bin/env bash
# Build a newer vLLM for the offline H200 (sm_90) together with the torch it pins,
# as a compressed bundle cut into parts that travel one per call.
#
# Usage: build-vllm-parts.sh VERSION OUTDIR      VERSION: 0.28.0, 0.32.0, 0.33.0 or 0.34.0
#
# 0.28.0 and 0.32.0 pin torch==2.13.0, 0.33.0 and 0.34.0 torch==2.14.0; the target has torch
# 2.11.0 and triton 3.6.0, so the bundle carries the pinned torch, its triton (3.7.1 /
# 3.8.0), its NCCL (2.29.7 / 2.30.7: both torches call functions the target's 2.28.9
# lacks), the torchvision built for it (0.28.0 / 0.29.0), vLLM, flashinfer,
# humming-kernels, compressed-tensors and the small pure-Python modules vLLM imports that
# the target lacks (0.33.0 adds orjson).  The target's own CUDA wheels (cuBLAS, cuDNN,
# cuSPARSELt, ...) are reused; tools/device/README.md says why each one is enough.
#
# Writes (and first removes old ones):
#   OUTDIR/part-00 ... part-NN   the .tar.xz cut into pieces of at most 60 MiB
#   OUTDIR/assemble.sh           run on the target: checks, joins, unpacks, prints export
#
#   VLLM_BUNDLE_CACHE   wheel cache, shared with build-vllm-bundle.sh
#                       (default ${XDG_CACHE_HOME:-$HOME/.cache}/vllm-h200-bundle)
#   PYTHON              interpreter that runs pip and the helper (default python3)
#   KEEP_STAGE=1        keep the unpacked site folder in the cache for inspection
#   SKIP_PACK=1         reuse the cached .tar.xz of an earlier run of this VERSION and
#                       only cut it again (steps 2-6 skipped)
#   WHEELS_ONLY=1       step 1 only: fetch the pinned wheels and check their sha256
# Needs Linux, Python 3.8+ with pip 21+, coreutils, about 5 GB of disk and 2.5 GB of
# memory; about 25 minutes on 2 cores, most of it single-threaded xz -9e.  The same
# wheels give the same bytes.
set -euo pipefail

usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -eq 2 ] || usage
case $1 in -h|--help) usage ;; esac

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HELPER=$HERE/vllm_bundle.py
PY=${PYTHON:-python3}
VERSION=$1
OUTDIR=$2
CACHE=${VLLM_BUNDLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vllm-h200-bundle}
WHEELS=$CACHE/wheels
STAGE=$CACHE/stage-$VERSION
case $VERSION in 0.33.0 | 0.34.0) TORCH=2.14.0 ;; *) TORCH=2.13.0 ;; esac
TARBALL=$CACHE/vllm-$VERSION-torch-$TORCH-h200-site.tar.xz
PART_BYTES=$((60 * 1024 * 1024))

die() { echo "error: $*" >&2; exit 1; }
step() { echo "== $*"; }

[ -f "$HELPER" ] || die "missing $HELPER (keep it next to this script)"
"$PY" -c 'import sys; assert sys.version_info >= (3, 8)' 2>/dev/null || die "$PY must be Python 3.8+"
"$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip"
for tool in sha256sum split stat; do command -v $tool >/dev/null || die "$tool not found"; done
mkdir -p "$WHEELS"

# ---------------------------------------------------------------------------------
# The wheels, pinned by file name and sha256.
# ---------------------------------------------------------------------------------
# The pinned torch and what must change with it on the target (torch's METADATA:
# triton==3.7.1 / triton~=3.8.0, nvidia-nccl-cu13==2.29.7 / ==2.30.7; torchvision's
# torch==X pin).
case $TORCH in
2.13.0) TORCH_STACK="
torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl 796633c4cdf0fe2cdced72d8f88f22e73dbcfce83132763162f6d4bff13b820b
triton-3.7.1-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl 7e40869937a68206ec70d7f25bb7ec6433cb083f9135e1f36dbd318dc449a728
nvidia_nccl_cu13-2.29.7-py3-none-manylinux_2_18_x86_64.whl edd81538446786ec3b73972543e53bb43bcaf0bfc8ef76cb679fcc390ffe136d
torchvision-0.28.0-cp312-cp312-manylinux_2_28_x86_64.whl 028a3d481b37d785605620d7cdad897064c5a55bae2aa1f2658766333e291940
"
TORCHVISION_C=torchvision/_C.so ;;
2.14.0) TORCH_STACK="
torch-2.14.0-cp312-cp312-manylinux_2_28_x86_64.whl fecffb58f51fd643d213acd68da21cc3fc19bea05a3bc64b4ee55128f47a4963
triton-3.8.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl e91ffa46d095b252248297292dd22bcbacd53a125a0c2eefbbbf74925a320bc3
nvidia_nccl_cu13-2.30.7-py3-none-manylinux_2_18_x86_64.whl cefa7fdb9710efd0f39c5f1be1d61ff6fc9a996c451265bd7fbdcf9455ed4b50
torchvision-0.29.0-cp312-cp312-manylinux_2_28_x86_64.whl 0e631a2f8b24732672d35224d2574ff89a78d56bef5364ef6094a625fa5f1771
"
# torchvision 0.29 renamed its extension (_C.so -> _C_stable.so)
TORCHVISION_C=torchvision/_C_stable.so ;;
esac
# Modules `vllm serve` / `vllm bench serve` import that the target lacks (the 0.26.0
# bundle's list, still enough for 0.28, 0.32 and 0.33: every pin below meets 0.33.0's
# Requires-Dist), plus compressed-tensors (NVFP4 and other quantized configs) and loguru,
# its one missing dependency.
COMMON="
annotated_types-0.8.0-py3-none-any.whl f072f4d804ea359e4eaf198b1af7a8b0943881a87f31bb764f8bf219bb9419e0
anyio-4.16.0-py3-none-any.whl c66ae634e0b8228396b801741beb3294326d4b6102f7bba4041c0dfb58c29026
apache_tvm_ffi-0.1.11-cp312-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl 2843f084cdc94dedacd8b257a395a2b71b8a3dc7fc99711b148bf1d161983128
astor-0.8.1-py2.py3-none-any.whl 070a54e890cefb5b3739d19f30f5a5ec840ffc9c50ffa7d23cc9fc1a38ebbfc5
blake3-1.0.11-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl 33424c686b291c7682b5816fe9320466dbc0a457ef7e15c273c804a2d70fea70
cachetools-8.0.2-py3-none-any.whl 502bf3c17c6e35d78ccdaa70da8c7001b28634541f5cde0dee33c93bb252277d
cbor2-6.3.0-cp312-cp312-manylinux_2_28_x86_64.whl 4f160b662059cc30ced4436fca332f4c27d0259698a5bde8373c9c6f829aabdf
compressed_tensors-0.17.0-py3-none-any.whl 4a1b89b508f7efb8ffb4eee8a6e69e0452d9b080cae130146025c64fbe9fa9aa
depyf-0.20.0-py3-none-any.whl d31effad4261cebecb58955d832e448ace88f432328f95f82fd99c30fd9308d4
dill-0.4.1-py3-none-any.whl 1e1ce33e978ae97fcfcff5638477032b801c46c7c65cf717f95fbc2248f79a9d
fastapi-0.136.3-py3-none-any.whl 3d2a69bdf04b7e9f3afa292c3bc7a98816bbfafa10bc9b45f3f3700d2f761620
h11-0.16.0-py3-none-any.whl 63cf8bbe7522de3bf65932fda1d9c2772064ffb3dae62d55932da54b31cb6c86
httpcore2-2.16.2-py3-none-any.whl 16051ae2a42f776007543f32de9349a317b23d2cbb4e1456b4bac0e88b87419a
httpx2-2.16.2-py3-none-any.whl f05c13aade4c45dbf1c9060647a1058f0acad62398fad96e741269edb33d46f5
idna-3.20-py3-none-any.whl ab7ae7122974553370f0bdb919e1a960b2cd1bc1ef0276416d896db81c14582c
jiter-0.19.0-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl 0956b5f58b804221dfb929c120e6d4032138fed20c1cc0ef683a2d1326255e46
jmespath-1.1.0-py3-none-any.whl a5663118de4908c91729bea0acadca56526eb2698e83de10cd116ae0f4e97c64
llguidance-1.7.6-cp39-abi3-manylinux_2_31_x86_64.whl ceec951d29a74309984e3be0fe7f5f56c1362434cd937abd517b259a60908b1e
loguru-0.7.3-py3-none-any.whl 31a33c10c8e1e10422bfd431aeb5d351c7cf7fa671e3c4df004162264b28220c
model_hosting_container_standards-0.1.16-py3-none-any.whl 47f4f65713120bc3a69feb022981a38db9e557aedf88dbd72077f20588caa12b
msgspec-0.23.0-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl c08f294663135183bd633efd843645687285a445054a876c37506d4e9de7d80b
openai-3.57.0-py3-none-any.whl f97bc74024c06ced8428b56c4a3594066709d3082779bf9d0b4b6092fbf587a8
partial_json_parser-0.2.1.1.post7-py3-none-any.whl 145119e5eabcf80cbb13844a6b50a85c68bf99d376f8ed771e2a3c3b03e653ae
prometheus_fastapi_instrumentator-8.1.0-py3-none-any.whl b9f40b2cff3f7891ca0610b3ae4fc6ec723fd326b04bb659819aaeb821a0fc7d
pybase64-1.5.1-cp312-cp312-manylinux1_x86_64.manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_5_x86_64.whl c212d02fd072c5845d39b4699eb65efa827b79a5cf7fecc9f468f8cad2b8540f
pydantic-2.14.4-py3-none-any.whl 653a2ad9f6d8858529c77c72717d0ea991d6c6837fe683246b2f4b2bbfc3fadc
pydantic_core-2.50.5-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl 470bbc2495367f60d3ca849a8039e4c164701d10637e7743f4427d92651bdb6d
python_json_logger-4.2.0-py3-none-any.whl 158a52126fcd6869e09574d2b66272666f3dc8f468c62637ef9a1fa883719cb9
python_multipart-0.0.34-py3-none-any.whl ebacd224bd686eee2f9aa1066a657affe07435a185834e05e5235e2e59173e91
pyzmq-27.3.0-cp312-abi3-manylinux_2_26_x86_64.manylinux_2_28_x86_64.whl 858fe25231e0fd8612da142efde019faa5ef63fa150a821a27870e791b38c798
setproctitle-1.3.8-cp312-cp312-manylinux1_x86_64.manylinux_2_28_x86_64.manylinux_2_5_x86_64.whl 4a765e0c80a2453480be27c4fc22ba1c0771867040c5f91e4221940d78a4abfb
sniffio-1.3.1-py3-none-any.whl 2f6da418d1f1e0fddd844478f41680e794e6051915791a034ff65e5f100525a2
starlette-1.10.0-py3-none-any.whl 478c0ab3b4ced6e82719849c118fa406f0278a3499c1a898cd15cd31bdc38ce4
truststore-0.10.5-py3-none-any.whl 9aaaedaefaf06d8b206278cf8b5012bc897f485a874503501e12d776df78951c
typing_extensions-4.16.0-py3-none-any.whl 481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8
typing_inspection-0.4.5-py3-none-any.whl bc210535442b39e1bf2805e0c7a17dfd6a4ace760c84c7f7d16245d23a6b1c39
uvicorn-0.54.0-py3-none-any.whl 505bdb0f318731d45f1f712071fc781a8981f6847a31c902c9f5e652d4f67faf
watchfiles-1.3.0-cp310-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl b5768b49e426fd5b550b012c866db347cdf15c398ef98dc557b6e6b72fa74cd1
"
# What each vLLM release pins differently (from its METADATA).
case $VERSION in
0.28.0) PER_VERSION="
vllm-0.28.0-cp38-abi3-manylinux_2_28_x86_64.whl addb0ffdaafd8155d75e9b3f5ddb3da28fdee9e8a7097ede91f7db2e9e1a3889
flashinfer_python-0.6.16.post3-py3-none-any.whl caf686b9b079abe1c9d65ab505698bd325e8072de40afd822f2c74f2ac3bc601
humming_kernels-0.1.12-py3-none-manylinux_2_28_x86_64.whl cd3ef712a93f3a9075ea99de2c72bcd3ec89dab3759b3a248d869f5507b60331
openai_harmony-0.0.8-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl c007d277218a50db8839e599ed78e0fffe5130f614c3f6d93ae257f282071a29
xgrammar-0.2.7-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl e4397798f73512ab5abccbadf0a7b6aaf0753ccc4f3171c43b14c4d22df1ed28
" ;;
0.32.0) PER_VERSION="
vllm-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl 5e2ecdc5b0baf72921c288486417ca82778456a448e4fe60b62ee43c0dfc8611
flashinfer_python-0.7.0.post1-py3-none-any.whl c7adf826568d61fc1b7d3aadd4cae387a35a138bfc08e2deca2f34ecfa280716
humming_kernels-0.1.17-cp310-abi3-manylinux_2_28_x86_64.whl e418b5482dabd71f64622893bdbb8bf27eb30379c443b92d32af48825d9ad64c
oss_harmony-0.0.11-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl d877c6b526cdbdf55068bae8f05c60398e929c9e296c7f69a1d533339708be80
xgrammar-0.2.8-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl 4045b096735bb2523e0d874039a55994c1b390620d547c4a0d4f43b9a106177b
" ;;
0.33.0) PER_VERSION="
vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl 4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa
flashinfer_python-0.7.2.post1-py3-none-any.whl bfdc18b9e1e4d8d0730fe4343dc0e284cd0c160086de80f99888bc4867922d49
humming_kernels-0.1.19-cp310-abi3-manylinux_2_28_x86_64.whl 16ad0c8e9c2d5a8db739bdb97bcc510cedc9dc4c4c111098cbb2d7ac9c1dd973
oss_harmony-0.0.11-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl d877c6b526cdbdf55068bae8f05c60398e929c9e296c7f69a1d533339708be80
xgrammar-0.2.8-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl 4045b096735bb2523e0d874039a55994c1b390620d547c4a0d4f43b9a106177b
orjson-3.13.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl bceadfd314bd238f584fc229a4bbaf0e573597e7a026dec5429fbf29fd66c641
" ;;
# 0.34.0 pins what 0.33.0 pins (torch 2.14.0, humming-kernels 0.1.19, apache-tvm-ffi 0.1.11,
# xgrammar 0.2.8) except flashinfer-python==0.7.3, which PyPI does not have (its release list
# goes 0.7.2.post1, 0.7.4; pypi.org/pypi/flashinfer-python/json, 2026-12-04): the bundle
# carries 0.7.4, the nearest release after the pin, until a 0.7.3 wheel is found.  Its
# Requires-Dist is 0.7.2.post1's but for nvidia-cudnn-frontend>=1.32 and
# nvidia-cutlass-dsl>=4.8, neither carried for 0.33.0 either (its H200 runs did without).
# 0.34.0 cannot do without nvidia-cutlass-dsl: its kernel warm-up imports the MiniMax M3 MSA
# warm-up on every CUDA platform (model_executor/warmup/kernel_warmup.py), which imports
# `cutlass`, and the start stops there (H200, 2026-12-05: docs/results/h200/vllm-0.34.0/
# first-start-2026-12-05/). So 0.34.0 carries nvidia-cutlass-dsl[cu13]==4.8.0 (vLLM's
# Requires-Dist): the package and its libs-base, libs-core (which holds `cutlass`) and
# libs-cu13 wheels; their cuda-bindings and protobuf are on the image (h200-image-packages.txt).
# libs-cu12, which the package names without a marker, is left out: this stack is CUDA 13.
# The second H200 start (2026-12-05: docs/results/h200/routing-2026-12-05/) imported `cutlass`
# and stopped later, in the warm-up of the ll_bf16 router GEMM that serves this model's router
# (kernel_warmup.py:162, shape (2688, 128)): "No module named 'quack'". So 0.34.0 also carries
# quack-kernels==0.6.5 (vLLM's Requires-Dist; pure Python, imported at the top of 59 of vLLM's
# modules). Its own needs are cutlass-dsl, torch, apache-tvm-ffi (all carried), einops (on the
# image) and torch-c-dlpack-ext, which no quack module imports. The other 0.34.0 requirements
# the bundle lacks (tilelang, tokenspeed-mla, instanttensor, fastsafetensors, nvtx, numba, ...)
# are imported inside functions only, not at the top of any vLLM module (grep of the wheel).
0.34.0) PER_VERSION="
vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl 79ca4b3cd74aec08c4bf476bdf0cb15735b605ae5368526a2faae1e30f044ca2
flashinfer_python-0.7.4-py3-none-any.whl a051a62e09a2738e8b0de47a1944fd2f0f3eff01b728b662141ea660cb09dd32
humming_kernels-0.1.19-cp310-abi3-manylinux_2_28_x86_64.whl 16ad0c8e9c2d5a8db739bdb97bcc510cedc9dc4c4c111098cbb2d7ac9c1dd973
oss_harmony-0.0.11-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl d877c6b526cdbdf55068bae8f05c60398e929c9e296c7f69a1d533339708be80
xgrammar-0.2.8-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl 4045b096735bb2523e0d874039a55994c1b390620d547c4a0d4f43b9a106177b
orjson-3.13.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl bceadfd314bd238f584fc229a4bbaf0e573597e7a026dec5429fbf29fd66c641
nvidia_cutlass_dsl-4.8.0-py3-none-any.whl 24f996e0e5fa88c8b417f4893e615af135bdfdfdbdbed7e239faf36a88df711b
nvidia_cutlass_dsl_libs_base-4.8.0-cp312-cp312-manylinux_2_28_x86_64.whl 5bdc80989b0fbbac3d58960057e74e2ce8676fafa76b852d9422b9c4b9b74bdd
nvidia_cutlass_dsl_libs_core-4.8.0-py3-none-any.whl b32716d2ed10c185cdbbb6b5c6fca26a3113a60e6e2fe4e2f0cb15966422b621
nvidia_cutlass_dsl_libs_cu13-4.8.0-cp312-cp312-manylinux_2_28_x86_64.whl 463cd7f0c452ffeeecb530a15aeb1b10cbbd2c8da6c5aa2fecf65f836258a732
quack_kernels-0.6.5-py3-none-any.whl df1ddd31366c82eb9692fe087c671209189dcbde53c909c81a865d4ee66b158d
" ;;
*) die "unknown vLLM version $VERSION (known: 0.28.0, 0.32.0, 0.33.0, 0.34.0)" ;;
esac
MANIFEST="$TORCH_STACK$COMMON$PER_VERSION"

# ---------------------------------------------------------------------------------
# What an H200 serving with this bundle never loads.  `drop` stops the build when a
# pattern matches nothing, so a new wheel layout is noticed.
# ---------------------------------------------------------------------------------
DROP=(
    # torch: C++ headers and CMake files, only for compiling extensions against
    # torch (vLLM's extensions are prebuilt; flashinfer and humming JIT-compile with
    # their own headers); protoc, a build tool; type stubs.  (torch.testing._internal
    # must stay: torch.utils.checkpoint imports it when torch is imported.)
    torch/include torch/share 'torch/bin/protoc*' 'torch/**/*.pyi'
    # triton: CUPTI and libproton serve only the proton profiler; ptxas-blackwell is
    # used only for sm_100+ targets (sm_90 uses ptxas, kept); cuobjdump and nvdisasm
    # only dump SASS (triton.tools.disasm); FileCheck, plugins and instrumentation are
    # test tools.
    triton/backends/nvidia/lib/cupti triton/_C/libproton.so
    triton/backends/nvidia/bin/ptxas-blackwell triton/backends/nvidia/bin/cuobjdump
    triton/backends/nvidia/bin/nvdisasm triton/FileCheck triton/plugins triton/instrumentation
    # NCCL: headers for building against it.
    nvidia/nccl/include
    # vLLM, as in the 0.26.0 bundle: FA2 (Hopper uses FA3, kept), the optional Rust
    # frontend, DeepGEMM (JIT-compiled block-FP8 GEMMs; vLLM falls back to its other
    # FP8 kernels) and Blackwell-only sparse attention.
    vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so vllm/vllm-rs vllm/third_party/deep_gemm
    vllm/third_party/fmha_sm100
    # flashinfer's wheel also installs its build hooks as top-level modules.
    build_backend.py build_utils.py
)

sha_ok() { [ -f "$WHEELS/$1" ] && [ "$(sha256sum "$WHEELS/$1" | cut -d' ' -f1)" = "$2" ]; }

# ---------------------------------------------------------------------------------
step "1/7 wheels for vLLM $VERSION (cache: $WHEELS)"
# As in build-vllm-bundle.sh: cached wheels with the right hash are reused; the others
# are fetched asking for exactly the tags in the pinned file name.
declare -A group=()
cached=0
while read -r file sha; do
    [ -n "$file" ] || continue
    if sha_ok "$file" "$sha"; then cached=$((cached + 1)); continue; fi
    rm -f "$WHEELS/$file"
    IFS=- read -r dist ver _ abi plat <<<"${file%.whl}"
    group["$abi-$plat"]+=" $dist==$ver"
done <<<"$MANIFEST"
echo "reusing $cached cached wheels; downloading ${#group[@]} group(s)"
fetch() {  # uses $abi and $plats of the group being fetched
    "$PY" -m pip download --no-deps --only-binary=:all: --progress-bar off \
        --python-version 3.12 --implementation cp --abi "$abi" "${plats[@]}" \
        -d "$WHEELS" "$@"
}
for tags in "${!group[@]}"; do
    abi=${tags%%-*}
    plats=()
    IFS=. read -r -a parts <<<"${tags#*-}"
    for p in "${parts[@]}"; do plats+=(--platform "$p"); done
    # shellcheck disable=SC2086  # the group is a space-separated list of pins
    if ! fetch ${group[$tags]}; then
        for pin in ${group[$tags]}; do fetch "$pin" || echo "pip could not fetch $pin" >&2; done
    fi
done
bad=0
while read -r file sha; do
    [ -n "$file" ] || continue
    if [ ! -f "$WHEELS/$file" ]; then echo "missing wheel: $file" >&2; bad=1
    elif ! sha_ok "$file" "$sha"; then echo "sha256 mismatch: $file" >&2; bad=1; fi
done <<<"$MANIFEST"
[ $bad = 0 ] || die "wheel set incomplete (see above); nothing was built"
if [ "${WHEELS_ONLY:-0}" = 1 ]; then
    echo "all $(grep -c . <<<"$MANIFEST") pinned wheels for vLLM $VERSION + torch $TORCH are in $WHEELS (WHEELS_ONLY=1: stopping)"
    exit 0
fi

# ---------------------------------------------------------------------------------
if [ "${SKIP_PACK:-0}" = 1 ] && [ -f "$TARBALL" ]; then
    step "2-6/7 skipped (SKIP_PACK=1): reusing $TARBALL"
else
    step "2/7 unpack into a staging site folder"
    rm -rf "$STAGE"
    mapfile -t files < <(awk 'NF {print $1}' <<<"$MANIFEST")
    "$PY" "$HELPER" extract "$STAGE" "${files[@]/#/$WHEELS/}"

    step "3/7 drop what an H200 never loads"
    "$PY" "$HELPER" drop "$STAGE" "${DROP[@]}"

    step "4/7 zero symbol tables and debug info in every ELF file"
    "$PY" "$HELPER" strip-debug "$STAGE"

    step "5/7 keep only sm_90 cubins (and PTX up to compute_90) in every CUDA binary"
    "$PY" "$HELPER" strip-fatbin --keep-sm 90 --drop-newer-ptx "$STAGE"

    step "6/7 pack (xz -9e, single thread: the long step)"
    rm -f "$TARBALL"
    "$PY" "$HELPER" pack "$STAGE" "$TARBALL"
    "$PY" "$HELPER" check "$TARBALL" \
        torch/lib/libtorch_cuda.so torch/lib/libtorch_cpu.so triton/_C/libtriton.so \
        triton/backends/nvidia/bin/ptxas nvidia/nccl/lib/libnccl.so.2 "$TORCHVISION_C" \
        vllm/_C_stable_libtorch.abi3.so vllm/_moe_C_stable_libtorch.abi3.so \
        vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so flashinfer/__init__.py humming/__init__.py \
        compressed_tensors/__init__.py fastapi/__init__.py uvicorn/__init__.py openai/__init__.py
    [ "${KEEP_STAGE:-0}" = 1 ] || rm -rf "$STAGE"
fi

# ---------------------------------------------------------------------------------
step "7/7 cut into parts of at most 60 MiB; write assemble.sh"
mkdir -p "$OUTDIR"
rm -f "$OUTDIR"/part-[0-9][0-9] "$OUTDIR/assemble.sh"
split -b "$PART_BYTES" -d -a 2 "$TARBALL" "$OUTDIR/part-"
SHA=$(sha256sum "$TARBALL" | cut -d' ' -f1)
SIZE=$(stat -c %s "$TARBALL")
PARTS=$(cd "$OUTDIR" && for p in part-[0-9][0-9]; do
    echo "    (\"$p\", $(stat -c %s "$p"), \"$(sha256sum "$p" | cut -d' ' -f1)\"),"; done)
NPARTS=$(grep -c part- <<<"$PARTS")

# assemble.sh runs on the target with only sh and python3 (tarfile, filter='data').
cat >"$OUTDIR/assemble.sh" <<EOF
#!/bin/sh
# Join, check and unpack the vLLM $VERSION + torch $TORCH H200 bundle (on the target).
#
#   sh assemble.sh --check PARTS_DIR     which of the $NPARTS parts are there and intact
#   sh assemble.sh PARTS_DIR [DEST]      unpack into DEST (default /tmp/site2)
#
# Bring the parts one call at a time into one folder that outlives the calls, e.g.
# "mkdir -p /tmp/parts-$VERSION && cp $OUTDIR/part-03 /tmp/parts-$VERSION/", then last:
#   line=\$(sh $OUTDIR/assemble.sh /tmp/parts-$VERSION) && eval "\$line"
# Progress goes to stderr; stdout is only the export line.  A DEST that already holds
# this bundle is left alone, so re-running is cheap.
set -eu
mode=unpack
if [ "\${1:-}" = --check ]; then mode=check; shift; fi
[ \$# -ge 1 ] || { sed -n '2,11p' "\$0" >&2; exit 2; }
parts=\$1
dest=\${2:-/tmp/site2}
case \$dest in /*) ;; *) dest=\$(pwd)/\$dest ;; esac
python3 - "\$mode" "\$parts" "\$dest" >&2 <<'PY'
import hashlib, lzma, os, shutil, sys, tarfile
mode, parts_dir, dest = sys.argv[1:4]
TOTAL_SHA256 = "$SHA"
PARTS = [  # name, size, sha256
$PARTS
]
stamp = os.path.join(dest, ".bundle-sha256")
if mode == "unpack" and os.path.isfile(stamp) and open(stamp).read().strip() == TOTAL_SHA256:
    print(f"{dest} already holds this bundle")
    sys.exit(0)

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

missing, damaged = [], []
for name, size, want in PARTS:
    path = os.path.join(parts_dir, name)
    if not os.path.isfile(path):
        missing.append(name)
    elif os.path.getsize(path) != size or sha256(path) != want:
        damaged.append(name)
ok = len(PARTS) - len(missing) - len(damaged)
print(f"{ok}/{len(PARTS)} parts intact in {parts_dir}"
      + (f"; missing: {' '.join(missing)}" if missing else "")
      + (f"; DAMAGED (copy again): {' '.join(damaged)}" if damaged else ""))
if mode == "check":
    sys.exit(1 if damaged else 3 if missing else 0)
if missing or damaged:
    sys.exit("not unpacking: the set of parts is incomplete")
if not hasattr(tarfile, "data_filter"):
    sys.exit("this python3 has no tarfile extraction filters (need 3.12+ or 3.8.17+)")

class Joined:
    """The parts read back to back as one stream; hashes what it hands out."""
    def __init__(self):
        self.files = [os.path.join(parts_dir, name) for name, _, _ in PARTS]
        self.f, self.digest = None, hashlib.sha256()
    def read(self, n=-1):
        while self.files or self.f:
            if self.f is None:
                self.f = open(self.files.pop(0), "rb")
            data = self.f.read(n if n and n > 0 else 1 << 20)
            if data:
                self.digest.update(data)
                return data
            self.f.close()
            self.f = None
        return b""

tmp = dest.rstrip("/") + ".partial"
shutil.rmtree(tmp, ignore_errors=True)
stream = Joined()
# lzma.open bounds each decompressed chunk (tarfile's own "r|xz" would hold whole
# runs of zeroed cubins in memory and copy them over and over).
with lzma.open(stream) as xz, tarfile.open(fileobj=xz, mode="r|") as tar:
    tar.extractall(tmp, filter="data")
while stream.read(1 << 20):
    pass
if stream.digest.hexdigest() != TOTAL_SHA256:
    shutil.rmtree(tmp)
    sys.exit("joined parts do not match the bundle's sha256; nothing unpacked")
with open(os.path.join(tmp, ".bundle-sha256"), "w") as f:
    f.write(TOTAL_SHA256 + "\n")
if os.path.isdir(dest):
    if os.path.isfile(stamp):
        shutil.rmtree(dest)  # an older bundle unpacked by this script
    elif os.listdir(dest):
        shutil.rmtree(tmp)
        sys.exit(f"{dest} is not empty and holds no bundle; choose another DEST")
    else:
        os.rmdir(dest)
os.rename(tmp, dest)
print(f"unpacked into {dest}; start with: python3 -m vllm.entrypoints.cli.main serve ...")
PY
# nvidia-cutlass-dsl puts its cutlass package in nvidia_cutlass_dsl/dsl_packages and adds that folder
# with a .pth file, which Python reads in site folders only, never on PYTHONPATH: name it.
extra=""; [ -d "\$dest/nvidia_cutlass_dsl/dsl_packages" ] && extra=":\$dest/nvidia_cutlass_dsl/dsl_packages"
[ \$mode = check ] || echo "export PYTHONPATH=\$dest\$extra HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_USE_FLASHINFER_SAMPLER=0 PYTORCH_SKIP_CUDNN_COMPATIBILITY_CHECK=1"
EOF
chmod +x "$OUTDIR/assemble.sh"

echo
echo "bundle:   vLLM $VERSION + torch $TORCH, $SIZE bytes ($(awk -v s="$SIZE" 'BEGIN {printf "%.1f", s / 1048576}') MiB), sha256 $SHA"
echo "parts:    $NPARTS in $OUTDIR (part-00 ... part-$(printf %02d $((NPARTS - 1))), each at most 60 MiB)"
echo "assemble: $OUTDIR/assemble.sh"
