#!/bin/bash
# pandas.sh NVFP4DBG SOURCE_ROOT — runs the pandas snippet of docs/report.md, exactly as written
# there, on a real trace and checks what it prints against the trace command's own output.
# Skips (77) when no python3 on PATH imports both h5py and pandas.
set -u
bin=$1 root=$2
py=""
for cand in $(type -ap python3); do   # every python3 on PATH, e.g. a venv's and the system's
    if "$cand" -c 'import h5py, pandas' 2> /dev/null; then py=$cand; break; fi
done
[ -n "$py" ] || { echo "SKIP: no python3 with h5py and pandas"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# the block after the snippet marker, between its ```python fence and the closing fence
awk '/<!-- snippet: pandas/{m=1; next} m==1 && /^```python/{m=2; next} m==2 && /^```/{exit} m==2{print}' \
    "$root/docs/report.md" > "$tmp/snippet.py"
[ "$(wc -l < "$tmp/snippet.py")" -gt 10 ] || { bad "snippet not found in docs/report.md"; exit 1; }

"$bin" trace --force "$root/golden/seed-bug-v4" --table --out "$tmp/trace.h5" > "$tmp/trace.txt" 2>&1
[ $? -eq 1 ] || { cat "$tmp/trace.txt"; bad "trace did not exit 1"; exit 1; }
nrows=$(grep -cE '^[^ ]+ +[^ ]+ +(isolated|chained) ' "$tmp/trace.txt")
read -r first mode <<< "$(sed -n 's/^first divergence at \([^ ]*\) (\([a-z]*\)).*/\1 \2/p' "$tmp/trace.txt")"
cause=$(awk '/<== first divergence/{print $(NF-3)}' "$tmp/trace.txt")

(cd "$tmp" && "$py" snippet.py) > "$tmp/out.txt" 2> "$tmp/err.txt" || { cat "$tmp/err.txt"; bad "snippet failed"; exit 1; }
cat "$tmp/out.txt"
[ "$(head -1 "$tmp/out.txt")" = "diverged $first $mode $cause" ] || bad "summary line: '$(head -1 "$tmp/out.txt")', expected 'diverged $first $mode $cause'"
grep -q "^ *$first " "$tmp/out.txt" || bad "$first not among the worst quantized stages"
grep -qE '^layers\.0\.mlp\.gate: 16 tokens x top-2, same expert in the same slot [0-9.]+%$' "$tmp/out.txt" || bad "routing line for layers.0.mlp.gate"

# the loader's DataFrame itself: every row, decoded strings, both modes
cat > "$tmp/check.py" <<PY
exec(open("snippet.py").read().split("stages, summary, meta, routing = load_trace")[0])
stages, summary, meta, routing = load_trace("trace.h5")
assert len(stages) == $nrows, len(stages)
assert set(stages["mode"]) == {"isolated", "chained"}, set(stages["mode"])
assert all(isinstance(n, str) for n in stages["name"]), "names not decoded"
assert meta["schema"] == "nvfp4dbg-trace/1", meta["schema"]
row = stages[(stages["name"] == "$first") & (stages["mode"] == "$mode")].iloc[0]
assert row["verdict"] == "$cause", row["verdict"]
assert row["prod_amax"] == 0 and row["ref_amax"] > 0, (row["ref_amax"], row["prod_amax"])
for stage, p in routing.items():
    assert p["ref"].dtype.kind == "i" and p["ref"].shape == p["prod"].shape and p["ref"].ndim == 2, stage
print("dataframe ok:", len(stages), "rows,", len(routing), "routing entries")
PY
(cd "$tmp" && "$py" check.py) || bad "DataFrame checks"
[ $fail -eq 0 ] && echo "pandas: ok"
exit $fail
