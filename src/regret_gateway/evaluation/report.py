"""Tables, curves and files of an offline run: results.json, utility.md, accuracy_cost.png.

* utility: mean +/- std over trials of the test utility x100 (validation utility for a run with
  ``evaluate_on='val'``) per lambda, and its mean over lambda;
* accuracy-cost curve: the (mean cost, mean accuracy) points of a method over lambda; its AUC is the
  trapezoid area (sklearn.metrics.auc style) with cost normalised by the mean cost of the most expensive
  model (x in [0, 1]); the curve is extended flat from its most expensive point to x = 1;
* paired comparison: per-trial difference of the mean-over-lambda utility between two methods (same
  seed, same logs), with its mean, std and the number of trials won;
* the cost-quality frontier (:mod:`regret_gateway.hull`), on the evaluated prompts: a method's AIQ (the mean
  quality x100 under the upper hull of its (cost, quality) points over lambda and the cheapest model's,
  over the costs from the cheapest to the dearest single model; RouterBench's), and the cost at which its
  hull first reaches 80% and 95% of the best single model's quality, as a share of that model's cost
  (RouteLLM's CPT beyond two models). The ``zero router`` row is the single models' own hull (what mixing
  them at random reaches).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from regret_gateway.evaluation.offline import MethodTrials, OfflineConfig, OfflineRun
from regret_gateway.hull import average_quality, cost_to_reach, upper_hull

ZERO_ROUTER = "zero router"  # the single models' hull

PAIRS = (
    ("served", "single-best"),
    ("rm-cluster", "single-best"),
    ("rm-softmax", "single-best"),
    ("rm-softmax", "r-and-c"),
    ("rm-softmax", "baseline"),
    ("full-feedback", "rm-softmax"),
    ("full-info-regret", "full-feedback"),
    ("full-info-regret", "single-best"),
    ("served", "full-info-regret"),
)


def trapezoid_auc(x: np.ndarray, y: np.ndarray) -> float:
    """Area under y(x) by the trapezoid rule; x is sorted first (ties keep the higher y last)."""
    order = np.lexsort((y, x))
    x, y = np.asarray(x)[order], np.asarray(y)[order]
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0))


def curve_auc(cost: np.ndarray, accuracy: np.ndarray, cost_max: float) -> float:
    x = np.clip(np.asarray(cost) / cost_max, 0.0, 1.0)
    y = np.asarray(accuracy)
    i = int(np.argmax(x))
    x, y = np.append(x, 1.0), np.append(y, y[i])
    return trapezoid_auc(x, y)


@dataclass(frozen=True)
class MethodSummary:
    """One method over the trials: per-lambda mean/std curves, the accuracy-cost AUC, time per trial."""

    lambdas: list[float]
    utility_mean: list[float]
    utility_std: list[float]
    accuracy_mean: list[float]
    cost_mean: list[float]
    auc: float
    auc_std: float
    utility_over_lambda_mean: float
    utility_over_lambda_std: float
    seconds_per_trial: float


@dataclass(frozen=True)
class PairedDifference:
    """Per-trial difference of the mean-over-lambda utility of two methods (same seed, same logs)."""

    mean: float
    std: float
    wins: int
    trials: int


@dataclass(frozen=True)
class Frontier:
    """A method's place on the cost-quality frontier (module doc): ``aiq`` x100; ``cost_to_80`` and
    ``cost_to_95``: the least cost reaching that share of the best single model's quality, as a share of that
    model's cost (None: never reached)."""

    aiq: float
    cost_to_80: float | None
    cost_to_95: float | None


def frontier(curves: dict[str, tuple[list[float], list[float]]], singles: dict[str, tuple[float, float]]) -> dict[str, Frontier]:
    """:class:`Frontier` of each method's ``curves`` (its (costs, qualities) over lambda) and of the zero router,
    against the ``singles`` (model -> (cost, quality))."""
    points = list(singles.values())
    lo, hi = min(c for c, _ in points), max(c for c, _ in points)
    floor = min(points)  # the cheapest model
    best_cost, best_q = max(points, key=lambda p: (p[1], -p[0]))
    out = {}
    for name, (cost, quality) in {**curves, ZERO_ROUTER: ([c for c, _ in points], [q for _, q in points])}.items():
        pts = [*zip(cost, quality), floor]
        shares = [cost_to_reach(pts, share * best_q) / best_cost for share in (0.8, 0.95)]
        out[name] = Frontier(100 * average_quality(pts, lo, hi), *(v if np.isfinite(v) else None for v in shares))
    return out


