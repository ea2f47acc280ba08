#!/usr/bin/env bash
# Puts a small practice model into practice host n<INDEX>'s Hugging Face cache, in the hub layout
# (refs/main, snapshots/REV/* linking to blobs named by SHA-256), as `huggingface-cli download`
# would leave it. Not a real model: random bytes under the names a model has.
#
#   bash test/rig/seed-model.sh INDEX BYTES [REPO] [REVISION]
#
# REPO defaults to models--practice--tiny-moe (the practice recipes' model). Env: RIG_DIR, RIG_PREFIX.
set -euo pipefail
RIG_DIR=${RIG_DIR:-/tmp/launcher-rig}
P=${RIG_PREFIX:-lnch}
(($# >= 2)) || { echo "usage: $0 INDEX BYTES [REPO] [REVISION]" >&2; exit 2; }
repo=${3:-models--practice--tiny-moe}
rev=${4:-5e1f0c4a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f}
# The practice recipes mount ~/.cache/practice/huggingface as HF_HOME.
ssh -F "$RIG_DIR/ssh_config" "$P-n$1" sh -s -- ".cache/practice/huggingface/hub/$repo" "$rev" "$2" <<'REMOTE'
d="$HOME/$1"; rev="$2"; bytes="$3"
mkdir -p "$d/blobs" "$d/refs" "$d/snapshots/$rev"
t=$(mktemp -d)
printf '{"model_type":"practice","architectures":["PracticeForCausalLM"]}\n' > "$t/config.json"
head -c "$bytes" /dev/urandom > "$t/model.safetensors"
for f in config.json model.safetensors; do
  h=$(sha256sum "$t/$f" | cut -d' ' -f1); mv "$t/$f" "$d/blobs/$h"; ln -sfn "../../blobs/$h" "$d/snapshots/$rev/$f"
done
printf %s "$rev" > "$d/refs/main"; rmdir "$t"
REMOTE
