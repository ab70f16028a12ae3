"""The retrain report: a table per tier and candidate, the JSON and the plot."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import numpy as np

from regret_gateway.retrain.options import RetrainResult


def report_table(result: RetrainResult) -> str:
    """Markdown table per tier and candidate: estimated utility x100 (DR, 95% CI), SNIPS, quality, cost per
    1k requests, ESS; which candidate each tier serves, and why."""
    lines = [
        "| tier | λ | candidate | utility x100 (DR, 95% CI) | SNIPS x100 | quality | $ per 1k req | ESS | serves |",
        "|---|---:|---|---|---:|---:|---:|---:|---|",
    ]
    for row in result.tiers:
        for label, v in row.values.items():
            mark = "**served**" if label == row.served else ("incumbent" if label == row.incumbent else "")
            lines.append(
                f"| {row.tier} | {row.lam:g} | {label} | {100 * v.dr:.2f} [{100 * v.dr_ci[0]:.2f}, {100 * v.dr_ci[1]:.2f}] | "
                f"{100 * v.snips:.2f} | {v.quality:.3f} | {1000 * v.cost:.3f} | {v.ess:.0f} | {mark} |"
            )
    lines.append("")
    lines += [f"- {row.tier}: serves {row.served} -- {row.reason}" for row in result.tiers]
    return "\n".join(lines)


def write_report(result: RetrainResult, folder: Path) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stem = "report" if result.version and folder.name == result.version else f"retrain-{datetime.now():%Y%m%d-%H%M%S}"
    json_path = folder / f"{stem}.json"
    json_path.write_text(json.dumps(result.to_dict(), indent=2, default=float))
    result.report_paths = {"json": str(json_path)}
    try:
        import matplotlib  # noqa: F401  (the `train` extra)
    except ImportError:
        return  # a gateway-only install: the JSON report, no plot
    if result.tiers:
        png = folder / f"{stem}.png"
        plot(result, png)
        result.report_paths["png"] = str(png)
        json_path.write_text(json.dumps(result.to_dict(), indent=2, default=float))


def plot(result: RetrainResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tiers = result.tiers
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
    x = np.arange(len(tiers))

    def group(t, label: str) -> str:  # a bar per kind of candidate; what a tier served before, "incumbent"
        candidate = t.candidates[label]
        return "incumbent" if candidate.version is not None else candidate.kind

    groups = list(dict.fromkeys(group(t, label) for t in tiers for label in t.values))
    width = 0.8 / len(groups)
    for k, g in enumerate(groups):
        for j, t in enumerate(tiers):
            label = next((lab for lab in t.values if group(t, lab) == g), None)
            if label is None:
                continue
            v = t.values[label]
            ax1.bar(x[j] + (k - (len(groups) - 1) / 2) * width, 100 * v.dr, width, color=f"C{k}",
                    yerr=[[100 * (v.dr - v.dr_ci[0])], [100 * (v.dr_ci[1] - v.dr)]], capsize=3,
                    edgecolor="black" if label == t.served else "none", linewidth=2,
                    label=g if j == 0 or not any(group(tt, lab) == g for tt in tiers[:j] for lab in tt.values) else None)  # fmt: skip
    ax1.set_xticks(x, [f"{t.tier}\nλ={t.lam:g}" for t in tiers])
    ax1.set_ylabel("estimated utility x100 (DR, 95% CI)")
    ax1.set_title(f"retrain: {result.status} (black edge: served)")
    ax1.legend(fontsize=8)
    models = list(tiers[0].model_mix)
    bottom = np.zeros(len(tiers))
    for m in models:
        share = np.array([t.model_mix[m] for t in tiers])
        ax2.bar(x, share, 0.6, bottom=bottom, label=m)
        bottom += share
    ax2.set_xticks(x, [t.tier for t in tiers])
    ax2.set_ylabel("share of held-out requests")
    ax2.set_title("model mix of what each tier serves")
    ax2.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
