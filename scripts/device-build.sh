#!/bin/sh
# device-build.sh — build the CUDA test and benchmark here and pack them for a GPU machine, or
# (with `run`) run them there.
#
#   scripts/device-build.sh [BUILD_DIR]   build, then copy the binaries and the shared libraries
#                                         they need that a CUDA image may lack into .carry/
#   scripts/device-build.sh run [OUTDIR]  on the GPU machine: find cuBLAS/cudart, run the
#                                         cross-backend test twice (two seeds) and the benchmark,
#                                         logs in OUTDIR (default .)
#
# cuBLAS, cudart, libc and libstdc++ are not carried: the GPU machine's CUDA image has them.
set -eu
. "$(dirname "$0")/device-carry.sh"

if [ "${1:-}" = run ]; then
    out=${2:-.}
    cuda_lib_path
    if ! ls /usr/local/cuda/lib64/libcublas.so.13* >/dev/null 2>&1; then
        d=$(dirname "$(find / -xdev -name 'libcublas.so.13*' 2>/dev/null | head -n 1)" 2>/dev/null || true)
        [ -n "$d" ] && LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH"
    fi
    LD_LIBRARY_PATH=".carry/lib:$LD_LIBRARY_PATH"
    export LD_LIBRARY_PATH
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv || true
    if ldd .carry/test_backend_ops | grep 'not found'; then echo "missing libraries"; exit 3; fi
    rc=0
    .carry/test_backend_ops >"$out/test1.log" 2>&1 || rc=$?
    cat "$out/test1.log"; echo "test_backend_ops rc=$rc"
    rc2=0
    .carry/test_backend_ops >"$out/test2.log" 2>&1 || rc2=$?
    tail -n 3 "$out/test2.log"; echo "test_backend_ops (second seed) rc=$rc2"
    .carry/bench_kernels ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log"
    [ "$rc" = 0 ] && [ "$rc2" = 0 ]
    exit
fi

build=${1:-build-cuda}
[ -d "$build" ] || meson setup "$build"
ninja -C "$build" tests/backend/test_backend_ops bench/bench_kernels
carry_pack "$build/tests/backend/test_backend_ops" "$build/bench/bench_kernels"
echo "carry .carry and run: sh scripts/device-build.sh run \$OUT"
