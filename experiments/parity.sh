#!/bin/bash
# Paired before/after check of a change meant to keep behaviour: the offline bench (RouterBench, one trial)
# and a seeded replay of the generated world, run from each commit's tree in turn with the same venv.
#   bash experiments/parity.sh OLD_COMMIT NEW_COMMIT [OUT]
# Prints each run's files' differences (the replay's router version ids are random and always differ).
set -euo pipefail
old=$1; new=$2; out=${3:-runs/parity}
repo=$(git rev-parse --show-toplevel)
for rev in "$old" "$new"; do
  tree=$(mktemp -d)/tree
  git -C "$repo" worktree add -f "$tree" "$rev" -q
  # the tree's own migrations (an editable install maps regret_gateway.migrations to the checkout's)
  ln -s "$tree/migrations" "$tree/src/regret_gateway/migrations"
  dir="$out/$rev"; mkdir -p "$dir"
  PYTHONPATH="$tree/src" OMP_NUM_THREADS=1 python -m regret_gateway bench offline --data "$repo/../shared/data/routerbench" \
    --trials 1 --propensity logged --lambdas 0,500,1000 --methods rm-cluster,r-and-c --outcome-preset fast --out "$dir/offline" > "$dir/offline.log" 2>&1
  PYTHONPATH="$tree/src" OMP_NUM_THREADS=1 python -m regret_gateway demo --replay --rounds 2 --requests 150 --seed 0 --threads 1 \
    --out "$dir/replay" > "$dir/replay.log" 2>&1
  git -C "$repo" worktree remove --force "$tree"
done
python - "$out/$old" "$out/$new" <<'PY'
import json, sys
a, b = sys.argv[1:]
def flat(x, pre=""):
    if isinstance(x, dict):
        return {k2: v2 for k, v in x.items() for k2, v2 in flat(v, f"{pre}.{k}").items()}
    if isinstance(x, list):
        return {k2: v2 for i, v in enumerate(x) for k2, v2 in flat(v, f"{pre}[{i}]").items()}
    return {pre: x}
ra, rb = (flat(json.load(open(f"{d}/replay/closed_loop.json"))["rounds"]) for d in (a, b))
diff = {k for k in ra.keys() | rb.keys() if ra.get(k) != rb.get(k) and not k.endswith("router_version")}
nums = [abs(ra[k] - rb[k]) for k in diff if isinstance(ra.get(k), (int, float)) and isinstance(rb.get(k), (int, float))]
print(f"replay rounds: {len(ra)} values, {len(diff)} differ (router version ids aside); max |diff| {max(nums, default=0.0)}")
ta, tb = (open(f"{d}/offline/utility.md").read().splitlines() for d in (a, b))
rows = [(x, y) for x, y in zip(ta, tb) if x != y and "nuisance_seconds" not in x]
print(f"offline table: {len(ta)} lines, {len(rows)} differ (the nuisance stage's seconds aside)")
PY
