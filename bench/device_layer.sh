#!/bin/bash
# device_layer.sh — the full-size layer benchmark of issue 20 in one call on the GPU machine, with
# the binaries carried in .carry/ (scripts/device-cli.sh pack BUILD_DIR here first):
#   1. synth the full-size one-layer DeepSeek-V4 checkpoint with 48 routed experts (one EP rank's
#      share of 384; bench/RESULTS.md "Full-size layer": 141 s on 16 cores, 16.5 GB);
#   2. the single-stream read bandwidth of its safetensors (cat, page cache: the I/O floor);
#   3. per token count: the trace with probe results deferred (one download per layer), the same
#      trace with NVFP4DBG_NO_DEFER=1 (rows checked identical), peak host RSS of both, and the
#      PyTorch peer (bench/peer_torch.py, best of 2 replays in one process);
#   4. NVFP4DBG_PROFILE per-stage times (deferred) at the smallest and the largest token count;
#   5. $OUT/<date>-<device>-layer.json in issue 20's schema, a summary, and the logs as one tar.
# Timed runs past the time budget are skipped (the no-deferral run of the largest count first)
# and the JSON says which.
#   usage: bench/device_layer.sh OUTDIR [--size full|small|tiny] [--backend cuda|cpu]
#          [--tokens "16 256 4096"] [--ckpt DIR] [--budget SECONDS]
#   env:   PEER (python with torch; default python3, "none" skips the peer), COMMIT (recorded),
#          DEVICE_NAME (default from nvidia-smi, else "cpu"), NVFP4DBG (default .carry/nvfp4dbg)
# GEMM floor: the trace's gemm_flops_fp32 / 51.5 TFLOP/s + gemm_flops_bf16 / 777 TFLOP/s (SGEMM
# and BF16 GEMM ceilings measured on the H200, bench/RESULTS.md); override with SGEMM_TFLOPS and
# BF16_TFLOPS.
set -u
out=$1; shift
size=full; be=cuda; sizes="16 256 4096"; ck=""; budget=480
while [ $# -gt 0 ]; do
  case $1 in
    --size) size=$2; shift 2 ;;
    --backend) be=$2; shift 2 ;;
    --tokens) sizes=$2; shift 2 ;;
    --ckpt) ck=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    *) echo "device_layer.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${NVFP4DBG:-$root/.carry/nvfp4dbg}
peer=${PEER:-python3}
sg=${SGEMM_TFLOPS:-51.5}; bg=${BF16_TFLOPS:-777}
if [ -d "$root/.carry/lib" ]; then
  . "$root/scripts/device-carry.sh"; cuda_lib_path
  export LD_LIBRARY_PATH="$root/.carry/lib:${LD_LIBRARY_PATH:-}"
fi
export NVFP4DBG_RECIPES="$root/recipes"
mkdir -p "$out"
logs=$(mktemp -d); work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
dev=${DEVICE_NAME:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)}
[ -n "$dev" ] || dev=cpu
tag=$(echo "$dev" | tr 'A-Z ' 'a-z-' | sed 's/nvidia-//')
date=$(date -u +%Y-%m-%d)
log="$logs/summary.txt"
say() { echo "$*" | tee -a "$log"; }
say "device $dev, backend $be, size $size, tokens $sizes, commit ${COMMIT:-unknown}, budget ${budget} s"

# peak RSS (VmHWM, kB) of a command run in the background; its exit status in $rc
run_rss() {
  "$@" &
  local pid=$! hwm=0 v
  while kill -0 $pid 2>/dev/null; do
    v=$(awk '/^VmHWM:/ { print $2 }' /proc/$pid/status 2>/dev/null)
    [ -n "$v" ] && [ "$v" -gt "$hwm" ] && hwm=$v
    sleep 0.05
  done
  wait $pid; rc=$?
  rss_kb=$hwm
}

if [ -z "$ck" ]; then
  ck="$work/layer"
  t0=$(date +%s.%N)
  if [ "$size" = full ]; then
    "$bin" synth "$ck" --recipe deepseek_v4 --size full --layers 1 --experts 48 > "$logs/synth.log" 2>&1
  else
    "$bin" synth "$ck" --recipe deepseek_v4 --size "$size" --layers 1 > "$logs/synth.log" 2>&1
  fi
  src=$?
  t1=$(date +%s.%N)
  say "synth: exit $src, $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s, $(du -sh "$ck" | cut -f1)"
  [ $src -eq 0 ] || { tar -C "$logs" -czf "$out/logs.tar.gz" .; exit 3; }
