# plant_check.sh — the start of the planted-fault tests (planted_faults.sh, family_faults.sh,
# gpt_oss_faults.sh), sourced as `. "$(dirname "$0")/plant_check.sh" NVFP4DBG SOURCE_ROOT`: tests/lib.sh,
# then $bin, $root and $conf (golden/conformance).
#   check FAMILY FORMAT MODULE STAGE FAULT CAUSE: synth --from plants FAULT at MODULE; the trace
#   must name STAGE with CAUSE (proven by repair or a static fact) and the next command it prints,
#   run as printed, must leave STAGE ok. Counts into $pass / $fail.
#   check_nvfp4_list: check FAMILY nvfp4 MODULE MODULE FAULT CAUSE for each line
#   "FAMILY MODULE FAULT CAUSE" of its input.
bin="$1"; root="$2"
conf="$root/golden/conformance"
. "$(dirname "$0")/../lib.sh"

field() { tr -d '\n' <"$2" | sed -n "s/.*\"$1\": *\"\([^\"]*\)\".*/\1/p" | head -n 1; }

check() { # family format module-in-checkpoint stage fault cause
  local fam="$1" fmt="$2" mod="$3" stage="$4" fault="$5" cause="$6" extra=()
  local src="$conf/$fam/$fmt" ck="$tmp/ck"
  rm -rf "$ck" "$ck.faults.json"
  if ! "$bin" synth "$ck" --from "$src" --inject "$fault@$mod" >/dev/null 2>"$tmp/err"; then
    echo "FAIL synth --from $fam/$fmt $fault@$mod: $(cat "$tmp/err")"; fail=$((fail + 1)); return
  fi
  case "$fault" in nibble-swap|gate-up-swap|scale-exponent-shift=*|weight-mul=*) extra=(--reference-checkpoint "$conf/$fam/bf16") ;; esac
  "$bin" trace --force "$ck" --backend "${ND_TEST_BACKEND:-cpu}" --json --out "$tmp/t.h5" "${extra[@]}" >"$tmp/o.json" 2>"$tmp/err"
  local rc=$? got_stage got_cause proof next
  got_stage=$(json_field first_divergence "$tmp/o.json")
  got_cause=$(json_field cause "$tmp/o.json")
  proof=$(json_field proof "$tmp/o.json")
  if [ $rc -ne 1 ] || [ "$got_stage" != "$stage" ] || [ "$got_cause" != "$cause" ] || [ "$proof" = none ]; then
    echo "FAIL $fam/$fmt $fault@$mod: exit $rc, '$got_stage' cause '$got_cause' proof '$proof' (want $stage / $cause)"
    fail=$((fail + 1)); return
  fi
  pass=$((pass + 1))
  # the printed next command, run as printed, leaves that stage ok (static facts without a
  # computable repair print none)
  next=$(grep -m1 '"next_command": "' "$tmp/o.json" | sed 's/.*: "\(.*\)",*/\1/')
  if [ -z "$next" ]; then
    # a static fact without a computable repair (no original to fit against) prints no command
    case "$cause" in nonfinite_scale|nan_weight_scale) return ;; esac
    echo "FAIL $fam/$fmt $fault@$mod: no next command for $cause"; fail=$((fail + 1)); return
  fi
  read -r -a argv <<<"${next#nvfp4dbg trace }"
  "$bin" trace --force "${argv[@]}" --backend "${ND_TEST_BACKEND:-cpu}" --json --out "$tmp/n.h5" >"$tmp/n.json" 2>/dev/null
  if grep -A40 "\"name\": \"$stage\"" "$tmp/n.json" | grep -m1 '"verdict"' | grep -q '"ok"'; then
    pass=$((pass + 1))
  else
    echo "FAIL $fam/$fmt $fault@$mod: after the next command the stage is still $(grep -A40 "\"name\": \"$stage\"" "$tmp/n.json" | grep -m1 '"verdict"')"
    fail=$((fail + 1))
  fi
}

check_nvfp4_list() { # lines: family module (= stage) fault cause
  local fam mod fault cause
  while read -r fam mod fault cause; do
    check "$fam" nvfp4 "$mod" "$mod" "$fault" "$cause"
  done
}
