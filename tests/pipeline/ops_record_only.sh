#!/usr/bin/env bash
# Ops compute; the stage loop records (issue 23): no src/pipeline/ops_*.c includes a trace/ or
# probes/ header or reaches the loop's recording state (the trace writer, the row table, the
# calibration callback, the capture file, the CLI options) or its recording functions. An op hands
# rows, routing decisions and amax to its sink (src/pipeline/sink.h) instead.
#   usage: ops_record_only.sh SOURCE_ROOT
set -u
root="$1"
. "$(dirname "$0")/../lib.sh"
cd "$root" || exit 2
ops=(src/pipeline/ops_*.c)
ok "the ops files are found (${#ops[@]})" '[ ${#ops[@]} -ge 8 ] && [ -f "${ops[0]}" ]'

# includes: a trace/ or probes/ header by path, the probes' own headers by their bare names, or the
# loop's own headers (loop.h: what the loop keeps of a run; rowq.h: its pending rows)
inc=$(grep -nE '^#include "(trace/|probes/|\.\./probes/|probes\.h|verdict\.h|loop\.h|rowq\.h)' "${ops[@]}")
ok "no ops_*.c includes a trace/, probes/ or loop header${inc:+: $inc}" '[ -z "$inc" ]'

# the loop's state, through the run (r->X, c->r->X, run.X)
state='(\br|->r|\brun)(->|\.)(tw|rows|nrows|cap_rows|calib_cb|calib_user|dump_tensors|next_index|dump|opts|captured|progress|loop)\b'
hits=$(grep -nE "$state" "${ops[@]}")
ok "no ops_*.c touches the loop's recording state${hits:+: $hits}" '[ -z "$hits" ]'

# the loop's recording functions: rows, probes, verdicts, trace writing, captures
calls='\b(nd_emit_row|nd_head_logits|nd_trace_[a-z_]+|nd_probe_[a-z_]+|nd_verdict_[a-z_]+|nd_rows_[a-z_]+|nd_run_captured|nd_run_capture|nd_loop_sink)\s*\('
hits=$(grep -nE "$calls" "${ops[@]}")
ok "no ops_*.c calls a recording function of the loop${hits:+: $hits}" '[ -z "$hits" ]'

# the check itself bites: a planted line of each kind is found
printf '#include "trace/trace.h"\nx = r->tw;\ny = c->r->calib_cb;\nz = r->loop->rows;\nnd_emit_row(r, st);\n' >"$tmp/ops_planted.c"
ok "a planted trace include is caught" 'grep -qE "^#include \"(trace/|probes/)" "$tmp/ops_planted.c"'
ok "planted state accesses are caught (3)" '[ "$(grep -cE "$state" "$tmp/ops_planted.c")" -eq 3 ]'
ok "a planted recording call is caught" 'grep -qE "$calls" "$tmp/ops_planted.c"'

# what the loop keeps is out of the ops' reach: nd_run holds only an opaque pointer to it
ok "struct nd_loop is defined in loop.h only" '[ "$(grep -l "^struct nd_loop {" src/pipeline/*.h src/pipeline/*.c)" = src/pipeline/loop.h ]'
ok "nd_run holds no trace writer, rows or calibration callback" '! sed -n "/^struct nd_run {/,/^};/p" src/pipeline/run.h | grep -qE "\\b(tw|rows|calib_cb|opts|dump)\\b *;"'

# the sink is how they record: rows, routing and amax go through it
ok "ops hand rows to the sink (nd_put_row)" 'grep -q "nd_put_row" src/pipeline/ops_linear.c src/pipeline/ops_kvcache.c'
ok "ops hand routing to the sink (nd_put_routing)" '[ "$(grep -l nd_put_routing src/pipeline/ops_moe.c src/pipeline/ops_compress.c | wc -l)" -eq 2 ]'
echo "ops record only through the sink: $pass passed, $fail failed"
[ $fail -eq 0 ]
