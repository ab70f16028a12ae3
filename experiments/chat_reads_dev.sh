#!/usr/bin/env bash
# Choosing what the router reads of a conversation on the dev slices (a held-out slice of train; test never read):
# the full-information ceiling on chat traffic, read as turns or system-and-last-user, on each shared dataset.
# usage: bash experiments/chat_reads_dev.sh OUT
set -euo pipefail
out=$1
export OMP_NUM_THREADS=1
for spec in llmrouter:0,500,1000 mmlupro:0,50,100 routerbench:0,500,1000; do
  name=${spec%%:*} lambdas=${spec#*:}
  for reads in turns system-and-last-user; do
    regret-gateway bench offline --data ../shared/data/$name --limit 3000 --trials 3 --lambdas "$lambdas" \
      --methods full-info-regression --evaluate-on dev --traffic chat --reads $reads --out "$out/$name-$reads"
  done
done
# and the app as context beside the turns (embedder.context: "{app}")
for spec in llmrouter:0,500,1000 mmlupro:0,50,100 routerbench:0,500,1000; do
  name=${spec%%:*} lambdas=${spec#*:}
  regret-gateway bench offline --data ../shared/data/$name --limit 3000 --trials 3 --lambdas "$lambdas" \
    --methods full-info-regression --evaluate-on dev --traffic chat --reads turns --context "{app}" --out "$out/$name-turns-app"
done
# and the last user turn alone
for spec in llmrouter:0,500,1000 mmlupro:0,50,100 routerbench:0,500,1000; do
  name=${spec%%:*} lambdas=${spec#*:}
  regret-gateway bench offline --data ../shared/data/$name --limit 3000 --trials 3 --lambdas "$lambdas" \
    --methods full-info-regression --evaluate-on dev --traffic chat --reads last-user --out "$out/$name-last-user"
  regret-gateway bench offline --data ../shared/data/$name --limit 3000 --trials 3 --lambdas "$lambdas" \
    --methods full-info-regression --evaluate-on dev --traffic chat --reads last-user --context "{app}" --out "$out/$name-last-user-app"
done
