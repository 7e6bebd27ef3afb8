#!/usr/bin/env bash
# A long libFuzzer campaign on a machine with many cores, which need not have the build tools.
#
#   scripts/fuzz-long.sh pack DIR                  here: build the harnesses (scripts/fuzz.sh 1), copy
#                                                  them, the non-system shared libraries they load and
#                                                  the grown corpora into DIR
#   scripts/fuzz-long.sh run DIR SECONDS OUTDIR    there (from the source root): every harness at once,
#                                                  one process per core (the fast harnesses get the
#                                                  spare cores), each for SECONDS; logs, artifacts and
#                                                  OUTDIR/summary.txt (executions per harness), and
#                                                  OUTDIR/fuzz-logs.tar.gz of all of it
# Exits 1 when any crash, leak, timeout or OOM artifact was written.
set -euo pipefail
cd "$(dirname "$0")/.."
harnesses=(safetensors tokens stack ckpt tolerances recipe index bundle pipeline trace)

if [ "${1:-}" = pack ]; then
    dir=${2:?usage: fuzz-long.sh pack DIR}
    scripts/fuzz.sh 1 >/dev/null || true
    rm -rf "$dir" && mkdir -p "$dir/lib" "$dir/corpus"
    for h in "${harnesses[@]}"; do cp "build-fuzz/fuzz/fuzz_$h" "$dir/"; done
    for lib in $(ldd "$dir"/fuzz_* | awk '/=> \// {print $3}' | sort -u); do
        case "$(basename "$lib")" in
            libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libgcc_s.so*|libstdc++.so*|ld-linux*) ;;
            *) cp -L "$lib" "$dir/lib/" ;;
        esac
    done
    [ -d build-fuzz/fuzz/corpus ] && cp -r build-fuzz/fuzz/corpus/. "$dir/corpus/"
    du -sh "$dir"
    exit 0
fi

[ "${1:-}" = run ] || { echo "usage: fuzz-long.sh pack DIR | run DIR SECONDS OUTDIR" >&2; exit 2; }
dir=$(cd "${2:?DIR}" && pwd)
secs=${3:?SECONDS}
out=${4:?OUTDIR}
mkdir -p "$out/logs" "$out/crashes"
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ND_SOURCE_ROOT="$PWD" NVFP4DBG_RECIPES="$PWD/recipes"
if ldd "$dir/fuzz_trace" | grep 'not found'; then echo "fuzz-long.sh: missing libraries" >&2; exit 3; fi
cores=$(nproc)
declare -A workers
for h in "${harnesses[@]}"; do workers[$h]=0; done
for ((i = 0; i < (cores > ${#harnesses[@]} ? cores : ${#harnesses[@]}); i++)); do
    h=${harnesses[i % ${#harnesses[@]}]}
    workers[$h]=$((workers[$h] + 1))
done
start=$(date +%s)
for h in "${harnesses[@]}"; do
    mkdir -p "$dir/corpus/$h"
    dirs=("$dir/corpus/$h")
    for d in "tests/fuzz/corpus/$h" "tests/fuzz/regress/$h"; do [ -d "$d" ] && dirs+=("$d"); done
    dict=()
    case "$h" in recipe|stack|tolerances) dict=(-dict=tests/fuzz/dict/yaml.dict) ;;
        *) [ -f "tests/fuzz/dict/$h.dict" ] && dict=(-dict="tests/fuzz/dict/$h.dict") ;; esac
    for ((w = 0; w < workers[$h]; w++)); do
        ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:max_allocation_size_mb=4096:suppressions=tests/fuzz/asan.supp \
        UBSAN_OPTIONS=print_stacktrace=1 LSAN_OPTIONS=suppressions=tests/fuzz/lsan.supp \
            "$dir/fuzz_$h" "${dirs[@]}" "${dict[@]}" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
            -max_len=262144 -print_final_stats=1 -artifact_prefix="$out/crashes/$h-" \
            >"$out/logs/$h.$w.log" 2>&1 &
    done
done
wait || true
wall=$(( $(date +%s) - start ))
total=0
{
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $(date -u +%Y-%m-%d); $secs s per process, $wall s wall"
    for h in "${harnesses[@]}"; do
        n=0 rss=0
        for f in "$out/logs/$h".*.log; do
            x=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$f" | grep -o '[0-9]*$' || echo 0)
            r=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$f" | grep -o '[0-9]*$' || echo 0)
            n=$((n + ${x:-0}))
            [ "${r:-0}" -gt "$rss" ] && rss=$r
        done
        total=$((total + n))
        echo "$h: ${workers[$h]} processes, $n executions, peak RSS $rss MB, $(find "$dir/corpus/$h" -type f | wc -l) corpus inputs"
    done
    found=$(find "$out/crashes" -type f | wc -l)
    echo "total: $total executions, $found findings"
} | tee "$out/summary.txt"
tar -C "$out" -czf "$out/fuzz-logs.tar.gz" logs crashes summary.txt
[ "$(find "$out/crashes" -type f | wc -l)" -eq 0 ]
