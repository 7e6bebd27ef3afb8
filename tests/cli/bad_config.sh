#!/usr/bin/env bash
# Out-of-range config values and --layers (issue 21): each is exit 2 naming the key (or option)
# and never a crash, a hang or a silent default. Cases from the hostile-user review: hc_mult 0
# (was SIGFPE), a layer count of 2^32+1 or 1e12, huge Sinkhorn iterations (hang), huge rope and
# hidden dims, a negative or zero norm epsilon, zero Sinkhorn iterations, --layers past the model.
#   usage: bad_config.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$(cd "$2" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
case_() { # key new_value expected_text
  local key="$1" val="$2" want="$3"
  rm -rf "$tmp/ck"; mkdir "$tmp/ck"
  cp "$root/golden/clean-v4/model.safetensors" "$tmp/ck/model.safetensors"
  sed "s/^\(  \"$key\": \)[^,]*,/\1$val,/" "$root/golden/clean-v4/config.json" >"$tmp/ck/config.json"
  if cmp -s "$tmp/ck/config.json" "$root/golden/clean-v4/config.json"; then
    echo "FAIL $key=$val: the case did not change the config"; fail=$((fail + 1)); return
  fi
  timeout 20 "$bin" trace --force "$tmp/ck" --backend cpu --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$want" "$tmp/err"; then pass=$((pass + 1))
  else echo "FAIL $key=$val: exit $rc: $(head -c 300 "$tmp/err")"; fail=$((fail + 1)); fi
}
case_ hc_mult 0 "'hc_mult' is 0"
case_ num_hidden_layers 4294967297 "'num_hidden_layers' is 4294967297"
case_ num_hidden_layers 1e12 "'num_hidden_layers'"
case_ hc_sinkhorn_iters 1000000000 "'hc_sinkhorn_iters'"
case_ hc_sinkhorn_iters 0 "'hc_sinkhorn_iters' is 0"
case_ qk_rope_head_dim 1000000000 "'qk_rope_head_dim'"
case_ hidden_size 1000000000 "'hidden_size'"
case_ rms_norm_eps -1e-6 "'rms_norm_eps' is -1e-06"
case_ rms_norm_eps 0 "'rms_norm_eps' is 0"
case_ num_experts_per_tok 99 "num_experts_per_tok 99"
for l in 4294967296 2-99999999999 7-1; do
  "$bin" trace --force "$root/golden/clean-v4" --backend cpu --layers "$l" --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] && grep -q -- "--layers" "$tmp/err"; then pass=$((pass + 1))
  else echo "FAIL --layers $l: exit $rc: $(head -c 300 "$tmp/err")"; fail=$((fail + 1)); fi
done
# layers past the model (2 layers): refused, not a warning
"$bin" trace --force "$root/golden/clean-v4" --backend cpu --layers 5 --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "has 2 layers" "$tmp/err"; then pass=$((pass + 1))
else echo "FAIL --layers 5 on a 2-layer model: exit $rc: $(head -c 300 "$tmp/err")"; fail=$((fail + 1)); fi
# inputs must be regular files: a FIFO as model.safetensors, as config.json, as --tokens-file is
# refused at once (reading one blocks forever)
for f in model.safetensors config.json; do
  rm -rf "$tmp/ck"; mkdir "$tmp/ck"
  # every file is copied in (links out of the folder are refused)
  [ $f = model.safetensors ] || cp "$root/golden/clean-v4/model.safetensors" "$tmp/ck/model.safetensors"
  [ $f = config.json ] || cp "$root/golden/clean-v4/config.json" "$tmp/ck/config.json"
  mkfifo "$tmp/ck/$f"
  timeout 20 "$bin" trace --force "$tmp/ck" --backend cpu --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] && grep -q "$f: not a regular file" "$tmp/err"; then pass=$((pass + 1))
  else echo "FAIL FIFO as $f: exit $rc: $(head -c 300 "$tmp/err")"; fail=$((fail + 1)); fi
done
mkfifo "$tmp/tokfifo"
timeout 20 "$bin" trace --force "$root/golden/clean-v4" --backend cpu --tokens-file "$tmp/tokfifo" --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "not a regular file" "$tmp/err"; then pass=$((pass + 1))
else echo "FAIL FIFO as --tokens-file: exit $rc: $(head -c 300 "$tmp/err")"; fail=$((fail + 1)); fi
# outputs: a FIFO given as --out is refused, not replaced; a trace's mode follows the umask
mkfifo "$tmp/fifo"
timeout 20 "$bin" trace --force "$root/golden/clean-v4" --backend cpu --out "$tmp/fifo" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && [ -p "$tmp/fifo" ] && grep -q "fifo: is a FIFO" "$tmp/err"; then pass=$((pass + 1))
else echo "FAIL --out FIFO: exit $rc, still a FIFO: $([ -p "$tmp/fifo" ] && echo yes || echo no)"; fail=$((fail + 1)); fi
(umask 022; "$bin" trace --force "$root/golden/clean-v4" --backend cpu --out "$tmp/m.h5" >/dev/null 2>&1)
mode=$(stat -c %a "$tmp/m.h5")
if [ "$mode" = 644 ]; then pass=$((pass + 1)); else echo "FAIL trace mode under umask 022: $mode"; fail=$((fail + 1)); fi
# DeepSeek-V4's norm_topk_prob is not read by transformers' DeepseekV4 (its router always
# renormalises): false replays the same rows as true, not unnormalised weights
rm -rf "$tmp/nt"; mkdir "$tmp/nt"; cp "$root/golden/clean-v4/model.safetensors" "$tmp/nt/"
sed 's/^\(  "norm_topk_prob": \)true,/\1false,/' "$root/golden/clean-v4/config.json" >"$tmp/nt/config.json"
"$bin" trace --force "$root/golden/clean-v4" --backend cpu --out "$tmp/nt1.h5" -q >/dev/null 2>&1
"$bin" trace --force "$tmp/nt" --backend cpu --out "$tmp/nt2.h5" -q >/dev/null 2>&1; rc=$?
"$bin" show "$tmp/nt1.h5" --csv >"$tmp/nt1.csv" 2>/dev/null; "$bin" show "$tmp/nt2.h5" --csv >"$tmp/nt2.csv" 2>/dev/null
if grep -q '"norm_topk_prob": false' "$tmp/nt/config.json" && [ $rc -eq 0 ] && [ -s "$tmp/nt1.csv" ] && cmp -s "$tmp/nt1.csv" "$tmp/nt2.csv"; then pass=$((pass + 1))
else echo "FAIL DeepSeek-V4 norm_topk_prob false: exit $rc, rows equal to true's: $(cmp -s "$tmp/nt1.csv" "$tmp/nt2.csv" && echo yes || echo no)"; fail=$((fail + 1)); fi
echo "bad config: $pass passed, $fail failed"
[ $fail -eq 0 ]
