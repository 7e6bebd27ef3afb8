# stacks_lib.sh — shared by the stack-knob tests (runtime_stacks.sh, scale_stacks.sh); sourced after
# lib.sh, with $bin (nvfp4dbg) and $be (the backend) set:
#   trace OUT.json CKPT [ARGS]  trace --json with the test backend into OUT.json, its exit code in $rc
#   tiny_clean FAMILY FORMAT    synthesise a tiny FAMILY checkpoint in FORMAT as $ck ($tmp/FAMILY-FORMAT,
#                               label $l) and check that it traces clean under the default stack;
#                               returns 1 (a failure counted) when synth fails
#   stack_trace JSON CKPT STACK   trace CKPT under STACK into JSON, then its diagnosis in $d_stage (first
#                               divergence), $d_cause, $d_proof, $d_repair, $d_next (next command)
#   next_clears LABEL CKPT STACK STAGE  after stack_trace: the next command switches STAGE back under
#                               STACK, and the trace it runs has STAGE ok and diverging elsewhere (or not)
trace() {
  local out="$1"; shift
  "$bin" trace --force "$@" --backend "$be" --json --out "$tmp/t.h5" >"$out" 2>"$tmp/err"
  rc=$?
}
tiny_clean() {
  ck="$tmp/$1-$2"; l="$1 $2"
  "$bin" synth "$ck" --recipe "$1" --size tiny --format "$2" >/dev/null 2>"$tmp/err" ||
    { echo "FAIL synth $1 $2: $(cat "$tmp/err")"; fail=$((fail + 1)); return 1; }
  trace "$tmp/d.json" "$ck"
  ok "$l: clean under the default stack (exit $rc)" '[ $rc -eq 0 ]'
}
stack_trace() {
  trace "$1" "$2" --stack "$3"
  d_stage=$(json_field first_divergence "$1"); d_cause=$(json_field cause "$1")
  d_proof=$(json_field proof "$1"); d_repair=$(json_field repair "$1"); d_next=$(json_field next_command "$1")
}
next_clears() {
  local label="$1" ck="$2" stack="$3" stage="$4" v first
  ok "$label: the next command switches the stage back (got: $d_next)" '[[ "$d_next" == "nvfp4dbg trace $ck --stack $stack --override $stage."* ]]'
  local -a argv
  read -r -a argv <<<"${d_next#nvfp4dbg trace }"
  trace "$tmp/n.json" "${argv[@]}"
  v=$(row_verdict "$stage" "$tmp/n.json"); first=$(json_field first_divergence "$tmp/n.json")
  ok "$label: after the next command $stage is ok (exit $rc, verdict '$v', first divergence now '$first')" \
    '[ "$v" = ok ] && [ "$first" != "$stage" ]'
}
