"""Off-policy value of a deterministic routing policy on logged data: DR and SNIPS, bootstrap intervals,
effective sample size.

For logs (x_i, t_i, y_i, p_i) with y = a - lambda * c, a policy pi, and outcome models r_t(x):

    DR    = mean_i [ r_pi(x_i) + w_i (y_i - r_pi(x_i)) ],   w_i = 1[t_i = pi(x_i)] / p_i
    SNIPS = sum_i w_i y_i / sum_i w_i
    ESS   = (sum_i w_i)^2 / sum_i w_i^2

(where w_i > 0 the logged model is pi's choice, so r_{t_i} = r_pi).

Logs written by several logging policies (the gateway's tiers, each under the router versions it
served: "loggers") give a better DR estimate when each logger's correction counts as far as it saw the
policy's choices (the *weighted* estimator over multiple loggers of Agarwal, Basu, Schnabel and Joachims,
WSDM 2017, applied per chosen model). With ``strata`` s_i naming each row's logger,

    DR = mean_i r_pi(x_i) + sum_a sum_s omega_{s,a} C_{s,a},
    C_{s,a} = mean_{i in s} 1[pi(x_i) = a] w_i (y_i - r_pi(x_i))       (logger s's correction of block a)
    omega_{s,a} proportional to n_s / k_{s,a},  summing to 1 over s,
    k_{s,a} = mean_{i in s, pi(x_i) = a} v_i,      v_i the logger's 1 / mu_s(a | x_i) as its draw tells it

where n_s is the logger's row count. C_{s,a} has variance ~ P(pi = a) k_{s,a} / n_s, and omega is its
inverse; every logger's C_{s,a} is an unbiased estimate of the outcome model's error on block a when the
loggers see the same prompts. The weights must not depend on which rows a logger happened to draw: where a
logger favoured a on most of the block but explores it elsewhere at 1/1,000, its realised draws almost
never include the rest, and a weight read from them (the squared weights it drew) makes it look exact on
the whole block -- its correction then leaves the outcome model's error on the rest uncorrected, and the
learned candidates, which depart from the loggers exactly where that model is optimistic, were valued 2.6-5.2
points above their truth on the same rows with intervals that missed it (docs/experiments/platform-replay.md).
So v_i is exact where the gateway logged the whole distribution the row was drawn from (``distributions``:
1 / mu_s(a | x_i)), else it comes from what the logger favoured at that prompt (``favoured``: its greedy model, or
:data:`~regret_gateway.data.FAVOURED_UNIFORM` for a uniform draw, or
:data:`~regret_gateway.data.FAVOURED_UNKNOWN`): 1/p_i where the logged model is a or the draw was uniform
among the eligible models; 1 / (1 - p_i) where the logger favoured a but drew another (a lower bound of
its share of a); else the logger's worst case, 1/p_s, p_s the smallest propensity it logged (at most 1/T;
a logger that never randomised counts as knowing nothing of other models: 1e6). Without the distribution, a
router that explored a contender at 7% on every request counted as knowing it at its floor's 0.25%: its
exploration barely moved the gate (docs/experiments/platform-replay.md). With one logger it is the
plain DR above. The estimators share one base (Open Bandit Pipeline's layout): a subclass implements
:meth:`OffPolicyEstimator._values`, the estimate on each of a batch of row resamples; the point estimate is
the full sample, the interval the percentile bootstrap over the same resamples for every estimator. Where
the rows' quality is an LLM judge's score corrected by its estimated error
(:class:`~regret_gateway.data.TargetErrors`), each resample also redraws that estimate, so the DR interval
carries its uncertainty. The formulas are :mod:`regret_gateway.causal.stats`'s, shared with the nuisance
stage. :class:`LoggedData` values a policy and the paired gain of one over another;
:func:`regret_gateway.causal.selection.select` chooses what a tier serves.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from regret_gateway.causal.stats import bootstrap_counts, dr_term, effective_sample_size
from regret_gateway.confidence import ALPHA, percentile_interval
from regret_gateway.data import FAVOURED_UNIFORM, FAVOURED_UNKNOWN, TargetErrors

Shifts = tuple[np.ndarray, np.ndarray]  # (slope, intercept), each (B, G): TargetErrors.shifts
N_BOOT = 300  # bootstrap resamples of retrain's intervals: the gate's and the budget ladders' (RetrainOptions.n_boot)


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
    ``r`` (n,), and the importance weight ``w`` (n,) of that choice; with several loggers, the row's
    logger ``strata`` (n,) in 0..S-1, the policy's choice ``actions`` (n,), each logger's worst-case inverse
    propensity ``worst`` (S,) (:func:`worst_case_inverse_propensity`) and each row's ``inverse`` (n,): its
    logger's 1 / mu(choice | x) as far as the logger's draw tells it (module doc); where ``y`` holds judge
    scores corrected by an estimated error, how uncertain that is (``errors``)."""

    y: np.ndarray
    r: np.ndarray
    w: np.ndarray
    strata: np.ndarray | None = None
    actions: np.ndarray | None = None
    worst: np.ndarray | None = None
    errors: TargetErrors | None = None
    inverse: np.ndarray | None = None

    def terms(self) -> np.ndarray:
        """(n,) the plain DR term of each row."""
        return dr_term(self.r, self.y, self.w)

    def _moved(self, shifts: Shifts | None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(rows, their correction groups, their importance weight times their raw score): the matched rows of a
        corrected judge score, whose DR correction w (y - r) a redrawn error moves; None where nothing moves."""
        if shifts is None or self.errors is None:
            return None
        rows = np.flatnonzero((self.w > 0) & (self.errors.group >= 0))
        return rows, self.errors.group[rows], self.w[rows] * self.errors.raw[rows]

    def dr(self, counts: np.ndarray, shifts: Shifts | None = None) -> np.ndarray:
        """(B,) DR estimate on each resample, ``counts`` (B, n) the times each row is in it (a row of ones:
        the sample itself): plain, or weighted by logger (module doc); ``shifts`` (B resamples of the judge's
        error, :meth:`LoggedData.shifts`) move the corrected judge scores of each resample."""
        moved = self._moved(shifts)
        if self.strata is None or self.actions is None or self.worst is None or self.inverse is None or len(self.worst) == 1:
            out = counts @ self.terms()
            if (
                moved is not None and shifts is not None
            ):  # resample b moves row i by slope[b, g_i] w_i raw_i + intercept[b, g_i] w_i
                rows, g, w_raw = moved
                G = shifts[0].shape[1]
                by_group = np.zeros((len(self.y), 2 * G))
                by_group[rows, g], by_group[rows, G + g] = w_raw, self.w[rows]
                sums = counts @ by_group
                out = out + (shifts[0] * sums[:, :G]).sum(1) + (shifts[1] * sums[:, G:]).sum(1)
            return out / counts.sum(1)
        S, T = len(self.worst), int(self.actions.max()) + 1
        cell = self.strata * T + self.actions
        base = self.w * (self.y - self.r)
        worst = self.worst
        out = np.empty(len(counts))
        for b, c in enumerate(counts):
            correction = base
            if moved is not None and shifts is not None:
                rows, g, w_raw = moved
                correction = base.copy()
                correction[rows] += shifts[0][b, g] * w_raw + shifts[1][b, g] * self.w[rows]
            n_s = np.bincount(self.strata, c, minlength=S)
            mean = np.bincount(cell, c * correction, minlength=S * T).reshape(S, T) / np.maximum(n_s, 1.0)[:, None]
            m = np.bincount(cell, c, minlength=S * T).reshape(S, T)
            seen = np.bincount(cell, c * self.inverse, minlength=S * T).reshape(S, T)
            kappa = np.where(m > 0, seen / np.maximum(m, 1), worst[:, None])  # an empty block: the logger's floor
            precision = n_s[:, None] / kappa
            omega = precision / precision.sum(0)
            out[b] = c @ self.r / c.sum() + float((omega * mean).sum())
        return out


def worst_case_inverse_propensity(strata: np.ndarray, propensity: np.ndarray, n_models: int) -> np.ndarray:
    """(S,) 1 / p_s for loggers ``strata`` (n,) in 0..S-1: p_s the smallest propensity logger s logged, at
    most 1 / ``n_models`` (some model always has at most that); a logger whose every propensity is 1 never
    randomised and knows nothing of the models it did not choose: 1e6."""
    S = int(strata.max()) + 1
    smallest = np.ones(S)
    np.minimum.at(smallest, strata, np.asarray(propensity, dtype=np.float64))
    return np.where(smallest < 1.0 - 1e-9, np.maximum(1.0 / smallest, n_models), 1e6)


class OffPolicyEstimator:
    """Base: ``estimate(d)`` is :meth:`_values` on all rows; ``interval(d, counts)`` on bootstrap resamples."""

    name = "base"

    def _values(self, d: LoggedOutcomes, counts: np.ndarray, shifts: Shifts | None = None) -> np.ndarray:
        """(B,) estimate on each resample; ``counts`` (B, n) is how often each row is in it, ``shifts`` how
        each resample redraws the judge's error (estimators that model no outcome ignore it)."""
        raise NotImplementedError

    def estimate(self, d: LoggedOutcomes) -> float:
        return float(self._values(d, np.ones((1, len(d.y))))[0])

    def interval(
        self, d: LoggedOutcomes, counts: np.ndarray, alpha: float = ALPHA, shifts: Shifts | None = None
    ) -> tuple[float, float]:
        return percentile_interval(self._values(d, counts, shifts), alpha)


class DoublyRobustOPE(OffPolicyEstimator):
    name = "dr"

    def _values(self, d, counts, shifts=None):
        return d.dr(counts, shifts)


class SelfNormalizedIPS(OffPolicyEstimator):
    name = "snips"

    def _values(self, d, counts, shifts=None):
        with np.errstate(invalid="ignore", divide="ignore"):
            return counts @ (d.w * d.y) / (counts @ d.w)


DR, SNIPS = DoublyRobustOPE(), SelfNormalizedIPS()


@dataclass(frozen=True)
class LoggedData:
    """Held-out logs for off-policy evaluation: ``logged`` actions (n,), observed ``quality`` and ``cost``
    (n,), logging ``propensity`` (n,), and outcome-model predictions ``quality_hat``/``cost_hat`` (n, T)
    fitted on other rows; optionally each row's logger ``strata`` (n,) (any labels: the gateway's tier and
    router version), which weights each logger's DR correction by what it knows (module doc), and each
    row's prompt ``groups`` (n,) in 0..G-1 (:func:`~regret_gateway.causal.stats.prompt_groups`): the
    bootstrap then resamples prompts, so a prompt logged many times counts as one draw; where ``quality``
    holds judge scores corrected by an estimated error, how uncertain it is (``target_errors``: every
    resample redraws it); and each row's ``favoured`` (n,): the model its logger favoured at that prompt (its
    greedy choice), :data:`~regret_gateway.data.FAVOURED_UNIFORM` or
    :data:`~regret_gateway.data.FAVOURED_UNKNOWN` (None: unknown everywhere), which tells the loggers'
    weights (module doc); and each row's whole logging distribution ``distributions`` (n, T) where the gateway
    logged it (NaN rows: not logged; None: nowhere), which tells them exactly."""

    logged: np.ndarray
    quality: np.ndarray
    cost: np.ndarray
    propensity: np.ndarray
    quality_hat: np.ndarray
    cost_hat: np.ndarray
    strata: np.ndarray | None = None
    groups: np.ndarray | None = None
    target_errors: TargetErrors | None = None
    favoured: np.ndarray | None = None
    distributions: np.ndarray | None = None
    worst: np.ndarray | None = field(default=None, init=False, repr=False)  # (S,) per logger, from strata
    _boot: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # (n_boot, seed) -> counts

    def __post_init__(self) -> None:
        if len(self.logged) == 0:
            raise ValueError("cannot evaluate a policy on 0 rows")
        p = np.asarray(self.propensity, dtype=np.float64)
        if p.min() <= 0 or p.max() > 1:
            raise ValueError(f"`propensity` must be in (0, 1], got min={p.min():.6g}, max={p.max():.6g}")
        if self.strata is not None:
            labels = np.asarray(self.strata)
            if labels.shape != np.shape(self.logged):
                raise ValueError(f"`strata` must have one label per row ({len(self.logged)}), got shape {labels.shape}")
            strata = np.unique(labels, return_inverse=True)[1].reshape(-1)
            object.__setattr__(self, "strata", strata)
            object.__setattr__(self, "worst", worst_case_inverse_propensity(strata, p, np.shape(self.quality_hat)[1]))
        if self.groups is not None:
            groups = np.asarray(self.groups)
            if groups.shape != np.shape(self.logged):
                raise ValueError(f"`groups` must have one label per row ({len(self.logged)}), got shape {groups.shape}")
            object.__setattr__(self, "groups", np.unique(groups, return_inverse=True)[1].reshape(-1))
        if self.favoured is not None:
            favoured = np.asarray(self.favoured, dtype=np.int64)
            if favoured.shape != np.shape(self.logged):
                raise ValueError(f"`favoured` must have one entry per row ({len(self.logged)}), got shape {favoured.shape}")
            object.__setattr__(self, "favoured", favoured)
        if self.distributions is not None:
            spread = np.asarray(self.distributions, dtype=np.float64)
            if spread.shape != np.shape(self.quality_hat):
                raise ValueError(f"`distributions` must be (n, T) = {np.shape(self.quality_hat)}, got shape {spread.shape}")
            object.__setattr__(self, "distributions", spread)

    def subset(self, rows: np.ndarray) -> "LoggedData":
        """The rows ``rows`` (their loggers, prompts, judge errors and what their loggers favoured kept)."""
        return LoggedData(self.logged[rows], self.quality[rows], self.cost[rows], np.asarray(self.propensity)[rows],
                          self.quality_hat[rows], self.cost_hat[rows],
                          strata=None if self.strata is None else self.strata[rows],
                          groups=None if self.groups is None else self.groups[rows],
                          target_errors=None if self.target_errors is None else self.target_errors.subset(rows),
                          favoured=None if self.favoured is None else self.favoured[rows],
                          distributions=None if self.distributions is None else self.distributions[rows])  # fmt: skip

    def bootstrap(self, n_boot: int, seed: int) -> np.ndarray:
        """(n_boot, n) resample counts (:func:`~regret_gateway.causal.stats.bootstrap_counts` over the prompts),
        drawn once per (n_boot, seed): every candidate of a comparison is valued on the same resamples."""
        key = (n_boot, seed)
        if key not in self._boot:
            self._boot[key] = bootstrap_counts(len(self.logged), n_boot, seed, self.groups)
        return self._boot[key]

    def shifts(self, n_boot: int, seed: int) -> Shifts | None:
        """How each of the ``n_boot`` resamples of :meth:`bootstrap` redraws the judge's error (None: no row's
        quality was corrected), the same for every candidate."""
        key = ("shifts", n_boot, seed)
        if self.target_errors is None:
            return None
        if key not in self._boot:
            self._boot[key] = self.target_errors.shifts(n_boot, seed)
        return self._boot[key]

    def outcomes(self, actions: np.ndarray, lam: float) -> tuple[LoggedOutcomes, LoggedOutcomes, LoggedOutcomes]:
        """(utility, quality, cost) per row for the policy that chose ``actions``."""
        actions = np.asarray(actions)
        p = np.asarray(self.propensity, dtype=np.float64)
        w = (actions == self.logged) / p
        rows = np.arange(len(actions))
        q_hat, c_hat = self.quality_hat[rows, actions], self.cost_hat[rows, actions]
        s, k, e, v = self.strata, self.worst, self.target_errors, self.inverse_propensities(actions)
        return (LoggedOutcomes(self.quality - lam * self.cost, q_hat - lam * c_hat, w, s, actions, k, e, v),
                LoggedOutcomes(self.quality, q_hat, w, s, actions, k, e, v), LoggedOutcomes(self.cost, c_hat, w, s, actions, k, None, v))  # fmt: skip

    def inverse_propensities(self, actions: np.ndarray) -> np.ndarray | None:
        """(n,) each row's logger's 1 / mu(actions_i | x_i) as its draw tells it (module doc): exact where the
        logged model is the action, the draw was uniform or the whole distribution was logged (the logger's worst
        case where that gave the action nothing), a lower bound where the logger favoured the action but drew
        another, else the logger's worst case. None without loggers."""
        if self.strata is None or self.worst is None:
            return None
        p = np.asarray(self.propensity, dtype=np.float64)
        actions = np.asarray(actions)
        favoured = np.full(len(p), FAVOURED_UNKNOWN) if self.favoured is None else self.favoured
        known = (actions == self.logged) | (favoured == FAVOURED_UNIFORM)
        drawn_elsewhere = (favoured == actions) & ~known
        worst = self.worst[self.strata]
        out = np.where(known, 1.0 / p, np.where(drawn_elsewhere, 1.0 / np.maximum(1.0 - p, 1e-12), worst))
        if self.distributions is not None:
            mu = self.distributions[np.arange(len(p)), actions]
            logged = ~known & ~np.isnan(mu)
            out[logged] = np.where(mu[logged] > 0, 1.0 / np.maximum(mu[logged], 1e-12), worst[logged])
        return out

    def value(self, actions: np.ndarray, lam: float, *, n_boot: int = 500, alpha: float = ALPHA, seed: int = 0) -> PolicyValue:
        """DR and SNIPS value (with bootstrap intervals), DR quality and cost, ESS, match rate."""
        utility, quality, cost = self.outcomes(actions, lam)
        boot = self.bootstrap(n_boot, seed)
        w = utility.w
        return PolicyValue(
            dr=DR.estimate(utility), dr_ci=DR.interval(utility, boot, alpha, self.shifts(n_boot, seed)),
            snips=SNIPS.estimate(utility) if w.sum() > 0 else float("nan"), snips_ci=SNIPS.interval(utility, boot, alpha),
            quality=DR.estimate(quality), cost=DR.estimate(cost), ess=effective_sample_size(w),
            match_rate=float(np.mean(np.asarray(actions) == self.logged)), n=len(actions),
        )  # fmt: skip

    def gain(
        self, actions: np.ndarray, reference: np.ndarray, lam: float, *, n_boot: int = 500, alpha: float = ALPHA, seed: int = 0
    ) -> tuple[float, tuple[float, float]]:
        """DR value of ``actions`` minus that of ``reference`` and its paired bootstrap interval (the same
        resampled rows for both policies, so the noise they share cancels)."""
        return self.gains({"a": actions}, reference, lam, n_boot=n_boot, alpha=alpha, seed=seed)["a"]

    def gains(
        self, policies: dict[str, np.ndarray], reference: np.ndarray, lam: float, *, n_boot: int = 500, alpha: float = ALPHA,
        seed: int = 0,
    ) -> dict[str, tuple[float, tuple[float, float]]]:  # fmt: skip
        """:meth:`gain` of each of ``policies`` (name -> actions) over ``reference``, the reference valued once."""
        boot, shifts = self.bootstrap(n_boot, seed), self.shifts(n_boot, seed)
        everything = np.ones((1, len(self.logged)))
        b = self.outcomes(reference, lam)[0]
        b_point, b_draws = float(b.dr(everything)[0]), b.dr(boot, shifts)
        out = {}
        for name, actions in policies.items():
            a = self.outcomes(actions, lam)[0]
            out[name] = float(a.dr(everything)[0]) - b_point, percentile_interval(a.dr(boot, shifts) - b_draws, alpha)
        return out
