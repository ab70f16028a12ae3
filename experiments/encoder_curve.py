"""The learning curve of two encoders side by side, paired by trial: for each dataset and K, `served` (what
retrain publishes) and the full-information ceiling (`full-info-regression`), test utility x100 (mean over
lambda), the static encoder's minus MiniLM's per trial, and the single best model; one plot per metric.

    python experiments/encoder_curve.py OUT.png NAME=STATIC_RUN,MINILM_RUN [NAME=... ...]

Each argument after OUT.png names a dataset and its two runs: two `bench offline --log-draws 1,3,...`
output folders (same data, seeds, lambdas and K; `--encoder static` and `--encoder transformer`), each
holding k-<K>/results.json (one K: results.json); an encoder's K values may come from several runs joined by `+`
(`NAME=STATIC_K13+STATIC_K10,MINILM_K13+MINILM_K10`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROWS = ("served", "full-info-regression")


def per_trial(runs: str) -> dict[int, dict[str, np.ndarray]]:
    out = {}
    for f in sorted(f for run in runs.split("+") for f in Path(run).glob("**/results.json")):
        doc = json.loads(f.read_text())
        out[int(doc["dataset"]["log_draws"])] = {m: np.asarray(r["utility"]).mean(1) for m, r in doc["raw"].items()}
    return out


def main() -> None:
    out, pairs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    print("| data | K | trials | served, static | served, MiniLM | static - MiniLM (per trial) | ceiling, static | ceiling, MiniLM "
          "| static - MiniLM (per trial) | single best | within 0.5 |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---|---:|---:|---|---:|---|")
    curves: dict[str, dict] = {}
    for name, runs in pairs:
        static, minilm = (per_trial(p) for p in runs.split(","))
        for k in sorted(set(static) & set(minilm)):
            s, t = static[k], minilm[k]
            cells, ok = [], []
            for m in ROWS:
                d = s[m] - t[m]
                cells += [
                    f"{s[m].mean():.2f}",
                    f"{t[m].mean():.2f}",
                    f"**{d.mean():+.2f}** ({', '.join(f'{x:+.2f}' for x in d)})",
                ]
                ok.append(d.mean() >= -0.5)
                curves.setdefault(name, {}).setdefault(m, []).append((k, s[m].mean(), t[m].mean()))
            curves[name]["single"] = s["single-best"].mean()
            verdict = "yes" if all(ok) else "no: " + ", ".join(m for m, good in zip(("served", "ceiling"), ok) if not good)
            print(
                f"| {name} | {k} | {len(s['served'])} | " + " | ".join(cells) + f" | {s['single-best'].mean():.2f} | {verdict} |"
            )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(1, len(curves), figsize=(4.2 * len(curves), 3.8), squeeze=False)
    for ax, (name, rows) in zip(axes[0], curves.items()):
        for m, style in zip(ROWS, ("-", "--")):
            k, s, t = (np.array(v) for v in zip(*rows[m]))
            ax.plot(k, s, "o" + style, color="C0", label=f"{m}, static")
            ax.plot(k, t, "s" + style, color="C3", label=f"{m}, MiniLM")
        ax.axhline(rows["single"], color="C7", ls="-.", label="single best model")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(sorted({int(x) for x, *_ in rows["served"]}), labels=[str(int(x)) for x, *_ in rows["served"]])
        ax.set_title(name)
        ax.set_xlabel("logged draws per training prompt (K)")
        ax.set_ylabel("test utility x100, mean over lambda")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    main()
