#!/usr/bin/env bash
# The transformers comparisons of the real-model tier through test_conf_trace (its modes "exact" and
# "spread"), with the family's folder found in the cache; skip (77) when it is not built.
#   usage: conf.sh TEST_CONF_TRACE NVFP4DBG FAMILY MODE CHECKPOINT_SUBDIR REFERENCE_FILE
set -u
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
conf="$(abs "$1")"; bin="$(abs "$2")"; fam="$3"; mode="$4"; sub="$5"; ref="$6"
m="${ND_REAL_CACHE:-$HOME/.cache/nvfp4dbg-real}/models/$fam"
[ -f "$m/manifest.json" ] || { echo "skip: $m not built (scripts/real-models.sh builds it)"; exit 77; }
work="$(mktemp -d)" || exit 1
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
"$conf" "$bin" "$m" "$mode" "$m/$sub" "$ref"
