#!/usr/bin/env bash
# Bounded-time libFuzzer runs of every parser of untrusted input (tests/fuzz/fuzz_*.c).
#
#   scripts/fuzz.sh [SECONDS_PER_HARNESS] [HARNESS...]      default: 60 s, every harness
#   FUZZ_JOBS=N: how many harnesses run at once (default: the number of cores)
#
# Builds the library with clang, ASan + UBSan and coverage instrumentation into build-fuzz/, links
# each harness with libFuzzer, then runs the harnesses (as many at once as there are cores) from
# their seed and regression corpora, each for the given time with -rss_limit_mb and -timeout.
# Crashes, hangs, leaks and sanitizer reports land in tests/fuzz/crashes/<harness>/; the grown
# corpora stay in build-fuzz/fuzz/corpus/ (not committed). Prints one line per harness with its
# executions and findings; exits 1 when anything was found.
# Needs clang and libclang-rt-14-dev (scripts/setup does not install them for the normal build).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(safetensors ckpt recipe stack tolerances trace tokens pipeline bundle index tokenizer bundle_recipe)
CC="${CC:-clang}"
command -v "$CC" >/dev/null || { echo "fuzz.sh: $CC not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }

B=build-fuzz
if [ ! -f "$B/build.ninja" ]; then
  CC="$CC" meson setup "$B" -Dcuda=disabled -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=false \
    -Dc_args='-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined' >/dev/null
fi
ninja -C "$B" libnd_core.a >/dev/null
mkdir -p "$B/fuzz"
# shellcheck disable=SC2046
flags=(-Wall -Wextra -g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -I"$B" -I. -Isrc -Ikernels -Iprobes -Itests $(pkg-config --cflags hdf5 jansson yaml-0.1 libpcre2-8 openblas))
libs=("$B/libnd_core.a" $(pkg-config --libs hdf5 jansson yaml-0.1 libpcre2-8 openblas) -lm -lpthread)
for h in "${harnesses[@]}"; do
  extra=()
  [ "$h" = tokens ] && extra=(src/cli/tokens.c)
  "$CC" "${flags[@]}" "tests/fuzz/fuzz_$h.c" tests/fuzz/fuzz_common.c "${extra[@]}" "${libs[@]}" -o "$B/fuzz/fuzz_$h"
done

run_one() { # harness seconds
  local h="$1" s="$2" B=build-fuzz
  local work="$B/fuzz/corpus/$h" out="tests/fuzz/crashes/$h"
  mkdir -p "$work" "$out"
  local dirs=("$work")
  for d in "tests/fuzz/corpus/$h" "tests/fuzz/regress/$h"; do [ -d "$d" ] && dirs+=("$d"); done
  local dict=()
  case "$h" in recipe|stack|tolerances) dict=(-dict=tests/fuzz/dict/yaml.dict) ;;
    *) [ -f "tests/fuzz/dict/$h.dict" ] && dict=(-dict="tests/fuzz/dict/$h.dict") ;; esac
  # the first corpus folder (the work copy) receives new inputs; the committed ones are only read
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:max_allocation_size_mb=4096:suppressions=tests/fuzz/asan.supp UBSAN_OPTIONS=print_stacktrace=1 \
    LSAN_OPTIONS=suppressions=tests/fuzz/lsan.supp \
    "$B/fuzz/fuzz_$h" "${dirs[@]}" "${dict[@]}" -max_total_time="$s" -rss_limit_mb=2048 -timeout=10 \
      -max_len=262144 -print_final_stats=1 -artifact_prefix="$out/" >"$B/fuzz/$h.log" 2>&1 || true
  local execs found
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$B/fuzz/$h.log" | grep -o '[0-9]*$' || echo 0)
  found=$(find "$out" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  echo "$h: ${execs:-0} executions in ${s} s, $(find "$work" -type f | wc -l) corpus inputs, $found findings"
}
export -f run_one
printf '%s\n' "${harnesses[@]}" | xargs -P "${FUZZ_JOBS:-$(nproc)}" -I{} bash -c "run_one {} $secs"
total=$(find tests/fuzz/crashes -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) 2>/dev/null | wc -l)
echo "fuzz.sh: $total findings in tests/fuzz/crashes/ (logs in $B/fuzz/*.log)"
# a finding on a machine that is then thrown away (CI) must be reproducible from its output alone:
# each one's report lines and the input itself (base64; replay with build-fuzz/fuzz/fuzz_H FILE)
find tests/fuzz/crashes -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) 2>/dev/null |
  while read -r f; do
    h=$(basename "$(dirname "$f")")
    echo "--- $f (harness $h)"
    grep -E 'ERROR:|SUMMARY:|ALARM|out-of-memory|#[0-9]+ 0x' "$B/fuzz/$h.log" | head -n 30
    if [ "$(stat -c %s "$f")" -le 65536 ]; then echo "input (base64):"; base64 -w 0 "$f"; echo; fi
  done
[ "$total" -eq 0 ]
