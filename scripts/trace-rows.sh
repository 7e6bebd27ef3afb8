#!/usr/bin/env bash
# trace-rows.sh NVFP4DBG OUTDIR [CHECKPOINT...] — trace checkpoints and keep what a trace says in
# plain text, so two builds (or two recipe folders) can be compared row for row with `diff -r`.
#
# For every checkpoint (default: every folder under golden/conformance/*/ holding a config.json,
# plus golden/clean-v4 and golden/seed-bug-v4) and both reference numerics (the default fp32 and
# transformers'), it runs `trace --backend cpu --dump tensors --json` and writes OUTDIR/<name>.<mode>.txt:
# the exit code, h5dump of /stages (every figure of every row), /routing, /summary, /tokens and
# /tensors, and the JSON report without the fields that change from run to run (elapsed times,
# paths, the device line). Recipes come from NVFP4DBG_RECIPES as for any trace.
#
#   scripts/trace-rows.sh /tmp/old/nvfp4dbg /tmp/rows-old
#   NVFP4DBG_RECIPES=$PWD/recipes scripts/trace-rows.sh build/nvfp4dbg /tmp/rows-new
#   diff -r /tmp/rows-old /tmp/rows-new && echo identical
#
# Needs h5dump (hdf5-tools). Exit 0 when every checkpoint was traced (exit 0 or 1), 2 otherwise: of the
# defaults, golden/conformance/mxfp4/gptoss holds a few MoE weights only (a loader fixture) and its two
# traces are exit 2 (the message is kept and compared like the rest).
set -u
bin="${1:?usage: trace-rows.sh NVFP4DBG OUTDIR [CHECKPOINT...]}"
out="${2:?usage: trace-rows.sh NVFP4DBG OUTDIR [CHECKPOINT...]}"
shift 2
command -v h5dump > /dev/null || { echo "trace-rows.sh: h5dump not found (hdf5-tools)" >&2; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ $# -eq 0 ]; then
  set --
  for c in "$root"/golden/conformance/*/*/config.json; do set -- "$@" "$(dirname "$c")"; done
  set -- "$@" "$root/golden/clean-v4" "$root/golden/seed-bug-v4"
fi
mkdir -p "$out" || exit 2
tmp="$(mktemp -d)" || exit 2
trap 'rm -rf "$tmp"' EXIT
status=0
for ck in "$@"; do
  # golden/conformance/llama/nvfp4 -> conformance.llama.nvfp4
  ck="$(cd "$ck" && pwd)" || { status=2; continue; }
  name="$(echo "${ck#"$root"/golden/}" | tr '/' '.')"
  for mode in fp32 transformers; do
    f="$out/$name.$mode.txt"
    "$bin" trace "$ck" --backend cpu --dump tensors --no-color --json --ref-numerics "$mode" \
      --out "$tmp/t.h5" > "$tmp/t.json" 2> "$tmp/t.err"
    rc=$?
    {
      echo "exit $rc"
      # messages name the trace file and the checkpoint; keep the rest
      sed -e "s#$tmp/t.h5#TRACE#g" -e "s#$root/##g" "$tmp/t.err"
      grep -v -E '"(elapsed_s|upload_s|trace|device|[a-z_]*_s)":' "$tmp/t.json" | sed -e "s#$root/##g"
      if [ -s "$tmp/t.h5" ]; then
        for obj in "-d /stages" "-d /tokens" "-g /routing" "-g /summary" "-g /tensors"; do
          # shellcheck disable=SC2086
          h5dump $obj "$tmp/t.h5" 2>&1 | sed -e "s#$tmp/t.h5#TRACE#g"
        done
      fi
    } > "$f"
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
      echo "trace-rows.sh: $ck ($mode): exit $rc" >&2
      status=2
    fi
    rm -f "$tmp/t.h5"
  done
done
exit $status
