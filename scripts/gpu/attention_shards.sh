#!/usr/bin/env bash
# Runs on a GPU host: times the executor's attention kernels for the head shards of TP degrees this
# host may not have (heads/tp, kv_heads/tp per GPU), by handing the profiler copies of the shipped
# configs with the heads divided. Attention is a one-GPU measurement (each TP rank runs exactly this
# shard), so a 1-GPU lease can refresh the attention section of a 2-GPU profile of the same GPU
# model: scripts/splice_attention.py does that, recording where the figures came from.
# usage: scripts/gpu/attention_shards.sh OUT.json MODEL:TP [MODEL:TP ...]    e.g. llama-3.1-70b:2
set -euo pipefail
out=$1; shift
B=${PEERPLAN_BIN:-.gpu/bin/peerplan}
tmp=$(mktemp -d)
args=()
for spec in "$@"; do
  model=${spec%%:*}; tp=${spec##*:}
  src=models/llm/$model/config.json
  [ -f "$src" ] || { echo "attention_shards: no shipped config $src" >&2; exit 2; }
  if [ "$tp" = 1 ]; then args+=(--model "$model"); continue; fi
  heads=$(grep -o '"num_attention_heads": *[0-9]*' "$src" | grep -o '[0-9]*$')
  kv=$(grep -o '"num_key_value_heads": *[0-9]*' "$src" | grep -o '[0-9]*$')
  hidden=$(grep -o '"hidden_size": *[0-9]*' "$src" | grep -o '[0-9]*$')
  dim=$((hidden / heads))
  mkdir -p "$tmp/$model-tp$tp"
  # head_dim stays the model's: only the number of heads per GPU changes under TP.
  sed -e "s/\"num_attention_heads\": *[0-9]*/\"num_attention_heads\": $((heads / tp))/" \
      -e "s/\"num_key_value_heads\": *[0-9]*/\"num_key_value_heads\": $(( kv / tp > 0 ? kv / tp : 1 ))/" \
      -e "s/^{/{\n  \"head_dim\": $dim,/" "$src" > "$tmp/$model-tp$tp/config.json"
  args+=(--model "$tmp/$model-tp$tp/config.json")
done
"$B" profile --only attention "${args[@]}" --no-progress --out "$out"
