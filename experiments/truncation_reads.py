"""What the router reads of each shared dataset's prompts under each cut of a long text (truncation.py): per
dataset (and task), its prompts, how many run past 256 tokens, and how many distinct embeddings the static
encoder gives them read by their head and by their head and tail.

    python experiments/truncation_reads.py DATA [DATA ...]

DATA: a benchmark file or folder `bench offline --data` reads (e.g. ../shared/data/routerbench).
"""

from __future__ import annotations

import sys

import numpy as np

from regret_gateway.encoders.embedder import Embedder
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.truncation import TRUNCATIONS


def distinct(X: np.ndarray) -> int:
    return len(np.unique(np.round(X, 5), axis=0))


def main(paths: list[str]) -> None:
    encoders = {cut: Embedder(kind="static", truncation=cut, progress=False) for cut in TRUNCATIONS}
    tok = encoders["head"]
    tok._load()
    print("| data | task | prompts | past 256 tokens | distinct, head | distinct, head-and-tail |")
    print("|---|---|---:|---:|---:|---:|")
    for path in paths:
        bench = load_benchmark(path)
        prompts = list(bench.prompts)
        lengths = np.array([len(ids) for ids in tok._static.token_ids(prompts, 10**9, "head")])
        X = {cut: e.encode_unique(prompts) for cut, e in encoders.items()}
        groups = np.asarray(bench.groups)
        for task in sorted(set(groups.tolist())):
            rows = groups == task
            print(f"| {path} | {task} | {rows.sum()} | {np.sum(lengths[rows] > 256)} | "
                  f"{distinct(X['head'][rows])} | {distinct(X['head-and-tail'][rows])} |")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
