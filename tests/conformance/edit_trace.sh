# edit_trace.sh — sourced by the bad-config scripts: copy a fixture folder, edit one of its files
# with sed (the whole file as one record, extended regexes), trace it, and expect exit 2 with a
# message. Needs lib.sh's ok, $bin and $tmp.
#   edited_trace_bad NAME SOURCE_FOLDER FILE SED_EXPRESSION EXPECTED_MESSAGE_PART
edited_trace_bad() {
  local name="$1" src="$2" file="$3" want="$5"
  rm -rf "$tmp/ck" && cp -r "$src" "$tmp/ck"
  LC_ALL=C sed -z -i -E "$4" "$tmp/ck/$file"
  ok "$name: $file edited" '! cmp -s "$tmp/ck/$file" "$src/$file"'
  "$bin" trace --force "$tmp/ck" --allow-unquantized --backend cpu --out "$tmp/t.h5" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  ok "$name: exit 2 (got $rc: $(head -c 300 "$tmp/err"))" '[ $rc -eq 2 ]'
  ok "$name: the message names '$want' ($(head -c 300 "$tmp/err"))" 'grep -qF -- "$want" "$tmp/err"'
}
