#!/bin/sh
# device-cli.sh — run the command-line tests with the CUDA backend on a GPU machine.
#
#   scripts/device-cli.sh pack [BUILD_DIR]       here: copy nvfp4dbg, test_backend_ops, h5dump and
#                                                the shared libraries a CUDA image may lack into .carry/
#   scripts/device-cli.sh run OUTDIR TEST.sh...  there: run each tests/cli script with the carried
#                                                binary (auto backend = CUDA; ND_TEST_BACKEND=cuda for
#                                                the scripts that pin one), logs in OUTDIR
set -eu
. "$(dirname "$0")/device-carry.sh"

if [ "${1:-}" = run ]; then
    out=$2; shift 2
    cuda_lib_path
    LD_LIBRARY_PATH="$PWD/.carry/lib:${LD_LIBRARY_PATH:-}"
    PATH="$PWD/.carry:$PATH"
    NVFP4DBG_RECIPES="$PWD/recipes"
    ND_TEST_BACKEND=cuda
    export LD_LIBRARY_PATH PATH NVFP4DBG_RECIPES ND_TEST_BACKEND
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
    if ldd .carry/nvfp4dbg | grep 'not found'; then echo "missing libraries"; exit 3; fi
    rc=0
    for t in "$@"; do
        name=$(basename "$t" .sh)
        start=$(date +%s)
        if bash "$t" "$PWD/.carry/nvfp4dbg" "$PWD" >"$out/$name.log" 2>&1; then s=ok; else s=FAIL; rc=1; fi
        echo "$name: $s ($(( $(date +%s) - start )) s) $(tail -n 1 "$out/$name.log")"
    done
    exit $rc
fi

build=${2:-build}
ninja -C "$build" nvfp4dbg tests/backend/test_backend_ops
carry_pack "$build/nvfp4dbg" "$build/tests/backend/test_backend_ops" "$(command -v h5dump)"
