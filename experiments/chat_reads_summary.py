"""The dev-slice table of docs/experiments/chat-traffic.md: the full-information ceiling on chat traffic under each
reading (and with the app as context), mean over lambda and trials, and each minus system-and-last-user per trial.

usage: python experiments/chat_reads_summary.py RUNS   (the OUT of chat_reads_dev.sh)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

VARIANTS = ("system-and-last-user", "turns", "last-user", "turns-app", "last-user-app")


def ceiling(folder: Path) -> np.ndarray:
    raw = json.loads((folder / "results.json").read_text())["raw"]["full-info-regression"]["utility"]
    return np.asarray(raw).mean(axis=1)


def main(runs: Path) -> None:
    print("| data | " + " | ".join(VARIANTS) + " |")
    print("|---|" + "---:|" * len(VARIANTS))
    for data in ("llmrouter", "mmlupro", "routerbench"):
        base = ceiling(runs / f"{data}-system-and-last-user")
        cells = []
        for v in VARIANTS:
            x = ceiling(runs / f"{data}-{v}")
            d = x - base
            cells.append(
                f"{x.mean():.2f}"
                if v == VARIANTS[0]
                else f"{x.mean():.2f} (**{d.mean():+.2f}**: {', '.join(f'{e:+.2f}' for e in d)})"
            )
        print(f"| {data} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
