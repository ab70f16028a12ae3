"""The savings report as one self-contained HTML page (``report --html``, ``GET /regret/report``): per team,
its lines of :mod:`regret_gateway.savings.report` and three plots drawn as inline SVG (no library, no file beside
it): spend per day against the budget, the mix of models that answered per day, and the team's served
point against every model alone -- (dollars per 1,000 requests, quality) -- with the models' upper hull
(what mixing single models at random reaches: the "zero router" of RouterBench)."""

from __future__ import annotations

import html

from regret_gateway.config import Settings
from regret_gateway.hull import upper_hull
from regret_gateway.savings.report import SavingsReport, TeamSavings

W, H, PAD = 520, 260, 48
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
PERIOD_DAYS = {"day": 1.0, "week": 7.0, "month": 30.4}


def _scale(lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _frame(title: str, body: list[str], x_label: str, y_label: str, ticks: list[str]) -> str:
    axes = [
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 10}" y2="{H - PAD}" stroke="#333"/>',
        f'<line x1="{PAD}" y1="20" x2="{PAD}" y2="{H - PAD}" stroke="#333"/>',
        f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle" font-size="11">{html.escape(x_label)}</text>',
        f'<text x="12" y="{H / 2}" text-anchor="middle" font-size="11" transform="rotate(-90 12 {H / 2})">{html.escape(y_label)}</text>',
        f'<text x="{W / 2}" y="14" text-anchor="middle" font-size="12" font-weight="bold">{html.escape(title)}</text>',
    ]
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img">{"".join(axes + ticks + body)}</svg>'


def _y_ticks(lo: float, hi: float, y, fmt: str) -> list[str]:
    return [f'<text x="{PAD - 4}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="9">{fmt.format(v)}</text>'
            for v in (lo, (lo + hi) / 2, hi)]  # fmt: skip


def spend_plot(t: TeamSavings, budget_usd: float | None, per: str | None) -> str:
    """Bars of spend per day; a dashed line at the budget's daily share where the team has one."""
    daily = t.daily_spend or [0.0]
    per_day = None if budget_usd is None or per is None else budget_usd / PERIOD_DAYS[per]
    top = max(max(daily), per_day or 0.0) * 1.1 or 1.0
    y = _scale(0.0, top, H - PAD, 20)
    step = (W - 10 - PAD) / len(daily)
    bars = [f'<rect x="{PAD + i * step + 1:.1f}" y="{y(v):.1f}" width="{max(step - 2, 1):.1f}" height="{H - PAD - y(v):.1f}" '
            f'fill="{COLOURS[0]}"><title>{t.days[i] if i < len(t.days) else ""}: ${v:,.2f}</title></rect>'
            for i, v in enumerate(daily)]  # fmt: skip
    if per_day is not None:
        bars.append(f'<line x1="{PAD}" y1="{y(per_day):.1f}" x2="{W - 10}" y2="{y(per_day):.1f}" stroke="#d62728" stroke-dasharray="5,3"/>'
                    f'<text x="{W - 12}" y="{y(per_day) - 4:.1f}" text-anchor="end" font-size="9" fill="#d62728">budget ${budget_usd:,.2f} per {per}</text>')  # fmt: skip
    first, last = (t.days[0], t.days[-1]) if t.days else ("", "")
    return _frame(f"spend per day ({first} to {last})", bars, "day", "USD", _y_ticks(0.0, top, y, "${:,.2f}"))


def mix_plot(t: TeamSavings, models: tuple[str, ...]) -> str:
    """Stacked bars: per day, the share of requests each model answered."""
    mix = t.daily_mix or [{}]
    step = (W - 10 - PAD) / len(mix)
    y = _scale(0.0, 1.0, H - PAD, 20)
    names = list(models) + sorted({m for day in mix for m in day} - set(models))
    bars = []
    for i, day in enumerate(mix):
        total, base = sum(day.values()) or 1, 0.0
        for k, m in enumerate(names):
            share = day.get(m, 0) / total
            if share > 0:
                bars.append(f'<rect x="{PAD + i * step + 1:.1f}" y="{y(base + share):.1f}" width="{max(step - 2, 1):.1f}" '
                            f'height="{y(base) - y(base + share):.1f}" fill="{COLOURS[k % len(COLOURS)]}"><title>{html.escape(m)}: '
                            f'{share:.0%}</title></rect>')  # fmt: skip
                base += share
    slot = (W - 10 - PAD) / max(len(names), 1)  # the legend: one coloured name per model under the axis
    legend = [f'<text x="{PAD + slot * (k + 0.5):.1f}" y="{H - PAD + 14}" text-anchor="middle" font-size="9" '
              f'fill="{COLOURS[k % len(COLOURS)]}">{html.escape(m)}</text>' for k, m in enumerate(names)]  # fmt: skip
    return _frame("which model answered, per day", bars + legend, "day", "share of requests", _y_ticks(0.0, 1.0, y, "{:.0%}"))


