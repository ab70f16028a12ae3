"""Validated containers for routing data.

Two kinds of data, named as in the paper:

* :class:`FullFeedback` -- every model answered every prompt (a benchmark such as RouterBench):
  ``X`` (n, d) embeddings, ``quality`` (n, T) in [0, 1], ``cost`` (n, T) in US dollars.
* :class:`LoggedFeedback` -- observational data, one model per prompt (what a gateway logs):
  ``X`` (n, d), ``action`` (n,) the index of the model that answered, its ``quality`` (n,) and
  ``cost`` (n,), and optionally the exact ``propensity`` (n,) p(action | x) of the logging policy.

Both are frozen and validated once, at construction; errors name the rule that was broken.
Utility is ``y = a - lambda * c`` (the paper's Y^lambda).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

# where a quality score came from (the store's feedback ``source``)
JUDGE_SOURCE = "judge"  # the source of the gateway's LLM judge scores (judge/sampled.py)
JUDGE_REPEAT_SOURCE = "judge-repeat"  # the judge's second score of an answer it judged twice: measures, never teaches
USER_SOURCE = "user"  # a client's own score (POST /regret/feedback)


def _as_float_array(name: str, value, ndim: int) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim != ndim:
        raise ValueError(f"`{name}` must be {ndim}-dimensional, got shape {arr.shape}")
    return arr


def _require_finite(name: str, arr: np.ndarray) -> None:
    bad = ~np.isfinite(arr)
    if bad.any():
        first = np.argwhere(bad)[0].tolist()
        raise ValueError(f"`{name}` must be finite, got {int(bad.sum())} NaN/inf values (first at {first})")


def _require_range(name: str, arr: np.ndarray, low: float, high: float | None = None) -> None:
    if arr.size == 0:
        return
    if arr.min() < low or (high is not None and arr.max() > high):
        upper = "inf)" if high is None else f"{high}]"
        raise ValueError(f"`{name}` must be in [{low}, {upper}, got min={arr.min():.6g}, max={arr.max():.6g}")


def _require_rows(name: str, arr: np.ndarray, n: int) -> None:
    if arr.shape[0] != n:
        raise ValueError(f"`{name}` has {arr.shape[0]} rows but `X` has {n}")


def _freeze(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr


def _model_names(value) -> tuple[str, ...]:
    names = tuple(str(m) for m in value)
    if len(set(names)) != len(names):
        raise ValueError(f"`model_names` must be unique, got {names}")
    if len(names) < 2:
        raise ValueError(f"routing needs at least 2 models, got {len(names)}")
    return names


def _require_outcomes(X: np.ndarray, quality: np.ndarray, cost: np.ndarray) -> None:
    """X, quality and cost finite; quality in [0, 1]; cost >= 0."""
    _require_finite("X", X)
    _require_finite("quality", quality)
    _require_finite("cost", cost)
    _require_range("quality", quality, 0.0, 1.0)
    _require_range("cost", cost, 0.0)


@dataclass(frozen=True)
class FullFeedback:
    """Every model's outcome on every prompt.

    Attributes:
        X: (n, d) prompt embeddings.
        quality: (n, T) quality a_x(t) in [0, 1].
        cost: (n, T) cost c_x(t) in US dollars, >= 0.
        model_names: T names, one per column.
        groups: optional (n,) task/dataset name per prompt (RouterBench's ``eval_name``).
    """

    X: np.ndarray
    quality: np.ndarray
    cost: np.ndarray
    model_names: tuple[str, ...]
    groups: np.ndarray | None = field(default=None)

    def __post_init__(self) -> None:
        X = _as_float_array("X", self.X, 2).astype(np.float32)
        quality = _as_float_array("quality", self.quality, 2)
        cost = _as_float_array("cost", self.cost, 2)
        names = _model_names(self.model_names)
        n = X.shape[0]
        for name, arr in (("quality", quality), ("cost", cost)):
            _require_rows(name, arr, n)
            if arr.shape[1] != len(names):
                raise ValueError(f"`{name}` has {arr.shape[1]} columns but there are {len(names)} model names")
        _require_outcomes(X, quality, cost)
        groups = None
        if self.groups is not None:
            groups = np.asarray(self.groups, dtype=object)
            _require_rows("groups", groups.reshape(-1, 1), n)
        object.__setattr__(self, "X", _freeze(X))
        object.__setattr__(self, "quality", _freeze(quality))
        object.__setattr__(self, "cost", _freeze(cost))
        object.__setattr__(self, "model_names", names)
        object.__setattr__(self, "groups", groups if groups is None else _freeze(groups))

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]

    @property
    def n_models(self) -> int:
        return len(self.model_names)

    def utility(self, lam: float) -> np.ndarray:
        """(n, T) utility matrix a - lambda * c."""
        return self.quality - lam * self.cost

    def subset(self, index: np.ndarray) -> "FullFeedback":
        return FullFeedback(
            X=self.X[index],
            quality=self.quality[index],
            cost=self.cost[index],
            model_names=self.model_names,
            groups=None if self.groups is None else self.groups[index],
        )


def corrected_score(score, false_pass, false_fail):
    """A judge score as an estimate of the truth, given the judge's false-pass and false-fail rates: unbiased
    for a pass/fail truth (``judge/calibration.py``). Works elementwise on arrays."""
    return (np.asarray(score, dtype=float) - false_pass) / (1.0 - false_pass - false_fail)


def flip_rate(disagree):
    """The flip rate e of a judge whose two verdicts on one answer disagree at rate ``disagree`` = 2e(1 - e),
    each flipped independently; 0.5 (it says nothing) at ``disagree`` >= 0.5. Elementwise."""
    return 0.5 * (1.0 - np.sqrt(np.maximum(0.0, 1.0 - 2.0 * np.asarray(disagree, dtype=float))))


@dataclass(frozen=True)
class TargetErrors:
    """How uncertain the rows' corrected quality targets are (``LoggedFeedback.target``): row i of correction
    ``group[i]`` = g >= 0 (-1: its target is its score as observed) took
    :func:`corrected_score` (``raw[i]``, ``false_pass[g]``, ``false_fail[g]``). A correction measured against
    users' scores rests on ``failed[g]`` pairs (its false-pass rate) and ``passed[g]`` (its false-fail rate);
    one from self-agreement (``repeats[g]`` > 0) on that many answers judged twice, disagreeing at
    ``disagree[g]``. :meth:`shifts` redraws each estimate as the data it rests on could have come out, so the
    gate's bootstrap carries the estimate's uncertainty into its intervals (``ope.LoggedData``).

    A users' estimate partially pooled over models (``judge/calibration.py``) is ``own_weight`` times the
    model's rate on its own pairs (``own_false_pass`` / ``own_false_fail``) plus the rest times the rate on
    every pair (``pooled``: false pass, false fail, user-failed and user-passed pairs); self-agreement's, of
    its own repeats and every model's (``pooled_repeats``: answers judged twice, their disagreement). A pooled
    rate is redrawn once per resample for every correction, so a judge equally wrong on every model moves
    every model's targets together, as its one error would."""

    group: np.ndarray  # (n,) int
    raw: np.ndarray  # (n,) the scores before correction
    false_pass: np.ndarray  # (G,) the rates used
    false_fail: np.ndarray
    failed: np.ndarray  # (G,) user-failed pairs (0 for self-agreement)
    passed: np.ndarray
    repeats: np.ndarray  # (G,) answers judged twice (0 for users' estimates)
    disagree: np.ndarray
    own_false_pass: np.ndarray | None = None  # (G,) the rates on the group's own pairs (None: the rates used)
    own_false_fail: np.ndarray | None = None
    own_weight: np.ndarray | None = None  # (G, 2) the weight of the own false pass, false fail (None: 1)
    pooled: tuple[float, float, int, int] | None = None  # false pass, false fail, failed, passed on every pair
    pooled_repeats: tuple[int, float] | None = None  # self-agreement on every model: repeats, disagreement

    MIN_SEPARATION = 0.1  # a redrawn 1 - false pass - false fail is held above this (the correction's divisor)

    def subset(self, index: np.ndarray) -> "TargetErrors":
        return replace(self, group=self.group[index], raw=self.raw[index])

    def shifts(self, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """(slope, intercept), each (n_boot, G): resample b moves the target of a row of correction g by
        ``slope[b, g] * raw + intercept[b, g]``: the correction redrawn (binomially, as for pass/fail scores)
        from the counts it was measured on, minus the correction used."""
        rng = np.random.default_rng([seed, 0x7A6E])
        G = len(self.false_pass)
        fp, ff = np.empty((n_boot, G)), np.empty((n_boot, G))

        def redrawn(rate: float, n: int) -> np.ndarray:
            # a line's rate may leave [0, 1] (a graded fit, or 0 computed as -2e-16): drawn at the nearest
            # rate a share can have, the estimate moved by the draw's deviation
            p = min(max(rate, 0.0), 1.0)
            return rng.binomial(n, p, n_boot) / n + (rate - p)

        own_fp = self.false_pass if self.own_false_pass is None else self.own_false_pass
        own_ff = self.false_fail if self.own_false_fail is None else self.own_false_fail
        weight = np.ones((G, 2)) if self.own_weight is None else self.own_weight
        if self.pooled is not None:
            pooled_fp, pooled_ff = redrawn(self.pooled[0], self.pooled[2]), redrawn(self.pooled[1], self.pooled[3])
        if self.pooled_repeats is not None:
            pooled_flip = flip_rate(rng.binomial(self.pooled_repeats[0], self.pooled_repeats[1], n_boot) / self.pooled_repeats[0])
        for g in range(G):
            w_fp, w_ff = weight[g]
            if self.repeats[g] > 0:  # self-agreement: one rate, both ways
                own = (
                    flip_rate(rng.binomial(int(self.repeats[g]), self.disagree[g], n_boot) / self.repeats[g]) if w_fp > 0 else 0.0
                )
                fp[:, g] = ff[:, g] = w_fp * own + ((1 - w_fp) * pooled_flip if self.pooled_repeats is not None else 0.0)
                continue
            fp[:, g] = w_fp * redrawn(float(own_fp[g]), int(self.failed[g])) if w_fp > 0 else 0.0
            ff[:, g] = w_ff * redrawn(float(own_ff[g]), int(self.passed[g])) if w_ff > 0 else 0.0
            if self.pooled is not None:
                fp[:, g] += (1 - w_fp) * pooled_fp
                ff[:, g] += (1 - w_ff) * pooled_ff
        slope = 1.0 / np.maximum(1.0 - fp - ff, self.MIN_SEPARATION)
        slope0 = 1.0 / (1.0 - self.false_pass - self.false_fail)
        return slope - slope0, -fp * slope + self.false_pass * slope0


# What a logger favoured at a prompt, where it is not one of the models (an index): it drew uniformly among
# the models eligible for the request (the cold start), or what it favoured is not known (imported rows,
# rows logged before the greedy choice was). The off-policy estimators weight each logger by it (causal/ope.py).
FAVOURED_UNIFORM = -2
FAVOURED_UNKNOWN = -1


@dataclass(frozen=True)
class LoggedFeedback:
    """Observational data: for each prompt only the model that answered is observed.

    Attributes:
        X: (n, d) prompt embeddings.
        action: (n,) index in ``model_names`` of the model that answered.
        quality: (n,) observed quality a in [0, 1].
        cost: (n,) observed cost c in US dollars, >= 0.
        model_names: T model names.
        propensity: optional (n,) exact p(action | x) of the logging policy, in (0, 1]; NaN where a row was
            imported without one (its logging policy is unknown: estimated, see :attr:`imported`).
        lam: optional (n,) lambda of the caller's tier when the request was routed.
        target: optional (n,) the quality the estimators take as each row's outcome where it is not
            ``quality``: an LLM judge's score corrected for its measured error (unbiased for the truth, so it
            may leave [0, 1]; ``judge/calibration.py``). The outcome models still fit ``quality``.
        target_errors: optional, how uncertain ``target`` is (:class:`TargetErrors`).
    """

    X: np.ndarray
    action: np.ndarray
    quality: np.ndarray
    cost: np.ndarray
    model_names: tuple[str, ...]
    propensity: np.ndarray | None = None
    lam: np.ndarray | None = None
    target: np.ndarray | None = None
    target_errors: TargetErrors | None = None

    def __post_init__(self) -> None:
        X = _as_float_array("X", self.X, 2).astype(np.float32)
        n = X.shape[0]
        names = _model_names(self.model_names)
        action_raw = np.asarray(self.action)
        if action_raw.ndim != 1:
            raise ValueError(f"`action` must be 1-dimensional, got shape {action_raw.shape}")
        if action_raw.size and not np.all(np.equal(np.mod(action_raw, 1), 0)):
            raise ValueError("`action` must hold integer model indices")
        action = action_raw.astype(np.int64)
        _require_rows("action", action, n)
        if action.size and (action.min() < 0 or action.max() >= len(names)):
            raise ValueError(
                f"`action` must be in [0, {len(names) - 1}] (one index per model), got min={action.min()}, max={action.max()}"
            )
        quality = _as_float_array("quality", self.quality, 1)
        cost = _as_float_array("cost", self.cost, 1)
        _require_rows("quality", quality, n)
        _require_rows("cost", cost, n)
        _require_outcomes(X, quality, cost)
        propensity = None
        if self.propensity is not None:
            propensity = _as_float_array("propensity", self.propensity, 1)
            _require_rows("propensity", propensity, n)
            known = propensity[~np.isnan(propensity)]
            _require_finite("propensity", known)
            if known.size and (known.min() <= 0.0 or known.max() > 1.0):
                raise ValueError(
                    f"`propensity` must be in (0, 1] (NaN: not logged), got min={known.min():.6g}, max={known.max():.6g}"
                )
            propensity = None if propensity.size and len(known) == 0 else _freeze(propensity)
        lam = None
        if self.lam is not None:
            lam = _as_float_array("lam", self.lam, 1)
            _require_rows("lam", lam, n)
            _require_finite("lam", lam)
            _require_range("lam", lam, 0.0)
            lam = _freeze(lam)
        target = None
        if self.target is not None:
            target = _as_float_array("target", self.target, 1)
            _require_rows("target", target, n)
            _require_finite("target", target)
            target = _freeze(target)
        if self.target_errors is not None and (target is None or len(self.target_errors.group) != n):
            raise ValueError("`target_errors` needs a `target` and one correction group per row")
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "X", _freeze(X))
        object.__setattr__(self, "action", _freeze(action))
        object.__setattr__(self, "quality", _freeze(quality))
        object.__setattr__(self, "cost", _freeze(cost))
        object.__setattr__(self, "model_names", names)
        object.__setattr__(self, "propensity", propensity)
        object.__setattr__(self, "lam", lam)

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]

    @property
    def quality_target(self) -> np.ndarray:
        """(n,) what the estimators take as each row's observed quality: ``target`` where set, else ``quality``."""
        return self.quality if self.target is None else self.target

    @property
    def imported(self) -> np.ndarray:
        """(n,) the rows whose logging propensity is unknown (imported without one): decided here, once."""
        if self.propensity is None:
            return np.ones(self.n_samples, dtype=bool)
        return np.isnan(self.propensity)

    @property
    def n_models(self) -> int:
        return len(self.model_names)

    def counts(self) -> np.ndarray:
        """(T,) number of logged rows per model."""
        return np.bincount(self.action, minlength=self.n_models)

    def require_all_models(self, minimum: int = 1) -> None:
        """Raise if some model has fewer than ``minimum`` logged rows (its outcome cannot be learned)."""
        counts = self.counts()
        missing = [f"'{self.model_names[t]}' ({int(c)})" for t, c in enumerate(counts) if c < minimum]
        if missing:
            raise ValueError(
                f"every model needs at least {minimum} logged rows; too few for: {', '.join(missing)}. "
                "Log more traffic to these models (raise exploration) or remove them from the model list."
            )

    def subset(self, index: np.ndarray) -> "LoggedFeedback":
        """The rows ``index`` (checked once, when these logs were built: a subset is not checked again)."""
        picked = object.__new__(type(self))
        for name in ("X", "action", "quality", "cost", "propensity", "lam", "target"):
            value = getattr(self, name)
            object.__setattr__(picked, name, None if value is None else _freeze(value[index]))
        object.__setattr__(picked, "model_names", self.model_names)
        object.__setattr__(picked, "target_errors", None if self.target_errors is None else self.target_errors.subset(index))
        return picked
