#!/usr/bin/env bash
# sensitivity on a real trained model (issue 35): the llmcompressor NVFP4 checkpoint, layer
# granularity, the first 12 tokens of the manifest's prompt. Clean, the middle layer does not lead
# (on SmolLM2 layer 2 does); with the seed bug planted in its o_proj it ranks first. (Planted in its
# down_proj, whose input carries a massive activation, it cost the final logits less than layer 16's
# own NVFP4 error on a rebuild of the model: KL 0.222 kept vs 0.203 for layer 16; in o_proj the
# planted layer leads by 0.1 nats.) The --keep 1 set's three configs load in the real tools: llmcompressor builds its
# QuantizationModifier with those modules ignored; ModelOpt (0.47's list form) quantizes the BF16
# original with their quantizers disabled and the rest enabled; compressed-tensors validates the
# patched quantization_config.
#   usage: real_sensitivity.sh NVFP4DBG FAMILY
set -u
. "$(dirname "$0")/real_lib.sh" "$@"
[ -f "$m/nvfp4/config.json" ] || { echo "skip: no llmcompressor NVFP4 checkpoint"; exit 77; }
nl=$(manifest "m['config'].get('num_hidden_layers') or m['config']['text_config']['num_hidden_layers']")
mid=$((nl / 2))
t12=$(manifest "','.join(map(str, m['tokens'][:12]))")
first() { awk '$1 == "1" { print $2, $3; exit }' "$1"; }

"$bin" sensitivity "$m/nvfp4" --tokens "$t12" --backend "$be" -q >"$tmp/clean.txt" 2>"$tmp/err"
ok "$fam clean: exit $?, layer $mid does not lead (got: $(first "$tmp/clean.txt"))" '[ -n "$(first "$tmp/clean.txt")" ] && [ "$(first "$tmp/clean.txt")" != "layer $mid" ]'
"$bin" synth "$tmp/ck" --from "$m/nvfp4" --inject "input-scale-inverted@layers.$mid.self_attn.o_proj" >/dev/null 2>&1
"$bin" sensitivity "$tmp/ck" --tokens "$t12" --backend "$be" -q --keep 1 --recipe-out "$tmp/rec" >"$tmp/p.txt" 2>"$tmp/err"
rc=$?
ok "$fam planted at layer $mid: exit $rc, it ranks first (got: $(first "$tmp/p.txt"))" '[ $rc -eq 0 ] && [ "$(first "$tmp/p.txt")" = "layer $mid" ]'

# the screen (issue 35: layer granularity within about 10 traces' time): one full run ranks the 30
# layers by their own NVFP4 error, exact runs for the top 4: 1 + 8 runs, the planted layer still first
"$bin" sensitivity "$tmp/ck" --tokens "$t12" --backend "$be" -q --screen 4 >"$tmp/s.txt" 2>"$tmp/err"
rc=$?
ok "$fam --screen 4: exit $rc, layer $mid first, 9 runs ($(tail -1 "$tmp/s.txt"))" \
  '[ $rc -eq 0 ] && [ "$(first "$tmp/s.txt")" = "layer $mid" ] && grep -q "^9 runs in" "$tmp/s.txt"'

out=$("$py" - "$tmp/rec" "$m" "$mid" <<'PY' 2>"$tmp/py.err"
import copy, json, sys, torch
rec, m, mid = sys.argv[1], sys.argv[2], int(sys.argv[3])
want = {f"model.layers.{mid}.{p}" for p in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                             "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")}
from llmcompressor.recipe import Recipe
mods = Recipe.create_instance(f"{rec}/llmcompressor-recipe.yaml").modifiers
ign = set(mods[0].ignore) if len(mods) == 1 and type(mods[0]).__name__ == "QuantizationModifier" else set()
print("llmcompressor", "ok" if want <= ign and "lm_head" in ign and mods[0].scheme == "NVFP4" else f"bad {mods}")
import modelopt.torch.quantization as mtq
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(f"{m}/bf16", torch_dtype=torch.float32)
cfg = copy.deepcopy(mtq.NVFP4_DEFAULT_CFG)
cfg["quant_cfg"] = list(cfg["quant_cfg"]) + json.load(open(f"{rec}/modelopt-quant-cfg.json"))["quant_cfg"]
ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]])
mtq.quantize(model, cfg, lambda mm: mm(ids))
L = model.model.layers
off = all(not getattr(L[mid], a).__getattr__(b).weight_quantizer.is_enabled for a, b in
          [("self_attn", "q_proj"), ("self_attn", "o_proj"), ("mlp", "down_proj")])
on = L[mid - 1].mlp.down_proj.weight_quantizer.is_enabled and L[mid + 1].self_attn.q_proj.input_quantizer.is_enabled
print("modelopt", "ok" if off and on else f"bad off={off} on={on}")
from compressed_tensors.quantization import QuantizationConfig
qc = json.load(open(f"{m}/nvfp4/config.json"))["quantization_config"]
qc["ignore"] = json.load(open(f"{rec}/compressed-tensors-ignore.json"))["quantization_config"]["ignore"]
q = QuantizationConfig.model_validate(qc)
print("compressed-tensors", "ok" if want <= set(q.ignore) else f"bad {q.ignore}")
PY
)
ok "$fam: llmcompressor builds the recipe's modifier, the kept modules ignored ($(grep llmcompressor <<<"$out"; tail -c 300 "$tmp/py.err"))" 'grep -qx "llmcompressor ok" <<<"$out"'
ok "$fam: ModelOpt quantizes with the kept modules' quantizers off, the others on ($(grep modelopt <<<"$out"))" 'grep -qx "modelopt ok" <<<"$out"'
ok "$fam: compressed-tensors validates the patched config ($(grep compressed-tensors <<<"$out"))" 'grep -qx "compressed-tensors ok" <<<"$out"'
echo "real sensitivity $fam: $pass passed, $fail failed"
[ $fail -eq 0 ]
