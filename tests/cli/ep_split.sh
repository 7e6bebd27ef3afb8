#!/usr/bin/env bash
# Expert parallelism without NCCL (issue 12, the CPU part): the contiguous E/N split with per-rank
# partial sums and a rank-ordered combine gives the same trace as no split (the gate passes), and
# a fault in one expert's shard is attributed to the rank holding it.
#   usage: ep_split.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
for n in 2 4 8; do
  "$bin" trace --force "$root/golden/clean-v4" --backend cpu --ep "$n" --out "$tmp/ep$n.h5" >/dev/null 2>&1
  rc=$?
  ok "--ep $n traces clean (exit $rc)" '[ $rc -eq 0 ]'
  "$bin" compare "$tmp/ep$n.h5" "$root/golden/traces/clean-v4.h5" >"$tmp/cmp" 2>&1
  rc=$?
  ok "--ep $n equals no split under the gate (exit $rc: $(tail -1 "$tmp/cmp"))" '[ $rc -eq 0 ]'
done
"$bin" trace --force "$root/golden/clean-v4" --backend cpu --ep 3 --out "$tmp/bad.h5" >/dev/null 2>"$tmp/err"
rc=$?
ok "--ep 3 with 8 experts is bad usage (exit $rc)" '[ $rc -eq 2 ] && grep -q "does not divide" "$tmp/err"'
"$bin" synth "$tmp/ck" --recipe deepseek_v4 --size tiny --inject weight-global-scale-zero@layers.1.mlp.experts.5.up_proj >/dev/null
"$bin" trace --force "$tmp/ck" --backend cpu --ep 4 --out "$tmp/f.h5" >"$tmp/out" 2>&1
rc=$?
ok "the shard fault is found (exit $rc)" '[ $rc -eq 1 ]'
ok "and attributed to its rank" 'grep -q "first divergence at layers.1.mlp.experts.5.up_proj.*expert 5 is local expert 1 of EP rank 2 of 4" "$tmp/out"'
# a dense model has no experts to split: --ep is refused, not ignored (round 24: exit 0)
"$bin" trace "$root/golden/conformance/llama/nvfp4" --ep 2 --backend "${ND_TEST_BACKEND:-cpu}" --out "$tmp/dense.h5" >/dev/null 2>"$tmp/err"; rc=$?
ok "--ep 2 on a dense model: exit $rc, said" '[ $rc -eq 2 ] && grep -q "has no routed experts (a dense model)" "$tmp/err" && [ ! -e "$tmp/dense.h5" ]'
echo "ep split: $pass passed, $fail failed"
[ $fail -eq 0 ]
