#!/usr/bin/env bash
# Builds the real-size lane's models (tests/realsize_models.py: MobileNetV2, YOLOv8n, a BERT
# encoder, a GPT-2 decoder with past key/values, Silero VAD, the encoder with external data)
# outside pytest, with the default options and with --quantize auto, and prints each build's
# wall time. Usage: scripts/real_models.sh [DIR] [MODEL...]   (default DIR: real-models/)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-real-models}"
shift || true
.venv/bin/python -m tests.realsize_models "$out/models" "$@"
mkdir -p "$out/bundles"
for model in "$out"/models/*/*.onnx; do
  name="$(basename "$(dirname "$model")")"
  for flags in "" "--quantize auto"; do
    target="$out/bundles/$name${flags:+-auto}"
    start=$SECONDS
    # shellcheck disable=SC2086  # $flags is two words or none
    .venv/bin/bundle build "$model" -o "$target" --force $flags > "$target.log" 2>&1 \
      || { echo "$name ${flags:-default}: FAILED, see $target.log"; exit 1; }
    echo "$name ${flags:-default}: $((SECONDS - start)) s, $(grep '^Built' "$target.log")"
  done
done
