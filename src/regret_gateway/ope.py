"""Off-policy value of a deterministic routing policy on logged data: DR and SNIPS, bootstrap intervals,
effective sample size.

For logs (x_i, t_i, y_i, p_i) with y = a - lambda * c, a policy pi, and outcome models r_t(x):

    DR    = mean_i [ r_pi(x_i) + w_i (y_i - r_pi(x_i)) ],   w_i = 1[t_i = pi(x_i)] / p_i
    SNIPS = sum_i w_i y_i / sum_i w_i
    ESS   = (sum_i w_i)^2 / sum_i w_i^2

(where w_i > 0 the logged model is pi's choice, so r_{t_i} = r_pi). The estimators share one base
(Open Bandit Pipeline's layout): a subclass implements :meth:`OffPolicyEstimator._values`, the estimate
on each of a batch of row resamples; the point estimate is the full sample, the interval the percentile
bootstrap over the same resamples for every estimator. The formulas are those of
:mod:`regret_gateway.causal.stats`, shared with the nuisance stage. :class:`LoggedData` values a policy
and the paired gain of one policy over another; :func:`select` chooses what a tier serves.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from regret_gateway.causal.stats import bootstrap_rows, dr_term, effective_sample_size, percentile_interval


@dataclass(frozen=True)
class PolicyValue:
    dr: float
    dr_ci: tuple[float, float]
    snips: float
    snips_ci: tuple[float, float]
    quality: float  # DR estimate of mean quality
    cost: float  # DR estimate of mean cost (USD per request)
    ess: float
    match_rate: float  # share of logged rows where the logged model is the policy's choice
    n: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LoggedOutcomes:
    """Per logged row: observed outcome ``y`` (n,), the outcome model's value of the policy's choice
    ``r`` (n,), and the importance weight ``w`` (n,) of that choice."""

    y: np.ndarray
    r: np.ndarray
    w: np.ndarray


class OffPolicyEstimator:
    """Base: ``estimate(d)`` is :meth:`_values` on all rows; ``interval(d, rows)`` on bootstrap resamples."""

    name = "base"

    def _values(self, d: LoggedOutcomes, rows: np.ndarray) -> np.ndarray:
        """(B,) estimate on each resample; ``rows`` is (B, n) row indices."""
        raise NotImplementedError

    def estimate(self, d: LoggedOutcomes) -> float:
        return float(self._values(d, np.arange(len(d.y))[None, :])[0])

    def interval(self, d: LoggedOutcomes, rows: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
        return percentile_interval(self._values(d, rows), alpha)


class DoublyRobustOPE(OffPolicyEstimator):
    name = "dr"

    def _values(self, d, rows):
        return dr_term(d.r, d.y, d.w)[rows].mean(1)


class SelfNormalizedIPS(OffPolicyEstimator):
    name = "snips"

    def _values(self, d, rows):
        w = d.w[rows]
        with np.errstate(invalid="ignore", divide="ignore"):
            return (w * d.y[rows]).sum(1) / w.sum(1)


DR, SNIPS = DoublyRobustOPE(), SelfNormalizedIPS()


@dataclass(frozen=True)
class LoggedData:
    """Held-out logs for off-policy evaluation: ``logged`` actions (n,), observed ``quality`` and ``cost``
    (n,), logging ``propensity`` (n,), and outcome-model predictions ``quality_hat``/``cost_hat`` (n, T)
    fitted on other rows."""

    logged: np.ndarray
    quality: np.ndarray
    cost: np.ndarray
    propensity: np.ndarray
    quality_hat: np.ndarray
    cost_hat: np.ndarray

    def __post_init__(self) -> None:
        if len(self.logged) == 0:
            raise ValueError("cannot evaluate a policy on 0 rows")
        p = np.asarray(self.propensity, dtype=np.float64)
        if p.min() <= 0 or p.max() > 1:
            raise ValueError(f"`propensity` must be in (0, 1], got min={p.min():.6g}, max={p.max():.6g}")

    def outcomes(self, actions: np.ndarray, lam: float) -> tuple[LoggedOutcomes, LoggedOutcomes, LoggedOutcomes]:
        """(utility, quality, cost) per row for the policy that chose ``actions``."""
        actions = np.asarray(actions)
        w = (actions == self.logged) / np.asarray(self.propensity, dtype=np.float64)
        rows = np.arange(len(actions))
        q_hat, c_hat = self.quality_hat[rows, actions], self.cost_hat[rows, actions]
        return (LoggedOutcomes(self.quality - lam * self.cost, q_hat - lam * c_hat, w),
                LoggedOutcomes(self.quality, q_hat, w), LoggedOutcomes(self.cost, c_hat, w))  # fmt: skip

    def value(self, actions: np.ndarray, lam: float, *, n_boot: int = 500, alpha: float = 0.05, seed: int = 0) -> PolicyValue:
        """DR and SNIPS value (with bootstrap intervals), DR quality and cost, ESS, match rate."""
        utility, quality, cost = self.outcomes(actions, lam)
        boot = bootstrap_rows(len(actions), n_boot, seed)
        w = utility.w
        return PolicyValue(
            dr=DR.estimate(utility), dr_ci=DR.interval(utility, boot, alpha),
            snips=SNIPS.estimate(utility) if w.sum() > 0 else float("nan"), snips_ci=SNIPS.interval(utility, boot, alpha),
            quality=DR.estimate(quality), cost=DR.estimate(cost), ess=effective_sample_size(w),
            match_rate=float(np.mean(np.asarray(actions) == self.logged)), n=len(actions),
        )  # fmt: skip

    def gain(
        self, actions: np.ndarray, reference: np.ndarray, lam: float, *, n_boot: int = 500, alpha: float = 0.05, seed: int = 0
    ) -> tuple[float, tuple[float, float]]:
        """DR value of ``actions`` minus that of ``reference`` and its paired bootstrap interval (the same
        resampled rows for both policies, so the noise they share cancels)."""
        a, b = self.outcomes(actions, lam)[0], self.outcomes(reference, lam)[0]
        diff = dr_term(a.r, a.y, a.w) - dr_term(b.r, b.y, b.w)
        boot = bootstrap_rows(len(diff), n_boot, seed)
        return float(diff.mean()), percentile_interval(diff[boot].mean(1), alpha)


@dataclass(frozen=True)
class Selection:
    """Which candidate serves a tier: the best by DR value, if its paired gain over the incumbent is
    confidently above ``required`` (the lower end of its interval), else the incumbent."""

    served: str
    incumbent: str
    best: str
    gain: float  # DR value of the best candidate minus the incumbent's
    gain_ci: tuple[float, float]
    values: dict[str, PolicyValue]

    @property
    def changed(self) -> bool:
        return self.served != self.incumbent

    def reason(self) -> str:
        g, (lo, hi) = 100 * self.gain, (100 * self.gain_ci[0], 100 * self.gain_ci[1])
        if self.best == self.incumbent:
            return f"{self.incumbent} is the best candidate"
        verdict = "replaces" if self.changed else "is not confidently better than"
        return f"{self.best} {verdict} {self.incumbent}: {g:+.2f} [{lo:+.2f}, {hi:+.2f}] x100"


def select(
    data: LoggedData,
    candidates: dict[str, np.ndarray],
    incumbent: str,
    lam: float,
    *,
    required: float = 0.0,
    force: bool = False,
    n_boot: int = 500,
    alpha: float = 0.05,
    seed: int = 0,
) -> Selection:
    """Choose among ``candidates`` (name -> (n,) actions on the held-out rows; ``incumbent`` is one of them).

    The best candidate by DR value replaces the incumbent only when the lower end of the paired bootstrap
    interval of its gain exceeds ``required`` (``force``: whenever it is better at all). Never worse than the
    incumbent with confidence: a tier whose candidates cannot show a gain keeps what it has. The best of
    several challengers is the one whose noise flattered it most, so the gain's interval is taken at
    ``alpha / challengers`` (Bonferroni): ``alpha`` bounds the chance that any challenger without a real
    gain replaces the incumbent, however many there are."""
    if incumbent not in candidates:
        raise ValueError(f"the incumbent {incumbent!r} must be one of the candidates {sorted(candidates)}")
    values = {name: data.value(a, lam, n_boot=n_boot, alpha=alpha, seed=seed) for name, a in candidates.items()}
    best = max(values, key=lambda name: (values[name].dr, name == incumbent))
    family = alpha / max(1, len(candidates) - 1)
    gain, ci = data.gain(candidates[best], candidates[incumbent], lam, n_boot=n_boot, alpha=family, seed=seed)
    confident = ci[0] > required or (force and gain > 0)
    return Selection(best if best != incumbent and confident else incumbent, incumbent, best, gain, ci, values)