@dataclass(frozen=True)
class OfflineSummary:
    """The results.json document of an offline run (:meth:`to_json`), and what the table and plot read."""

    dataset: dict
    config: OfflineConfig
    methods: dict[str, MethodSummary]
    paired: dict[str, PairedDifference]
    diagnostics: dict[str, float]
    raw: dict[str, MethodTrials]
    timing: dict[str, float] = field(default_factory=dict)
    frontier: dict[str, Frontier] = field(default_factory=dict)

    @property
    def split_label(self) -> str:
        """'Test', or where a settings study scored (`--evaluate-on val|dev`)."""
        return {"val": "Validation", "dev": "Held-out train slice (dev)"}.get(self.config.evaluate_on, "Test")

    def to_json(self) -> dict:
        return asdict(self)


def summarize(run: OfflineRun, timing: dict[str, float] | None = None) -> OfflineSummary:
    """Mean/std curves and AUC per method, the paired differences, the mean nuisance diagnostics."""
    cost_max = max(run.dataset["mean_cost"].values())
    methods = {}
    for name, trials in run.methods.items():
        util, acc, cost = (np.asarray(v) for v in (trials.utility, trials.accuracy, trials.cost))
        aucs = [curve_auc(c, a, cost_max) for c, a in zip(cost, acc)]
        methods[name] = MethodSummary(
            lambdas=list(run.lambdas),
            utility_mean=util.mean(0).tolist(),
            utility_std=util.std(0).tolist(),
            accuracy_mean=acc.mean(0).tolist(),
            cost_mean=cost.mean(0).tolist(),
            auc=float(np.mean(aucs)),
            auc_std=float(np.std(aucs)),
            utility_over_lambda_mean=float(util.mean(1).mean()),
            utility_over_lambda_std=float(util.mean(1).std()),
            seconds_per_trial=float(np.mean(trials.seconds)),
        )
    paired = {}
    for a, b in PAIRS:
        if a in run.methods and b in run.methods:
            d = np.asarray(run.methods[a].utility).mean(1) - np.asarray(run.methods[b].utility).mean(1)
            paired[f"{a} - {b}"] = PairedDifference(
                float(d.mean()), float(d.std(ddof=1)) if len(d) > 1 else 0.0, int((d > 0).sum()), int(len(d))
            )
    diag = run.diagnostics
    with warnings.catch_warnings():  # a share that no trial defines (e.g. served never kept a constant) stays nan
        warnings.simplefilter("ignore", RuntimeWarning)
        diag_mean = {k: float(np.nanmean([d.get(k, np.nan) for d in diag])) for k in (diag[0] if diag else {})}
    return OfflineSummary(
        dataset=run.dataset,
        config=run.config,
        methods=methods,
        paired=paired,
        diagnostics=diag_mean,
        raw=run.methods,
        timing=dict(timing or {}),
        frontier=frontier({n: (m.cost_mean, m.accuracy_mean) for n, m in methods.items()}, _singles(run.dataset)),
    )


def _singles(dataset: dict) -> dict[str, tuple[float, float]]:
    """Each model alone, (cost, quality): on the evaluated prompts where the run says, else on the benchmark."""
    cost, quality = dataset.get("test_cost") or dataset["mean_cost"], dataset.get("test_accuracy") or dataset["mean_accuracy"]
    return {m: (float(cost[m]), float(quality[m])) for m in cost}


