# lib.sh — the shared start of the shell tests (sourced: `. "$(dirname "$0")/../lib.sh"`): a
# private scratch folder $tmp removed on exit, the pass/fail counters and
#   ok NAME EXPR   count EXPR (evaluated) as a pass, or print "FAIL: NAME" and count a failure.
# The test ends with its own summary line and `[ $fail -eq 0 ]`.
set -u
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { if eval "$2"; then pass=$((pass + 1)); else echo "FAIL: $1"; fail=$((fail + 1)); fi; }
#   json_field KEY FILE     the first string value of "KEY" in a JSON file (as trace --json writes it)
#   row_verdict STAGE FILE  the verdict of STAGE's isolated row in a trace --json file
json_field() { grep -m1 "\"$1\":" "$2" | sed 's/.*: "\(.*\)",*/\1/'; }
row_verdict() { awk -v want="$1" '
  function val(s) { sub(/^[^:]*: "?/, "", s); sub(/"?,?$/, "", s); return s }
  /^ *"name":/ { n = val($0) }
  /^ *"mode":/ { m = val($0) }
  /^ *"verdict":/ && n == want && m == "isolated" { print val($0); exit }' "$2"; }
