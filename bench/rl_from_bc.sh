#!/usr/bin/env bash
# M-GRPO continued from a BC adapter on the MiniWoB++ tasks where BC is neither 0% nor
# 100%, with the BC and RL adapters evaluated on the same held-out page seeds (paired).
# Needs the BC adapter of `webr1 demo --scale cpu --config bench/configs/miniwob-rl-cpu.json
# --out runs/rl-miniwob` (runs/rl-miniwob/sft/adapter). Results are in docs/experiments/archive.md.
#   [CFG=bench/configs/rl/<name>.json] bash bench/rl_from_bc.sh [OUT]   (default runs/rl-from-bc)
set -euo pipefail
out=${1:-runs/rl-from-bc}
cfg=${CFG:-bench/configs/rl/miniwob-from-bc.json}
bc=$(python -c "import json,sys; print(json.load(open(sys.argv[1]))['init_adapter'])" "$cfg")
tasks=click-button,click-link,click-checkboxes
# Held-out pages: the pipeline's evaluation seed stream (pipeline.EVAL_SEED_OFFSET), greedy.
ev=(--suite miniwob --tasks $tasks --episodes 32 --seed 1000003 --max-turns 6 --max-new-tokens 64 --quiet --json)
mkdir -p "$out"
[ -f "$out/eval-bc/metrics.json" ] || webr1 eval --policy embedded --adapter "$bc" "${ev[@]}" --out "$out/eval-bc" > "$out/eval-bc.json"
webr1 rl --config "$cfg" --out "$out/rl" $( [ -d "$out/rl/checkpoints" ] && echo --resume ) > "$out/rl.json"
webr1 eval --policy embedded --adapter "$out/rl/adapter" "${ev[@]}" --out "$out/eval-rl" > "$out/eval-rl.json"
python - "$out" <<'PY'
import json, sys
import webr1_kit as wk
out = sys.argv[1]
print(json.dumps(wk.compare_paired(f"{out}/eval-bc", f"{out}/eval-rl")))
PY
