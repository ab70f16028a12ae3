#!/usr/bin/env bash
# The chat-traffic study (docs/experiments/chat-traffic.md): one dataset, the same 3,000 prompts, splits and seeds
# as bare prompts, as chat requests read two ways, and as chat requests with the app as context.
# usage: bash experiments/chat_traffic.sh DATA LAMBDAS OUT   (e.g. ../shared/data/llmrouter 0,500,1000 runs/chat-llmrouter)
set -euo pipefail
data=$1 lambdas=$2 out=$3
common=(--data "$data" --limit 3000 --trials 3 --propensity logged --lambdas "$lambdas"
        --methods r-and-c,rm-cluster,full-info-regression --outcome-preset fast --log-draws 3)
export OMP_NUM_THREADS=1
regret-gateway bench offline "${common[@]}" --out "$out/bare"
regret-gateway bench offline "${common[@]}" --traffic chat --reads turns --out "$out/chat-turns"
regret-gateway bench offline "${common[@]}" --traffic chat --reads system-and-last-user --out "$out/chat-system"
regret-gateway bench offline "${common[@]}" --traffic chat --reads turns --context "{app}" --out "$out/chat-turns-app"
regret-gateway bench offline "${common[@]}" --traffic chat --reads last-user --out "$out/chat-last-user"
regret-gateway bench offline "${common[@]}" --traffic chat --reads last-user --context "{app}" --out "$out/chat-last-user-app"
