#!/usr/bin/env bash
# trace_disk_full.sh NVFP4DBG — `nvfp4dbg trace` (and sensitivity --recipe-out) onto a full disk and onto an unwritable path.
# Each must exit 2 with "PATH: ..." on stderr, leave no stray temporary file, and leave either no
# trace or one that opens with status "incomplete" (so compare refuses it). The full disks are
# small tmpfs mounts (4 KB: full before the first row; 48 KB: full mid-run); the unwritable
# paths are a read-only mount and a path under a regular file. Skips (77) where mount is not
# permitted (not root, or no CAP_SYS_ADMIN).
set -u
N="$1"
W=$(mktemp -d "${TMPDIR:-/tmp}/nd_disk_full.XXXXXX")
mnt="$W/mnt"
mkdir -p "$mnt"
cleanup() { mountpoint -q "$mnt" && umount "$mnt"; rm -rf "$W"; }
trap cleanup EXIT
if ! mount -t tmpfs -o size=4k tmpfs "$mnt" 2>/dev/null; then echo "skip: cannot mount a tmpfs"; exit 77; fi
umount "$mnt"
"$N" synth "$W/ck" --recipe deepseek_v4 --size tiny >/dev/null || { echo "FAIL: synth"; exit 1; }
"$N" trace --force "$W/ck" --backend cpu --out "$W/full.h5" >/dev/null 2>&1
[ $? -le 1 ] || { echo "FAIL: trace on a roomy disk"; exit 1; }
fail=0
check() { # what out rc errfile
  local what="$1" out="$2" rc="$3" err="$4"
  if [ "$rc" -ne 2 ]; then echo "FAIL $what: exit $rc (want 2): $(cat "$err")"; fail=1; fi
  if ! grep -q "$out: " "$err"; then echo "FAIL $what: message does not name $out: $(cat "$err")"; fail=1; fi
  if ls "$(dirname "$out")/.$(basename "$out")".*.tmp >/dev/null 2>&1; then echo "FAIL $what: stray temporary file"; fail=1; fi
  if [ -f "$out" ]; then
    "$N" compare "$out" "$W/full.h5" >/dev/null 2>"$W/cmp.err"
    local crc=$?
    if [ $crc -ne 2 ] || ! grep -q "incomplete" "$W/cmp.err"; then
      echo "FAIL $what: the left trace is not a readable incomplete trace (compare exit $crc: $(cat "$W/cmp.err"))"; fail=1
    fi
  fi
  echo "$what: exit $rc: $(head -1 "$err")"
}
for size in 4k 48k; do
  mount -t tmpfs -o size=$size tmpfs "$mnt"
  "$N" trace --force "$W/ck" --backend cpu --out "$mnt/x.h5" >/dev/null 2>"$W/err"
  check "disk full ($size)" "$mnt/x.h5" $? "$W/err"
  umount "$mnt"
done
mount -t tmpfs -o ro,size=64k tmpfs "$mnt"
"$N" trace --force "$W/ck" --backend cpu --out "$mnt/x.h5" >/dev/null 2>"$W/err"
check "read-only mount" "$mnt/x.h5" $? "$W/err"
umount "$mnt"
touch "$W/afile"
"$N" trace --force "$W/ck" --backend cpu --out "$W/afile/x.h5" >/dev/null 2>"$W/err"
check "path under a file" "$W/afile/x.h5" $? "$W/err"
# sensitivity --recipe-out onto a full disk: exit 2, and the folder it names is left as it was
# (absent, or the empty folder it was), so that the same command runs again once there is room
for fill in 56 62; do
  mount -t tmpfs -o size=64k tmpfs "$mnt"
  dd if=/dev/zero of="$mnt/fill" bs=1k count=$fill 2>/dev/null
  "$N" sensitivity "$W/ck" -q --keep 1 --backend cpu --recipe-out "$mnt/ro" >/dev/null 2>"$W/err"; rc=$?
  left=$(ls -A "$mnt" | grep -v '^fill$' | tr '\n' ' ')
  if [ $rc -ne 2 ] || [ -n "$left" ]; then echo "FAIL sensitivity --recipe-out on a full disk ($fill KB used): exit $rc, left: '$left': $(head -c 300 "$W/err")"; fail=1; fi
  # the message names the output asked for, not the staging folder removed before the exit
  if ! grep -q "$mnt/ro/" "$W/err" || grep -q '\.recipes-' "$W/err"; then echo "FAIL sensitivity --recipe-out on a full disk: the message does not name $mnt/ro: $(head -c 300 "$W/err")"; fail=1; fi
  rm -f "$mnt/fill"
  "$N" sensitivity "$W/ck" -q --keep 1 --backend cpu --recipe-out "$mnt/ro" >/dev/null 2>"$W/err"; rc=$?
  if [ $rc -ne 0 ] || [ "$(ls "$mnt/ro" | wc -l)" -ne 3 ]; then echo "FAIL sensitivity --recipe-out again with room: exit $rc: $(head -c 300 "$W/err")"; fail=1; fi
  echo "recipe-out on a full disk ($fill KB used): exit 2, nothing left; again with room: exit $rc"
  umount "$mnt"
done
# synth onto a full disk: exit 2 naming the output folder (not its staging folder), nothing left
mount -t tmpfs -o size=64k tmpfs "$mnt"
"$N" synth "$mnt/s" --recipe llama -q >/dev/null 2>"$W/err"; rc=$?
left=$(ls -A "$mnt" | tr '\n' ' ')
if [ $rc -ne 2 ] || [ -n "$left" ] || ! grep -q "$mnt/s/" "$W/err" || grep -q '\.synth-' "$W/err"; then
  echo "FAIL synth on a full disk: exit $rc, left: '$left': $(head -c 300 "$W/err")"; fail=1
else echo "synth on a full disk: exit 2 naming $mnt/s, nothing left"; fi
umount "$mnt"
[ $fail -eq 0 ] && echo "trace_disk_full: ok"
exit $fail