def utility_table(results: OfflineSummary) -> str:
    methods = results.methods
    lambdas = next(iter(methods.values())).lambdas
    trials = results.config.trials
    lines = [
        f"{results.split_label} utility x100 (mean +/- std over {trials} trials), a - lambda * c; "
        "`mean` is the mean over lambda, AUC of the accuracy-cost curve.",
        "",
        "| method | " + " | ".join(f"λ={l:g}" for l in lambdas) + " | mean | AUC |",
        "|---|" + "---:|" * (len(lambdas) + 2),
    ]
    for name, m in methods.items():
        cells = [f"{u:.1f}±{s:.1f}" for u, s in zip(m.utility_mean, m.utility_std)]
        mean = f"**{m.utility_over_lambda_mean:.2f}**±{m.utility_over_lambda_std:.2f}"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {mean} | {m.auc:.3f} |")
    if results.paired:
        lines += ["", "Paired differences of the mean-over-lambda utility (same seeds, same logs):", ""]
        lines += ["| comparison | mean | std | trials won |", "|---|---:|---:|---:|"]
        for key, p in results.paired.items():
            lines.append(f"| {key} | {p.mean:+.2f} | {p.std:.2f} | {p.wins}/{p.trials} |")
    if results.frontier:
        lines += ["", "The cost-quality frontier on the same prompts: AIQ (mean quality x100 under the hull, cheapest to dearest "
                  "model) and the cost at which the hull reaches 80% / 95% of the best single model's quality, as a share "
                  "of that model's cost:", "", "| method | AIQ | cost for 80% | cost for 95% |", "|---|---:|---:|---:|"]  # fmt: skip
        for name, f in results.frontier.items():
            share = ["never" if v is None else f"{v:.0%}" for v in (f.cost_to_80, f.cost_to_95)]
            lines.append(f"| {name} | {f.aiq:.2f} | {share[0]} | {share[1]} |")
    if results.diagnostics:
        lines += [
            "",
            "Nuisance diagnostics (mean over trials): " + ", ".join(f"{k}={v:.3g}" for k, v in results.diagnostics.items()),
        ]
    return "\n".join(lines) + "\n"


def plot_curves(results: OfflineSummary, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    # the reference rows get fixed looks; the learned routers one colour each (more than the default 10)
    references: dict[str, dict[str, Any]] = {
        "oracle": {"color": "black", "linestyle": ":"},
        "single-best": {"color": "grey", "linestyle": "--"},
        "served": {"color": "crimson", "linewidth": 2.5},
    }
    tab10, tab20 = plt.get_cmap("tab10").colors, plt.get_cmap("tab20").colors  # type: ignore[attr-defined]
    colours = iter(tab10[:7] + tab10[8:] + tab20[1::2])  # no grey: single-best's
    for name, m in results.methods.items():
        style: dict[str, Any] = references.get(name) or {
            "color": next(colours),
            **({"linestyle": "--"} if name == "full-feedback" else {}),
        }
        order = np.argsort(m.cost_mean)
        ax.plot(
            np.asarray(m.cost_mean)[order] * 1000,
            np.asarray(m.accuracy_mean)[order],
            marker="o",
            markersize=3,
            label=f"{name} (AUC {m.auc:.3f})",
            **style,
        )
    singles = _singles(results.dataset)
    ax.scatter([1000 * c for c, _ in singles.values()], [q for _, q in singles.values()], marker="x", color="grey",
               label="single models")  # fmt: skip
    hull = upper_hull(list(singles.values()))
    ax.plot([1000 * c for c, _ in hull], [q for _, q in hull], color="grey", linewidth=0.8, label="their hull (zero router)")
    ax.set_xscale("log")
    ax.set_xlabel("mean cost per 1k requests (US$, log scale)")
    ax.set_ylabel("mean accuracy")
    ax.set_title(f"{results.split_label} accuracy-cost curves over lambda ({results.config.trials} trials)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_outputs(results: OfflineSummary, out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "results.json", "table": out_dir / "utility.md", "plot": out_dir / "accuracy_cost.png"}
    paths["json"].write_text(json.dumps(results.to_json(), indent=2))
    paths["table"].write_text(utility_table(results))
    plot_curves(results, paths["plot"])
    return paths
