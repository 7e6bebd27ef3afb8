# real_lib.sh — the start of the real-model tier's tests (sourced as `. "$(dirname "$0")/real_lib.sh"
# NVFP4DBG FAMILY`): tests/lib.sh, then $bin, $fam, $m (the family's folder built by
# scripts/real-models.sh: bf16/, nvfp4/, nvfp4a16/, modelopt/, reference*.safetensors, manifest.json),
# $py (the Python of that build, used only to read manifest.json) and $toks (the manifest's prompt ids,
# comma separated). Exits 77 (skip) when the family has not been built.
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; fam="$2"
real_root="${ND_REAL_CACHE:-$HOME/.cache/nvfp4dbg-real}"
m="$real_root/models/$fam"
if [ ! -f "$m/manifest.json" ]; then
  echo "skip: $m not built (scripts/real-models.sh builds it)"; exit 77
fi
py="$real_root/venv/bin/python"
[ -x "$py" ] || py=python3
. "$(dirname "$0")/../lib.sh"
be="${ND_TEST_BACKEND:-cpu}"
# manifest KEY as JSON (a Python expression on the loaded manifest `m`)
manifest() { "$py" -c "import json,sys; m=json.load(open(sys.argv[1])); print($1)" "$m/manifest.json"; }
toks="$(manifest "','.join(map(str, m['tokens']))")"
# the quantized variants built for this family, and the stacks each is judged under (the healthy
# profiles of the format: exact and vLLM's current and older loaders)
variants() { local v; for v in nvfp4 nvfp4a16 modelopt modelopt_w4a8; do [ -f "$m/$v/config.json" ] && echo "$v"; done; }
# W4A8_NVFP4_FP8 runs on TensorRT-LLM's math (exact); vLLM refuses the algorithm
stacks_of() { case "$1" in modelopt) echo "exact vllm-modelopt vllm" ;; modelopt_w4a8) echo "exact" ;; *) echo "exact vllm vllm-old" ;; esac; }
