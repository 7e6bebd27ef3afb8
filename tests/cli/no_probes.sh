#!/usr/bin/env bash
# A trace made with --no-probes measured nothing (issue 37, round 15): its status is "unjudged", not
# "ok"; show says so, the report does not call the checkpoint healthy, and compare refuses it as a
# run or as a golden (exit 2).
#   usage: no_probes.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
"$bin" trace "$root/golden/seed-bug-v4" --backend cpu --no-probes --json --out "$tmp/np.h5" >"$tmp/np.json" 2>"$tmp/err"
rc=$?
ok "trace --no-probes: exit $rc, status unjudged ($(head -c 200 "$tmp/err"))" '[ $rc -eq 0 ] && [ "$(json_field status "$tmp/np.json")" = unjudged ]'
"$bin" show "$tmp/np.h5" >"$tmp/show.txt" 2>&1
ok "show says unjudged" 'grep -q "unjudged" "$tmp/show.txt" && ! grep -qi "no divergence" "$tmp/show.txt"'
"$bin" report "$tmp/np.h5" --html "$tmp/np.html" >/dev/null 2>&1
ok "the report does not call it healthy" 'grep -q "<b>unjudged</b>" "$tmp/np.html" && ! grep -q "every stage is within" "$tmp/np.html"'
"$bin" trace "$root/golden/clean-v4" --backend cpu --out "$tmp/c.h5" >/dev/null 2>&1
"$bin" compare "$tmp/np.h5" "$tmp/c.h5" >/dev/null 2>"$tmp/e1"; r1=$?
"$bin" compare "$tmp/c.h5" "$tmp/np.h5" >/dev/null 2>"$tmp/e2"; r2=$?
ok "compare refuses it as the run ($r1) and as the golden ($r2)" \
   '[ $r1 -eq 2 ] && [ $r2 -eq 2 ] && grep -q "unjudged" "$tmp/e1" && grep -q "unjudged" "$tmp/e2"'
echo "no_probes: $pass passed, $fail failed"
[ $fail -eq 0 ]