fi
vocab=$(grep -o '"vocab_size": *[0-9]*' "$ck/config.json" | grep -o '[0-9]*$')
cat "$ck"/*.safetensors > /dev/null   # into the page cache, as the recorded runs
t0=$(date +%s.%N); cat "$ck"/*.safetensors > /dev/null; t1=$(date +%s.%N)
bytes=$(cat "$ck"/*.safetensors | wc -c)
bw=$(awk -v n="$bytes" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", n / (b - a) / 1e9 }')
say "safetensors: $bytes bytes, cat at $bw GB/s (page cache)"

field() { grep -o "\"$1\": [0-9.e+-]*" "$2" | head -n 1 | awk '{ print $2 }'; }
rows() { grep -v '"elapsed_s"\|"upload_s"\|"trace"\|"next_command"' "$1"; }
json_rows=""; skipped=""
largest=$(echo $sizes | awk '{ print $NF }'); smallest=$(echo $sizes | awk '{ print $1 }')
printf "%8s %10s %10s %9s %9s %10s %10s %10s %10s %11s\n" tokens trace_s nodefer_s rss_GB rss_nd_GB peer_s io_floor_s gemm_flr_s peer/trace trace/floor | tee -a "$log"
for T in $sizes; do
  awk -v n="$T" -v v="$vocab" 'BEGIN { for (i = 0; i < n; i++) print (i * 7919 + 13) % v }' > "$work/tok.txt"
  run_rss "$bin" trace --force "$ck" --backend "$be" --tokens-file "$work/tok.txt" --json --out "$work/on.h5" > "$logs/trace-$T.json" 2> "$logs/trace-$T.err"
  rc_on=$rc; rss_on=$rss_kb
  a=$(field elapsed_s "$logs/trace-$T.json"); w=$(field weight_bytes "$logs/trace-$T.json")
  f32=$(field gemm_flops_fp32 "$logs/trace-$T.json"); f16=$(field gemm_flops_bf16 "$logs/trace-$T.json")
  nd=""; rss_nd=""; same="not run"
  if [ "$T" = "$largest" ] && [ $(elapsed) -gt $((budget * 2 / 3)) ]; then
    skipped="$skipped nodefer@$T"
  else
    run_rss env NVFP4DBG_NO_DEFER=1 "$bin" trace --force "$ck" --backend "$be" --tokens-file "$work/tok.txt" --json --out "$work/off.h5" > "$logs/nodefer-$T.json" 2> "$logs/nodefer-$T.err"
    rc_off=$rc; rss_nd=$rss_kb
    nd=$(field elapsed_s "$logs/nodefer-$T.json")
    if [ $rc_on -eq $rc_off ] && diff <(rows "$logs/trace-$T.json") <(rows "$logs/nodefer-$T.json") > /dev/null; then same=identical; else same="DIFFER (exit $rc_on vs $rc_off)"; fi
  fi
  p=""
  if [ "$peer" != none ] && [ $(elapsed) -lt $budget ]; then
    pdev=cpu; [ "$be" = cuda ] && pdev=cuda
    "$peer" "$here/peer_torch.py" "$ck" --tokens "$T" --layer 0 --device "$pdev" --repeat 2 > "$logs/peer-$T.txt" 2>&1
    p=$(grep '^peer_elapsed_s ' "$logs/peer-$T.txt" | awk '{ print $2 }')
  elif [ "$peer" != none ]; then skipped="$skipped peer@$T"; fi
  line=$(awk -v T="$T" -v a="${a:-nan}" -v nd="${nd:-nan}" -v r1="$rss_on" -v r2="${rss_nd:-0}" -v p="${p:-nan}" \
    -v w="${w:-0}" -v bw="$bw" -v f32="${f32:-0}" -v f16="${f16:-0}" -v sg="$sg" -v bg="$bg" 'BEGIN {
      io = w / (bw * 1e9); g = f32 / (sg * 1e12) + f16 / (bg * 1e12); fl = io > g ? io : g
      printf "%8d %10s %10s %9.2f %9.2f %10s %10.4f %10.4f %10s %11.2f\n", T, a, nd, r1 / 1048576, r2 / 1048576, p, io, g,
        (p == "nan" || a == "nan") ? "nan" : sprintf("%.2f", p / a), a / fl
      printf "JSON {\"tokens\": %d, \"trace_s\": %s, \"peer_s\": %s, \"io_floor_s\": %.4f, \"gemm_floor_s\": %.4f, \"trace_nodefer_s\": %s, \"rss_gb\": %.3f, \"rss_nodefer_gb\": %.3f, \"weight_bytes\": %d}\n",
        T, a == "" ? "null" : a, p == "nan" ? "null" : p, io, g, nd == "nan" ? "null" : nd, r1 / 1048576, r2 / 1048576, w }')
  echo "$line" | grep -v '^JSON' | tee -a "$log"
  say "    exit $rc_on; rows with and without deferral: $same"
  j=$(echo "$line" | grep '^JSON' | sed 's/^JSON //')
  json_rows="$json_rows${json_rows:+, }$j"
done
for T in $smallest $largest; do
  [ $(elapsed) -lt $budget ] || { skipped="$skipped profile@$T"; continue; }
  awk -v n="$T" -v v="$vocab" 'BEGIN { for (i = 0; i < n; i++) print (i * 7919 + 13) % v }' > "$work/tok.txt"
  NVFP4DBG_PROFILE=1 "$bin" trace --force "$ck" --backend "$be" --tokens-file "$work/tok.txt" --out "$work/p.h5" > /dev/null 2> "$logs/profile-$T.txt"
  say "profile $T tokens: top stages"
  grep '^profile:' "$logs/profile-$T.txt" | sort -k4 -g -r | head -n 8 | tee -a "$log"
done
[ -n "$skipped" ] && say "skipped for time:$skipped"
say "total $(elapsed) s"
cat > "$out/$date-$tag-layer.json" <<JSON
{"device": "$dev", "date": "$date", "commit": "${COMMIT:-unknown}", "backend": "$be", "size": "$size",
 "read_gb_s": $bw, "sgemm_tflops": $sg, "bf16_tflops": $bg, "skipped": "${skipped# }",
 "layer": [$json_rows],
 "kernels": []}
JSON
cp "$log" "$out/summary.txt"
tar -C "$logs" -czf "$out/logs.tar.gz" .
rm -rf "$logs"
