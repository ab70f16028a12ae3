"""Which tokens of a long prompt the static encoder should read, chosen on the dev slices (a held-out slice
of the training prompts; the test split is read only with --test): its first 256 tokens (the default), its last 256,
or its first and last 128. For each choice and shared dataset, the full-information ceiling
(`full-info-regression`, 3 trials unless told, 3,000 prompts), the same command as the static encoder's dev study; the
reading is patched into the static encoder in this process and the embeddings go to a fresh cache folder,
so no cached embedding of another reading is used. Prints one table: the share of prompts longer than 256
tokens (the only ones the readings embed differently), the ceiling's dev utility x100 (mean over lambda) per
reading, and its difference from `first` per trial.

    OMP_NUM_THREADS=1 python experiments/read_side_dev.py --out runs/read-side [--reads first,last,ends] [--trials 3]
    ... --test: the confirmation on the test split, `served` (retrain from K = 3 logged draws) and the ceiling
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from regret_gateway.cli import app
from regret_gateway.encoders.static import CHARS_PER_TOKEN, StaticEncoder

DATASETS = {"llmrouter": "0,500,1000", "mmlupro": "0,50,100", "routerbench": "0,500,1000"}
_first = StaticEncoder.token_ids
_seen = {"texts": 0, "longer": 0}  # prompts embedded by a patched reading, and those longer than max_length


def _read(side: str):
    """``StaticEncoder.token_ids`` reading the prompt's first, last, or first-and-last ``max_length`` tokens."""
    if side == "first":
        return _first

    def token_ids(self, texts, max_length):
        cut = CHARS_PER_TOKEN * max_length
        cut_texts = [t if len(t) <= 2 * cut else t[:cut] + " " + t[-cut:] for t in texts]
        encodings = self._tok.encode_batch(cut_texts, add_special_tokens=False)
        out = []
        _seen["texts"] += len(texts)
        for e in encodings:
            ids = np.asarray(e.ids, dtype=np.int64)
            if ids.size > max_length:
                _seen["longer"] += 1
                half = max_length // 2
                ids = ids[-max_length:] if side == "last" else np.r_[ids[:half], ids[-(max_length - half) :]]
            out.append(ids[ids != self._unk] if self._unk is not None else ids)
        return out

    return token_ids


def _per_trial(folder: Path) -> dict[str, np.ndarray]:
    doc = json.loads(next(folder.rglob("results.json")).read_text())
    return {m: np.asarray(r["utility"]).mean(1) for m, r in doc["raw"].items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reads", default="first,last,ends")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--test", action="store_true", help="the confirmation on the test split: served and the ceiling at K = 3")
    args = ap.parse_args()
    reads = args.reads.split(",")
    split = ["--log-draws", "3", "--methods", "r-and-c,full-info-regression"] if args.test else [
        "--evaluate-on", "dev", "--methods", "full-info-regression"]  # fmt: skip
    metrics = ("served", "full-info-regression") if args.test else ("full-info-regression",)
    results: dict[tuple[str, str, str], np.ndarray] = {}
    single: dict[str, float] = {}
    longer: dict[str, str] = {}
    for name in args.datasets.split(","):
        _seen.update(texts=0, longer=0)
        for side in reads:
            StaticEncoder.token_ids = _read(side)  # type: ignore[method-assign]
            out = args.out / f"{name}-{side}"
            with tempfile.TemporaryDirectory() as cache:
                app(
                    ["bench", "offline", "--data", f"../shared/data/{name}", "--limit", "3000", "--trials", str(args.trials),
                     "--propensity", "logged", "--lambdas", DATASETS[name], *split,
                     "--outcome-preset", "fast", "--encoder", "static", "--max-length", "256",
                     "--cache-dir", cache, "--out", str(out)],
                    standalone_mode=False,
                )  # fmt: skip
            per_trial = _per_trial(out)
            single[name] = float(per_trial["single-best"].mean())
            for m in metrics:
                results[name, side, m] = per_trial[m]
        longer[name] = f"{_seen['longer'] / _seen['texts']:.1%}" if _seen["texts"] else "-"
    print("| data | method | prompts over 256 tokens | single best | " + " | ".join(reads) + " | " + " | ".join(
        f"{r} - first (per trial)" for r in reads if r != "first") + " |")  # fmt: skip
    print("|---|---|---:|---:|" + "---:|" * len(reads) + "---|" * (len(reads) - 1))
    for name in args.datasets.split(","):
        for m in metrics:
            cells = [f"{results[name, r, m].mean():.2f}" for r in reads]
            diffs = []
            for r in reads:
                if r != "first":
                    d = results[name, r, m] - results[name, "first", m]
                    diffs.append(f"**{d.mean():+.2f}** ({', '.join(f'{x:+.2f}' for x in d)})")
            print(
                f"| {name} | {m} | {longer[name]} | {single[name]:.2f} | " + " | ".join(cells) + " | " + " | ".join(diffs) + " |"
            )


if __name__ == "__main__":
    main()
