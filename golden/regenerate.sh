#!/usr/bin/env bash
# Regenerates the shipped checkpoints and their golden traces with the tool itself. A deliberate
# change of numerics is then one reviewed commit of this folder.
#   usage: golden/regenerate.sh [path/to/nvfp4dbg]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:-$here/../build/nvfp4dbg}"
cd "$here"

# The seed report's model (DeepSeek-V4 layout, compressed-tensors NVFP4, tiny dims) with the activation
# scale of the fused q_a/kv projection misapplied as the report describes: a ModelOpt-style
# amax/2688 value stored where compressed-tensors means 2688/amax.
rm -rf seed-bug-v4 seed-bug-v4.faults.json clean-v4 clean-v4.faults.json
"$bin" synth seed-bug-v4 --recipe deepseek_v4 --size tiny --seed 0 \
  --inject input-scale-inverted@layers.0.self_attn.q_a_proj \
  --inject input-scale-inverted@layers.0.self_attn.kv_proj
"$bin" synth clean-v4 --recipe deepseek_v4 --size tiny --seed 0

mkdir -p traces
for ck in seed-bug-v4 clean-v4; do
  "$bin" trace --force "$ck" --backend cpu --out "traces/$ck.tmp.h5" >/dev/null || [ $? -eq 1 ]
  mv "traces/$ck.tmp.h5" "traces/$ck.h5"
done
echo "regenerated: seed-bug-v4 clean-v4 and traces/"
