"""The per-round table, the verdict after the last round and the plot."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

BASELINES = (
    "gateway", "gateway-greedy", "full-info", "full-feedback", "litellm-adaptive", "best-single", "cheapest", "uniform",
)  # fmt: skip


HELD_OUT = ("held-out greedy", "held-out best-single", "held-out per-app best", "held-out full-info", "held-out oracle")


@dataclass
class RoundStats:
    round: int
    tier: str
    lam: float
    router_version: str | None
    utility: dict[str, float] = field(default_factory=dict)  # x100, per baseline
    accuracy: dict[str, float] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)  # USD per request


def round_table(table: list[RoundStats], rnd: int | None) -> str:
    rows = [s for s in table if rnd is None or s.round == rnd]
    held = [h for h in HELD_OUT if any(h in s.utility for s in rows)]
    lines = [
        "| round | tier | λ | " + " | ".join(BASELINES) + " | gateway acc | gateway $/1k | " + " | ".join(held) + " |",
        "|---:|---|---:|" + "---:|" * (len(BASELINES) + 2 + len(held)),
    ]
    for s in rows:
        lines.append(
            f"| {s.round} | {s.tier} | {s.lam:g} | "
            + " | ".join(f"{s.utility[b]:.1f}" for b in BASELINES)
            + f" | {s.accuracy['gateway']:.3f} | {1000 * s.cost['gateway']:.3f} | "
            + " | ".join(f"{s.utility[h]:.1f}" if h in s.utility else "-" for h in held)
            + " |"
        )
    return "utility x100 per tier (the round's traffic for every column but held-out: the prompts never sent)\n" + "\n".join(
        lines
    )


def verdict(table: list[RoundStats]) -> str:
    """After the last round: on every tier what the teams got (exploration included) against the best single
    model and LiteLLM's adaptive router; the router's greedy choices on the traffic; and the greedy bar, on
    the held-out prompts: at least the best single model on every tier and above it on the mean."""
    last = max(s.round for s in table)
    rows = [s for s in table if s.round == last]
    lines = [f"after the last round ({last}):"]
    for s in rows:
        u = s.utility
        lines.append(
            f"  {s.tier}: teams got {u['gateway']:.1f} (greedy {u['gateway-greedy']:.1f}) vs best single "
            f"{u['best-single']:.1f} ({'>=' if u['gateway'] >= u['best-single'] else 'BELOW'}), LiteLLM adaptive "
            f"{u['litellm-adaptive']:.1f} ({'>=' if u['gateway'] >= u['litellm-adaptive'] else 'BELOW'}), uniform "
            f"{u['uniform']:.1f}, full-info {u['full-info']:.1f}, full-feedback {u['full-feedback']:.1f}"
        )
    mean = {b: float(np.mean([s.utility[b] for s in rows])) for b in BASELINES}
    lift, ceiling = mean["gateway-greedy"] - mean["best-single"], mean["full-info"]
    gap = (ceiling - mean["gateway-greedy"]) / abs(ceiling) * 100 if ceiling else float("nan")
    lines.append(
        f"  mean over tiers, on the traffic (prompts the router may have been trained on): greedy "
        f"{mean['gateway-greedy']:.1f} vs best single {mean['best-single']:.1f} ({lift:+.1f}), vs best "
        f"full-information router {ceiling:.1f} ({abs(gap):.1f}% {'below' if gap > 0 else 'above'}); teams got "
        f"{mean['gateway']:.1f}"
    )
    if all("held-out greedy" in s.utility for s in rows):
        held = {h: float(np.mean([s.utility[h] for s in rows])) for h in HELD_OUT}
        below = [s.tier for s in rows if s.utility["held-out greedy"] < s.utility["held-out best-single"]]
        above = held["held-out greedy"] - held["held-out best-single"]
        lines.append(
            f"  held-out prompts (never sent; the greedy bar): greedy {held['held-out greedy']:.1f} vs best single "
            f"{held['held-out best-single']:.1f} ({above:+.1f}; {'above' if above > 0 else 'NOT above'} on the mean, "
            f"{'BELOW on ' + ', '.join(below) if below else '>= on every tier'}), full-information router "
            f"{held['held-out full-info']:.1f}"
        )
        app_gain = held["held-out per-app best"] - held["held-out best-single"]
        share = f"{above / app_gain:.0%} of it" if app_gain > 0 else "no app gain to reach"
        lines.append(
            f"  each app's best model {held['held-out per-app best']:.1f} ({app_gain:+.1f} over the best single model; "
            f"the greedy router reached {share}), oracle {held['held-out oracle']:.1f}"
        )
        if above > 0 and not below:
            lines.append(f"verdict: MET -- on prompts it never sent, the router's own choices beat the best single model by "
                         f"{above:+.1f} on the mean over tiers and are at least as good on every tier: it learned from its own logs")  # fmt: skip
        else:
            why = [f"not above the best single model on the mean ({above:+.1f})"] if above <= 0 else []
            why += [f"below it on {', '.join(below)}"] if below else []
            lines.append(f"verdict: NOT MET -- on prompts it never sent the router's own choices are {' and '.join(why)}: "
                         "its logs did not yet teach it to beat one fixed model there")  # fmt: skip
    return "\n".join(lines)


# one look per line, so lines that coincide (a tier served by the best single model: gateway, greedy and
# best-single) stay apart by marker and dash
LOOKS: dict[str, dict[str, Any]] = {
    "gateway": {"color": "C0", "lw": 2.5, "marker": "o", "ms": 7, "zorder": 5},
    "gateway-greedy": {"color": "C0", "lw": 1.2, "ls": ":", "marker": "x", "ms": 8, "zorder": 6},
    "full-info": {"color": "C2", "lw": 1.2, "ls": "--", "marker": "^"},
    "full-feedback": {"color": "C2", "lw": 1, "ls": ":", "marker": "v", "alpha": 0.8},
    "litellm-adaptive": {"color": "C1", "lw": 1.2, "marker": "D", "ms": 4},
    "best-single": {"color": "C3", "lw": 1.2, "ls": "-.", "marker": "+", "ms": 9},
    "cheapest": {"color": "C7", "lw": 1, "ls": "--", "alpha": 0.8},
    "uniform": {"color": "C7", "lw": 1, "ls": ":", "alpha": 0.8},
    "held-out greedy": {"color": "black", "lw": 1.5, "marker": "s", "ms": 5},
    "held-out best-single": {"color": "black", "lw": 1, "ls": "-.", "marker": "+", "ms": 9},
    "held-out per-app best": {"color": "C4", "lw": 1.2, "ls": "--", "marker": "*", "ms": 7},
}


def plot(table: list[RoundStats], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tiers = list(dict.fromkeys(s.tier for s in table))
    fig, axes = plt.subplots(1, len(tiers), figsize=(5 * len(tiers), 4.2), squeeze=False)
    for ax, tier in zip(axes[0], tiers):
        rows = [s for s in table if s.tier == tier]
        rounds = [s.round for s in rows]
        for name, look in LOOKS.items():
            if any(name in s.utility for s in rows):
                ax.plot(rounds, [s.utility.get(name, float("nan")) for s in rows], label=name, **look)
        ax.set_title(f"{tier} (λ={rows[0].lam:g})")
        ax.set_xlabel("round (retrain between rounds)")
        ax.set_xticks(rounds)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("utility x100")
    fig.suptitle("utility x100 per round: the round's traffic, except held-out (prompts never sent as traffic)", fontsize=10)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.14, 1, 1))  # the legend below the panels, over no line
    fig.savefig(path, dpi=110)
    plt.close(fig)