def frontier_plot(t: TeamSavings) -> str:
    """The served point against each model alone (estimated on the same requests, 95% quality intervals)."""
    alts = [a for a in t.alternatives if a.supported]
    if t.served is None:
        return ""
    served = (1000 * t.served.cost, 100 * t.served.quality)
    pts = [(1000 * a.cost, 100 * a.quality, a) for a in alts]
    xs = [served[0]] + [p[0] for p in pts]
    lows = [served[1]] + [100 * (t.served.quality - a.quality_gap_ci[1]) for a in alts]
    highs = [served[1]] + [100 * (t.served.quality - a.quality_gap_ci[0]) for a in alts]
    x = _scale(0.0, max(xs) * 1.1 or 1.0, PAD, W - 10)
    y = _scale(min(lows) - 1, max(highs) + 1, H - PAD, 20)
    body = []
    hull = upper_hull([(p[0], p[1]) for p in pts])
    if len(hull) > 1:
        body.append('<polyline fill="none" stroke="#999" stroke-dasharray="4,3" points="'
                    + " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in hull) + '"/>')  # fmt: skip
    for cx, cy, a in pts:
        lo, hi = 100 * (t.served.quality - a.quality_gap_ci[1]), 100 * (t.served.quality - a.quality_gap_ci[0])
        body.append(f'<line x1="{x(cx):.1f}" y1="{y(lo):.1f}" x2="{x(cx):.1f}" y2="{y(hi):.1f}" stroke="#999"/>'
                    f'<circle cx="{x(cx):.1f}" cy="{y(cy):.1f}" r="4" fill="#555"><title>{html.escape(a.model)}</title></circle>'
                    f'<text x="{x(cx) + 6:.1f}" y="{y(cy) - 4:.1f}" font-size="9">{html.escape(a.model)}</text>')  # fmt: skip
    body.append(f'<circle cx="{x(served[0]):.1f}" cy="{y(served[1]):.1f}" r="6" fill="#d62728"><title>served</title></circle>'
                f'<text x="{x(served[0]) + 8:.1f}" y="{y(served[1]) + 4:.1f}" font-size="10" fill="#d62728">served</text>')  # fmt: skip
    ticks = _y_ticks(min(lows) - 1, max(highs) + 1, y, "{:.0f}") + [
        f'<text x="{x(v):.1f}" y="{H - PAD + 12}" text-anchor="middle" font-size="9">${v:,.2f}</text>' for v in (0.0, max(xs))
    ]
    return _frame("served against every model alone (same requests)", body, "USD per 1,000 requests", "quality (points)", ticks)


def report_html(report: SavingsReport, settings: Settings) -> str:
    """The whole page (module doc)."""
    parts = [f"<h1>regret-gateway: what routing saved</h1><p>{html.escape(report.text().splitlines()[0])}</p>",
             *(f"<p>{html.escape(line)}</p>" for line in report.left_out_lines())]  # fmt: skip
    for t in report.teams:
        spec = settings.teams.get(t.team) if t.team is not None else None
        budget = spec.budget if spec is not None else None
        lines = "".join(f"<li>{html.escape(line.strip())}</li>" for line in t.lines()[1:])
        parts.append(
            f"<section><h2>{html.escape(t.headline())}</h2><ul>{lines}</ul><div class='plots'>"
            f"{spend_plot(t, budget.usd if budget else None, budget.per if budget else None)}{mix_plot(t, settings.models)}"
            f"{frontier_plot(t)}</div></section>"
        )
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:1700px}h2{font-size:1.05em}.plots{display:flex;flex-wrap:wrap;gap:12px}"
    )
    return f"<!doctype html><html><head><meta charset='utf-8'><title>regret-gateway savings</title><style>{style}</style></head><body>{''.join(parts)}</body></html>"
