#!/usr/bin/env bash
# A device failure mid-run (test-only fault: NVFP4DBG_TEST_FAULT_STAGE; on CUDA it is a real illegal
# address) ends the run with exit 3 and leaves a readable trace: the rows before the fault and
# status "error" — which the gate reports as a regression, never as a pass.
#   usage: device_fault.sh NVFP4DBG SOURCE_ROOT [BACKEND]
set -u
bin="$1"; root="$2"; backend="${3:-cpu}"
. "$(dirname "$0")/../lib.sh"
NVFP4DBG_TEST_FAULT_STAGE=layers.1.self_attn.q_b_proj "$bin" trace --force "$root/golden/clean-v4" --backend "$backend" \
  --out "$tmp/f.h5" >"$tmp/out" 2>"$tmp/err"
rc=$?
ok "exit 3 on a device fault (got $rc)" '[ $rc -eq 3 ]'
ok "the error names the stage" 'grep -q "layers.1.self_attn.q_b_proj" "$tmp/err"'
"$bin" compare "$tmp/f.h5" "$root/golden/traces/clean-v4.h5" --max 0 >"$tmp/cmp" 2>&1
rc=$?
ok "the partial trace opens and fails the gate (exit $rc)" '[ $rc -eq 1 ]'
ok "its status is error" 'grep -qE "status +ok +error" "$tmp/cmp"'
ok "the stage at the fault is missing" 'grep -qE "^layers.1.self_attn.q_b_proj +isolated +missing stage" "$tmp/cmp"'
echo "device fault ($backend): $pass passed, $fail failed"
[ $fail -eq 0 ]
