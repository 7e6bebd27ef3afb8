#!/bin/sh
# bench_layer.sh — whole-trace timing on one checkpoint, in one run, with its ceilings:
#   * the trace (both paths, both modes, every probe) against the same replay without probes
#     (--no-probes): the probes' overhead (issue 6: target <= 1.5x);
#   * the touched weight bytes (reported by the trace) against the read bandwidth of the same
#     safetensors files measured here (issue 11's I/O floor);
#   * with PEER (a python3 that has torch), the PyTorch eager peer of the same replay
#     (bench/peer_torch.py, same tokens, same device) beside the trace: issue 11's
#     peer_s / trace_s (target >= 3). It replays layer 0, so the ratio is per layer only on a
#     one-layer checkpoint (synth --size full); the script says so otherwise.
# usage: bench/bench_layer.sh NVFP4DBG CHECKPOINT BACKEND "16 256 4096" [PEER]
set -eu
bin=$1; ck=$2; be=${3:-cuda}; sizes=${4:-"16 256"}; peer=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
vocab=$(grep -o '"vocab_size": *[0-9]*' "$ck/config.json" | grep -o '[0-9]*$')
t0=$(date +%s.%N)
cat "$ck"/*.safetensors > /dev/null
t1=$(date +%s.%N)
bytes=$(cat "$ck"/*.safetensors | wc -c)
bw=$(echo "$bytes $t0 $t1" | awk '{ printf "%.3f", $1 / ($3 - $2) / 1e9 }')
echo "checkpoint $ck: $bytes bytes, read at $bw GB/s (first read; page cache may help later runs)"
layers=$(grep -o '"num_hidden_layers": *[0-9]*' "$ck/config.json" | grep -o '[0-9]*$')
if [ -n "$peer" ]; then
  pdev=cpu; [ "$be" = cuda ] && pdev=cuda
  [ "$layers" -gt 1 ] && echo "note: $layers layers; the trace replays all of them, the peer layer 0 only (peer/trace is not per layer)"
  printf "%8s %12s %12s %8s %14s %10s %12s %10s %10s\n" tokens trace_s noprobe_s ratio weight_GB io_floor_s trace/io peer_s peer/trace
else
  printf "%8s %12s %12s %8s %14s %10s %12s\n" tokens trace_s noprobe_s ratio weight_GB io_floor_s trace/io
fi
for T in $sizes; do
  awk -v n="$T" -v v="$vocab" 'BEGIN { for (i = 0; i < n; i++) print (i * 7919 + 13) % v }' > /tmp/bench-tokens.txt
  "$bin" trace --force "$ck" --backend "$be" --tokens-file /tmp/bench-tokens.txt --json --out /tmp/bench.h5 > /tmp/bench-a.json || [ $? -eq 1 ]
  "$bin" trace --force "$ck" --backend "$be" --tokens-file /tmp/bench-tokens.txt --json --no-probes --out /tmp/bench-np.h5 > /tmp/bench-b.json || [ $? -eq 1 ]
  a=$(grep -o '"elapsed_s": [0-9.e+-]*' /tmp/bench-a.json | awk '{ print $2 }')
  b=$(grep -o '"elapsed_s": [0-9.e+-]*' /tmp/bench-b.json | awk '{ print $2 }')
  w=$(grep -o '"weight_bytes": [0-9]*' /tmp/bench-a.json | awk '{ print $2 }')
  row=$(echo "$T $a $b $w $bw" | awk '{ io = $4 / ($5 * 1e9); printf "%8d %12.4f %12.4f %8.2f %14.3f %10.4f %12.2f", $1, $2, $3, $2 / $3, $4 / 1e9, io, $2 / io }')
  if [ -n "$peer" ]; then
    # two replays in one process, the faster counts: the peer's one-time set-up (cuBLAS
    # handles, kernel loading) is left out, which can only favour the peer
    "$peer" "$here/peer_torch.py" "$ck" --tokens "$T" --layer 0 --device "$pdev" --repeat 2 > /tmp/bench-peer.txt
    p=$(grep '^peer_elapsed_s ' /tmp/bench-peer.txt | awk '{ print $2 }')
    row="$row $(echo "$p $a" | awk '{ printf "%10.4f %10.2f", $1, $1 / $2 }')"
  fi
  echo "$row"
done
