"""Summarise `demo --budget-days` runs: one row per run and day (spend / budget, and each method's quality
x100 per request), then per dataset the mean over runs of each day's differences against the steered
router's expected quality.

    python experiments/budget_summary.py runs/budget-llmrouter-s0 runs/budget-llmrouter-s1 ...

With ``--minus B...`` after the runs: also each run's steered expected quality minus that of the run of B
with the same name after its first dash (``pbudget-llmrouter-s0`` against ``nbudget-llmrouter-s0``: the
same world, rounds and days' requests, another arm), per day. Last, the ladder each run's team was
steered along (where budget.json records it), each rung with its estimated quality and cost per request.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

METHODS = ("steered", "steered, expected", "fixed-λ", "two-model mix", "hard-cap", "own tier")


def main(runs: list[str]) -> None:
    print("| run | day | requests | spend / budget | " + " | ".join(METHODS) + " | hard-cap answered |")
    print("|---|---:|---:|---:|" + "---:|" * (len(METHODS) + 1))
    diffs: dict[tuple[str, int], list[list[float]]] = defaultdict(list)
    for run in runs:
        name = Path(run).name
        for day in json.loads((Path(run) / "budget.json").read_text()):
            q = day["quality"]
            cells = " | ".join(f"{q[m]:.2f}" if m in q else "-" for m in METHODS)
            ratio = day["spend"]["steered"] / day["budget_usd"]
            print(
                f"| {name} | {day['day']} | {day['requests']} | {ratio:.3f} | {cells} | {100 * day['answered']['hard-cap']:.0f}% |"
            )
            dataset = name.rsplit("-s", 1)[0]
            e = q["steered, expected"]
            diffs[(dataset, day["day"])].append([ratio, e - q["fixed-λ"], e - q["two-model mix"], q["steered"] - q["hard-cap"]])
    print(
        "\n| dataset | day | runs | spend / budget (range) | expected - fixed-λ | expected - two-model mix | steered - hard-cap |"
    )
    print("|---|---:|---:|---|---:|---:|---:|")
    for (dataset, d), rows in sorted(diffs.items()):
        a = np.array(rows)
        print(
            f"| {dataset} | {d} | {len(a)} | {a[:, 0].min():.3f}-{a[:, 0].max():.3f} | {a[:, 1].mean():+.2f} "
            f"({', '.join(f'{v:+.2f}' for v in a[:, 1])}) | {a[:, 2].mean():+.2f} ({', '.join(f'{v:+.2f}' for v in a[:, 2])}) "
            f"| {a[:, 3].mean():+.1f} |"
        )


def paired(runs: list[str], minus: list[str]) -> None:
    other = {Path(r).name.split("-", 1)[1]: r for r in minus}
    print("\n| run | minus | day | steered, expected | minus's | difference |")
    print("|---|---|---:|---:|---:|---:|")
    for run in runs:
        match = other.get(Path(run).name.split("-", 1)[1])
        if match is None:
            continue
        mine, theirs = (json.loads((Path(r) / "budget.json").read_text()) for r in (run, match))
        for a, b in zip(mine, theirs):
            assert a["requests"] == b["requests"], "not the same days"
            qa, qb = a["quality"]["steered, expected"], b["quality"]["steered, expected"]
            print(f"| {Path(run).name} | {Path(match).name} | {a['day']} | {qa:.2f} | {qb:.2f} | {qa - qb:+.2f} |")


def rungs(runs: list[str]) -> None:
    print("\n| run | steered along (estimated quality x100, $ per 1,000 requests) |")
    print("|---|---|")
    for run in runs:
        ladder = json.loads((Path(run) / "budget.json").read_text())[0].get("ladder")
        if ladder:
            words = {"tier": "tier {name}", "model": "model {name}", "cheapest": "the cheapest model"}
            cells = [words[r["kind"]].format(**r) + ("" if r["quality"] is None else f" ({100 * r['quality']:.1f}, {1000 * r['usd']:.2f})")
                     for r in ladder]  # fmt: skip
            print(f"| {Path(run).name} | {', '.join(cells)} |")


if __name__ == "__main__":
    args = sys.argv[1:]
    cut = args.index("--minus") if "--minus" in args else len(args)
    main(args[:cut])
    rungs(args[:cut])
    if cut < len(args):
        paired(args[:cut], args[cut + 1 :])
