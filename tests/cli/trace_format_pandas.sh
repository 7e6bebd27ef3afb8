#!/usr/bin/env bash
# The pandas snippet of docs/trace-format.md, run as written on a real trace (issue 22): string
# columns come out as str, so filtering by a stage name finds its rows; the DataFrame holds the
# rows `nvfp4dbg show --csv` prints, with the same figures. Skips (77) without a python3 that
# imports h5py and pandas (the main suite needs no Python).
#   usage: trace_format_pandas.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; root="$(cd "$2" && pwd)"
py=""
for cand in $(type -ap python3); do
  if "$cand" -c 'import h5py, pandas' 2>/dev/null; then py=$cand; break; fi
done
[ -n "$py" ] || { echo "SKIP: no python3 with h5py and pandas"; exit 77; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
awk '/^## Reading it/{m=1; next} m==1 && /^```python/{m=2; next} m==2 && /^```/{exit} m==2{print}' \
  "$root/docs/trace-format.md" >snippet.py
[ "$(wc -l <snippet.py)" -gt 10 ] || { echo "FAIL: no snippet under '## Reading it' in docs/trace-format.md"; exit 1; }
"$bin" trace --force "$root/golden/seed-bug-v4" --backend cpu >/dev/null 2>&1   # writes nvfp4dbg-trace.h5
[ $? -eq 1 ] || { echo "FAIL: trace of the seed did not exit 1"; exit 1; }
"$bin" show nvfp4dbg-trace.h5 --csv >show.csv || { echo "FAIL: show --csv"; exit 1; }
"$py" snippet.py >out.txt 2>err.txt || { cat err.txt; echo "FAIL: the snippet does not run"; exit 1; }
cat >check.py <<'PY'
import math
exec(open("snippet.py").read())
import pandas as pd
fail = []
def check(what, cond):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond: fail.append(what)
for col in ("name", "op", "mode", "verdict"):
    check(f"column {col} holds str", all(isinstance(v, str) for v in df[col]))
check("summary attributes are str or numbers", all(not isinstance(v, bytes) for v in summary.values()))
first = df[(df.name == "layers.0.self_attn.q_a_proj") & (df["mode"] == "isolated")]
check("filtering by the stage name finds the first divergence", len(first) == 1)
check("its production output is empty, verdict scale_inverted",
      len(first) == 1 and first.iloc[0].prod_amax == 0 and first.iloc[0].verdict == "scale_inverted")
check("summary names it", summary["first_divergence"] == "layers.0.self_attn.q_a_proj" and summary["status"] == "diverged")
csv = pd.read_csv("show.csv", keep_default_na=False, na_values=["nan"])
check(f"show --csv has the DataFrame's rows ({len(csv)} vs {len(df)})", len(csv) == len(df))
check("same names, modes and verdicts in order",
      list(csv.name) == list(df.name) and list(csv["mode"]) == list(df["mode"]) and list(csv.verdict) == list(df.verdict))
def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-7 * (1 + abs(a))
for fig in ("cosine", "sqnr_db", "ref_amax", "prod_amax", "floor_sqnr_db"):
    check(f"{fig}: the same in both", all(same(float(x), float(y)) for x, y in zip(csv[fig], df[fig])))
raise SystemExit(1 if fail else 0)
PY
"$py" check.py
