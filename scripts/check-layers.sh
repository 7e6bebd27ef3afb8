#!/usr/bin/env bash
# check-layers.sh SOURCE_ROOT [STAMP] — the build's layering rule (docs/architecture.md): a folder
# may include only itself and the folders below it, so data flows one way:
#   util, numerics < kernels < ckpt, recipe, tokenizer < trace < probes < pipeline < diagnose, bundle, synth < cli
#   report sits on trace and probes (the figures), below the pipeline
# Run by meson on every build (src/meson.build); an upward or sideways include fails the build
# with the file, the line and the rule. Includes are resolved as the compiler does: a bare
# "name.h" in the file's own folder first, then kernels/ and probes/ (the -I folders).
set -u
root="$1"; stamp="${2:-}"
[ -n "$stamp" ] && case "$stamp" in /*) ;; *) stamp="$PWD/$stamp" ;; esac
cd "$root" || exit 2
# folder -> the folders it may include (besides itself)
allowed() {
  case "$1" in
    util) echo "" ;;
    numerics) echo "" ;;
    kernels|cpu|cuda) echo "util numerics kernels cpu cuda" ;;
    ckpt) echo "util numerics" ;;
    recipe) echo "util" ;;
    tokenizer) echo "util" ;;
    trace) echo "util numerics ckpt recipe" ;;
    probes) echo "util numerics kernels ckpt recipe trace" ;;
    pipeline) echo "util numerics kernels ckpt recipe trace probes" ;;
    diagnose|bundle|synth) echo "util numerics kernels ckpt recipe trace probes pipeline" ;;
    report) echo "util numerics kernels ckpt recipe trace probes" ;;
    cli) echo "util numerics kernels ckpt recipe tokenizer trace probes pipeline diagnose bundle synth report" ;;
    *) echo "?" ;;
  esac
}
bad=0
while IFS= read -r f; do
  dir="$(dirname "$f")"; own="$(basename "$dir")"
  while IFS=: read -r line inc; do
    inc="${inc#../src/}"   # kernels/backend.h reaches util as ../src/util/err.h
    target="${inc%%/*}"
    if [ "$target" = "$inc" ]; then # a bare name: the file's folder, else kernels/, else probes/
      if [ -e "$dir/$inc" ]; then continue
      elif [ -e "kernels/$inc" ]; then target=kernels
      elif [ -e "probes/$inc" ]; then target=probes
      else continue; fi
    fi
    [ "$target" = "$own" ] && continue
    case " $(allowed "$own") " in *" $target "*) continue ;; esac
    echo "$f:$line: includes \"$inc\": $target is not below $own (scripts/check-layers.sh lists the layers)" >&2
    bad=1
  done < <(grep -noE '^#include "[^"]+"' "$f" | sed -E 's/^([0-9]+):#include "([^"]+)"/\1:\2/')
done < <(find src kernels probes -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' | sort)
[ $bad -eq 0 ] || exit 1
[ -n "$stamp" ] && : >"$stamp"
exit 0
