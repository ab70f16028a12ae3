"""Paired summary of the chat-traffic study (docs/experiments/chat-traffic.md): each run's methods, mean over
lambda and trials, and each chat run minus the bare prompts' run per trial (the same prompts, splits and seeds).

usage: python experiments/chat_summary.py NAME=RUNS_FOLDER [NAME=RUNS_FOLDER ...]
A RUNS_FOLDER holds bare/ and chat-*/ folders of `bench offline` (experiments/chat_traffic.sh).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

METHODS = ("served", "rm-cluster", "r-and-c", "full-info-regression", "single-best", "oracle")
LABELS = {"full-info-regression": "ceiling"}
ORDER = ("bare", "chat-system", "chat-turns", "chat-last-user", "chat-turns-app", "chat-last-user-app")


def per_trial(run: dict, method: str) -> np.ndarray | None:
    """(trials,) the method's mean-over-lambda test utility x100 per trial."""
    raw = run["raw"].get(method)
    return None if raw is None else np.asarray(raw["utility"]).mean(axis=1)


def main(specs: list[str]) -> None:
    for spec in specs:
        name, folder = spec.split("=", 1)
        found = {p.name: p for p in Path(folder).iterdir() if (p / "results.json").exists()}
        names = [n for n in ORDER if n in found] + sorted(set(found) - set(ORDER))
        runs = {n: json.loads((found[n] / "results.json").read_text()) for n in names}
        bare = runs.get("bare")
        print(f"\n### {name}\n")
        print(
            "| traffic | "
            + " | ".join(LABELS.get(m, m) for m in METHODS)
            + " | sent to a model that cannot take it | served - bare (per trial) | ceiling - bare (per trial) |"
        )
        print("|---|" + "---:|" * len(METHODS) + "---|---|---|")
        for label, run in runs.items():
            cells = []
            for m in METHODS:
                v = per_trial(run, m)
                cells.append("" if v is None else f"{v.mean():.2f}")
            diag = run.get("diagnostics", {})
            sent = max((v for k, v in diag.items() if k.startswith("ineligible_")), default=0.0)
            restricted = "0 (restricted; at most {:.1%} of raw choices)".format(sent) if label != "bare" else "n/a"
            diffs = []
            for m in ("served", "full-info-regression"):
                a, b = per_trial(run, m), None if bare is None else per_trial(bare, m)
                if a is None or b is None or label == "bare":
                    diffs.append("")
                else:
                    d = a - b
                    diffs.append(f"**{d.mean():+.2f}** ({', '.join(f'{x:+.2f}' for x in d)})")
            print(f"| {label} | " + " | ".join(cells) + f" | {restricted} | " + " | ".join(diffs) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
