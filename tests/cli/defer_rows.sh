#!/usr/bin/env bash
# Probe figures kept on the device until the rows of a layer are flushed (src/pipeline/rowq.h,
# issue 20) give the same trace, row for row and bit for bit, as rows judged one by one
# (NVFP4DBG_NO_DEFER=1). The CPU backend writes its results at once, so the deferred runs here
# also set NVFP4DBG_TEST_DEFER_EMULATE=1: every queued figure lands in a private copy and its
# target is zero until the flush, so a row judged, or a figure read, before its flush changes the
# trace. Checked on the clean and seed-bug fixtures, on a fault whose isolated verdict the chained
# row inherits, and on a zero weight global scale whose Inf/NaN travels down both paths (the rows after
# it are nan_input only through their input's non-finite count, a deferred figure).
#   usage: defer_rows.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
# every figure of every row, timings left out
rows() { grep -v '"elapsed_s"\|"upload_s"\|"trace"\|"next_command"' "$1"; }
"$bin" synth "$tmp/fault" --recipe deepseek_v4 --inject weight-scale-nan@layers.1.mlp.experts.3.up_proj >/dev/null
"$bin" synth "$tmp/inf" --recipe deepseek_v4 --inject weight-global-scale-zero@layers.0.self_attn.q_a_proj >/dev/null
for ck in "$root/golden/clean-v4" "$root/golden/seed-bug-v4" "$tmp/fault" "$tmp/inf"; do
  n=$(basename "$ck")
  NVFP4DBG_NO_DEFER=1 "$bin" trace --force "$ck" --backend cpu --json --out "$tmp/$n-off.h5" >"$tmp/$n-off.json" 2>/dev/null
  a=$?
  NVFP4DBG_TEST_DEFER_EMULATE=1 "$bin" trace --force "$ck" --backend cpu --json --out "$tmp/$n-on.h5" >"$tmp/$n-on.json" 2>/dev/null
  b=$?
  "$bin" trace --force "$ck" --backend cpu --json >"$tmp/$n-plain.json" 2>/dev/null
  c=$?
  ok "$n: same exit status with deferral off, emulated and on ($a, $b, $c)" '[ $a -eq $b ] && [ $a -eq $c ] && [ $a -le 1 ]'
  ok "$n: the same rows, bit for bit, off and emulated" 'diff <(rows "$tmp/$n-off.json") <(rows "$tmp/$n-on.json") >/dev/null'
  ok "$n: the same rows off and on" 'diff <(rows "$tmp/$n-off.json") <(rows "$tmp/$n-plain.json") >/dev/null'
  "$bin" show "$tmp/$n-off.h5" --csv >"$tmp/$n-off.csv" 2>/dev/null
  "$bin" show "$tmp/$n-on.h5" --csv >"$tmp/$n-on.csv" 2>/dev/null
  ok "$n: the trace files hold the same rows in the same order" 'cmp -s "$tmp/$n-off.csv" "$tmp/$n-on.csv" && [ $(wc -l <"$tmp/$n-on.csv") -gt 20 ]'
  ok "$n: rows were written" '[ $(grep -c "\"verdict\"" "$tmp/$n-on.json") -gt 20 ]'
done
ok "the fault is found with deferral" 'grep -q "\"first_divergence\": \"layers.1.mlp.experts.3.up_proj\"" "$tmp/fault-on.json"'
# the chained row of the broken expert inherits its isolated verdict at the flush
ok "the chained row inherits the isolated verdict" \
  '[ "$(grep -c "layers.1.mlp.experts.3.up_proj,.*chained" "$tmp/fault-on.csv")" -eq 1 ] && ! grep "layers.1.mlp.experts.3.up_proj,.*chained" "$tmp/fault-on.csv" | grep -q ",ok,"'
ok "NaN travels: rows judged nan_input by their input's count" '[ $(grep -c ",nan_input," "$tmp/inf-on.csv") -gt 5 ]'
echo "defer rows: $pass passed, $fail failed"
[ $fail -eq 0 ]
