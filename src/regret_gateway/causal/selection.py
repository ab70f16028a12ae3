"""What a tier serves: the gate's choice among its candidates on held-out logs (:func:`select`), each valued
and compared with the incumbent by :class:`~regret_gateway.causal.ope.LoggedData`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from regret_gateway.causal.ope import LoggedData, PolicyValue
from regret_gateway.confidence import ALPHA, family_alpha, selective_interval, z_critical


@dataclass(frozen=True)
class Selection:
    """Which candidate serves a tier: of the challengers whose paired gain over the incumbent is confidently
    above ``required`` (the lower end of its interval), the best by DR value; else the incumbent. ``best``
    is the challenger whose gain is reported: the served one, or where none is confident the best by DR."""

    served: str
    incumbent: str
    best: str
    gain: float  # DR value of the best candidate minus the incumbent's
    gain_ci: tuple[float, float]  # a replacement's: given that it passed (select)
    values: dict[str, PolicyValue]
    required: float = 0.0  # the margin the lower end of the gain's interval had to clear

    @property
    def changed(self) -> bool:
        return self.served != self.incumbent

    @property
    def rows_to_confirm(self) -> float | None:
        """About how many times these held-out rows the gate would need to confirm the best challenger's
        gain, were it to stay this size: an interval's width shrinks as one over the square root of the
        rows, and its lower end must rise from where it is to above ``required``. None where there is
        nothing to confirm (the incumbent is the best, the gain was confirmed, or it is not above
        ``required``)."""
        if self.best == self.incumbent or self.changed or self.gain <= self.required:
            return None
        return ((self.gain - self.gain_ci[0]) / (self.gain - self.required)) ** 2

    def reason(self) -> str:
        g, (lo, hi) = 100 * self.gain, (100 * self.gain_ci[0], 100 * self.gain_ci[1])
        if self.best == self.incumbent:
            return f"{self.incumbent} is the best candidate"
        verdict = "replaces" if self.changed else "is not confidently better than"
        text = f"{self.best} {verdict} {self.incumbent}: {g:+.2f} [{lo:+.2f}, {hi:+.2f}] x100"
        factor = self.rows_to_confirm
        return text if factor is None else text + f" (a gain this size needs ~{factor:.0f}x these rows to confirm)"


def select(
    data: LoggedData,
    candidates: dict[str, np.ndarray],
    incumbent: str,
    lam: float,
    *,
    required: float = 0.0,
    force: bool = False,
    n_boot: int = 500,
    alpha: float = ALPHA,
    seed: int = 0,
) -> Selection:
    """Choose among ``candidates`` (name -> (n,) actions on the held-out rows; ``incumbent`` is one of them).

    Every challenger's paired gain over the incumbent is tested, each at ``alpha / challengers``
    (Bonferroni: the best of several is the one whose noise flattered it most, and ``alpha`` bounds the
    chance that any challenger without a real gain passes, however many there are); of those whose
    interval's lower end exceeds ``required`` (``force``: whose gain is positive at all), the best by DR
    value replaces the incumbent (testing only the best by DR would keep a wrong incumbent whenever a noisy
    candidate led while another, proven better, trailed it); else the incumbent stays. A replacement's
    interval is the one given that it passed (:func:`~regret_gateway.confidence.selective_interval`)."""
    if incumbent not in candidates:
        raise ValueError(f"the incumbent {incumbent!r} must be one of the candidates {sorted(candidates)}")
    values = {name: data.value(a, lam, n_boot=n_boot, alpha=alpha, seed=seed) for name, a in candidates.items()}
    family = family_alpha(alpha, len(candidates) - 1)
    ahead = {name: a for name, a in candidates.items() if name != incumbent and values[name].dr > values[incumbent].dr}
    gains = data.gains(ahead, candidates[incumbent], lam, n_boot=n_boot, alpha=family, seed=seed)
    passed = [name for name, (gain, ci) in gains.items() if ci[0] > required or (force and gain > 0)]
    leader = max(values, key=lambda name: (values[name].dr, name == incumbent))
    best = max(passed, key=lambda name: values[name].dr) if passed else leader
    gain, ci = gains.get(best, (0.0, (0.0, 0.0)))
    if passed and ci[0] > required:  # the claim, given that it passed (se from the bootstrap's lower end)
        ci = selective_interval(gain, (gain - ci[0]) / z_critical(family, two_sided=True), required + gain - ci[0], family)
    return Selection(best if passed else incumbent, incumbent, best, gain, ci, values, required)
