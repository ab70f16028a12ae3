"""`bench retrain` at this checkout beside another commit, in one run, alternating, so the machine's load
and speed of the day fall on both alike:

    python experiments/retrain_speed.py BASE_COMMIT[,BASE_COMMIT...] [ROWS] [REPEATS]

Each BASE_COMMIT is checked out into a temporary git worktree and imported from its `src` (PYTHONPATH)
with this environment's packages. Prints each run's retrain seconds (cross-fitted and one fit) and, per
base, the ratio base / this checkout of their medians (this checkout is labelled ``+changes`` where its
tracked files differ from HEAD).
"""

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bench(src: Path, rows: int) -> dict[str, float]:
    run = subprocess.run(
        [sys.executable, "-m", "regret_gateway", "bench", "retrain", "--rows", str(rows)],
        env={**os.environ, "PYTHONPATH": str(src)}, capture_output=True, text=True, cwd=src.parent,
    )  # fmt: skip
    if run.returncode:
        sys.exit(f"bench retrain failed in {src}:\n{run.stderr[-3000:]}")
    out = run.stdout
    times, header = {}, []
    for line in out.splitlines():  # the table's columns by their header (versions differ in which it has)
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "rows":
            header = cells
        elif header and len(cells) == len(header) and cells[0] == str(rows):
            row = dict(zip(header, cells))
            times[row["evaluation"]] = {step: float(row[f"{step} s"]) for step in ("total", "fit", "evaluate")}
    return times


def main() -> None:
    bases, rows = sys.argv[1].split(","), int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, cwd=ROOT
    ).stdout
    here = f"{head}+changes" if dirty.strip() else head
    with tempfile.TemporaryDirectory() as tmp:
        trees = {}
        for base in bases:
            tree = trees[base] = Path(tmp) / base
            subprocess.run(["git", "worktree", "add", "--detach", str(tree), base], check=True, cwd=ROOT, capture_output=True)
            # the installed package maps regret_gateway.migrations to this checkout's migrations/: the base
            # commit reads its own (its schema), found first in its src
            (tree / "src" / "regret_gateway" / "migrations").symlink_to(tree / "migrations")
        try:
            runs: dict[str, list] = {label: [] for label in [*bases, here]}
            for _ in range(repeats):
                for label, src in [*((b, trees[b] / "src") for b in bases), (here, ROOT / "src")]:
                    runs[label].append(bench(src, rows))
                    print(f"{label}: {runs[label][-1]}", flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
    print(
        f"\n| {rows} rows | step | "
        + " | ".join(f"{label} s" for label in runs)
        + " | "
        + " | ".join(f"{b} / {here}" for b in bases)
        + " |"
    )
    print("|---|---|" + "---:|" * (len(runs) + len(bases)))
    for how in runs[here][0]:
        for step in ("total", "fit", "evaluate"):
            median = {label: statistics.median(r[how][step] for r in rs) for label, rs in runs.items()}
            print(
                f"| {how} | {step} | "
                + " | ".join(f"{v:.1f}" for v in median.values())
                + " | "
                + " | ".join(f"{median[b] / median[here]:.2f}" for b in bases)
                + " |"
            )


if __name__ == "__main__":
    main()
