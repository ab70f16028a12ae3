"""What ``retrain`` fits (step 3): the production learner and cross-fitting, apart from the store and the
artifacts folder (:mod:`regret_gateway.retrain.pipeline` runs it on the gateway's logs; the offline bench's
``served`` row on simulated ones).

* The production learner (:func:`production_learner`, :func:`fit_router`): exact logged propensities
  (XGBoost where rows were imported without one), outcome MLPs, DR scores, RM-Interval over the tier
  lambdas; full-batch up to 5,000 rows, mini-batches beyond (:func:`_train_config`).
* Cross-fitting (:func:`out_of_fold_fits`): one fit per fold, each on the other folds; the held-out rows
  (:func:`held_out_rows`) each scored by the fit that did not see it. The fits run on an executor
  (:mod:`regret_gateway.retrain.executor`: here, or Ray tasks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from regret_gateway.causal.estimators import HeldOut
from regret_gateway.causal.ope import LoggedData
from regret_gateway.causal.stats import cross_fit_splits, prompt_groups
from regret_gateway.data import LoggedFeedback
from regret_gateway.retrain.executor import Executor, LocalExecutor

FOLDS = 5  # retrain's number of folds up to TWO_FOLDS_FROM rows (RetrainOptions.folds: default_folds)
TWO_FOLDS_FROM = 60_000  # past this many rows retrain cross-fits with two folds (default_folds)
FULL_BATCH_ROWS = 5_000  # a fit on more rows trains in mini-batches (:func:`_train_config`)


def _train_config(n: int, precision: str = "auto"):
    """Full-batch Adam at lr 1e-3 (the ``fast`` preset) with the paper's patience of 100 epochs up to 5,000
    rows, in float32; beyond, mini-batches of 1,024 for at most 40 epochs (patience 5): a fixed number of
    passes, so the time grows linearly with the rows, their matrix products in ``precision`` (``auto``:
    bfloat16 where the CPU multiplies it natively, :mod:`regret_gateway.nn.training`; ``retrain --precision``).

    Why patience 100 and not ``fast``'s 50: with a few hundred logged rows the validation share is a few
    dozen rows, and a network that has waited 50 full-batch steps without a better validation regret is
    stopped for good; on uniform logs of the generated world (360 and 720 rows, 5 seeds each) that cost
    the lambda=1000 tier 2-7 points in 3 of the 10 fits (1.4-1.5 on the mean over seeds), and patience 100
    gave them back (README)."""
    from regret_gateway.nn.training import TrainConfig

    if n <= FULL_BATCH_ROWS:
        return TrainConfig(patience=100)
    return TrainConfig(batch_size=1024, max_epochs=40, patience=5, precision=precision)


def default_folds(n_rows: int) -> int:
    """Retrain's number of folds for ``n_rows`` logged rows: five, and two past 60,000 rows. Five fits on
    4/5 of the rows cost four fits of every row; two fits on half of them cost one, and each still learns from
    more than 30,000 rows. On LLMRouter's and MMLU-Pro's dev slices at 81,000-85,000 logged rows, what retrain
    published from two folds was +0.20 and -0.34 points from what it published from five, less than its own
    seed moves it (docs/experiments/retrain-time.md). Every row is still evaluated out of fold, so the gate's
    intervals keep their width."""
    return FOLDS if n_rows <= TWO_FOLDS_FROM else 2


def _split(n: int, share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(rest, held): a seeded random ``share`` of the rows held out."""
    order = np.random.default_rng(seed).permutation(n)
    n_held = max(1, int(round(share * n)))
    return np.sort(order[n_held:]), np.sort(order[:n_held])


def production_learner(
    n_rows: int, tier_lams: list[float], *, imported: bool, seed: int = 0, outcome_train=None, outcome_options=None,
    precision: str = "auto",
):  # fmt: skip
    """The learner ``retrain`` publishes from: exact logged propensities (XGBoost where some rows were
    imported without one), outcome MLPs, DR scores, RM-Interval over the tier lambdas. Every network
    trains with :func:`_train_config`; ``outcome_train`` (a ``TrainConfig``) trains the outcome networks
    otherwise, and ``outcome_options`` (e.g. ``{"shared": True}``) are passed to the
    :class:`~regret_gateway.causal.outcome.OutcomeModel` (dev studies:
    experiments/train_config_dev.py)."""
    from regret_gateway.causal.estimators import DoublyRobust, Nuisance
    from regret_gateway.causal.outcome import OutcomeModel
    from regret_gateway.causal.propensity import LoggedPropensity, PropensityModel
    from regret_gateway.policy.learner import Learner
    from regret_gateway.policy.rm_interval import RMInterval

    config = _train_config(n_rows, precision)
    nuisance = Nuisance(
        propensity=PropensityModel() if imported else LoggedPropensity(),
        outcome=OutcomeModel(train=config if outcome_train is None else outcome_train, **(outcome_options or {})),
        estimator=DoublyRobust(),
        random_state=seed,
    )
    return Learner(nuisance=nuisance, policy=RMInterval(tiers=sorted(tier_lams), train=config, random_state=seed))


def fit_router(logged: LoggedFeedback, tier_lams: list[float], *, seed: int = 0, precision: str = "auto"):
    """Fit the production learner on ``logged`` (1/8 of it held out for early stopping; its mini-batch fits'
    products in ``precision``). Returns the fitted :class:`~regret_gateway.policy.learner.Learner`."""
    train_ix, val_ix = _split(logged.n_samples, 0.125, seed + 1)  # validation: early stopping only
    tr, va = logged.subset(train_ix), logged.subset(val_ix)
    learner = production_learner(tr.n_samples, tier_lams, imported=bool(logged.imported.any()), seed=seed, precision=precision)
    return learner.fit(tr, va, sorted(tier_lams))


@dataclass(frozen=True)
class OutOfFoldFits:
    """The fits of cross-fitting: ``learners[k]`` was fitted on every row of ``logged`` but ``folds[k]``;
    ``groups`` (n,) is each row's prompt (:func:`~regret_gateway.causal.stats.prompt_groups`), which the folds
    keep together."""

    logged: LoggedFeedback
    folds: list[np.ndarray]
    learners: list
    groups: np.ndarray

    @property
    def order(self) -> np.ndarray:
        """(n,) the rows in fold order: how the out-of-fold arrays of :func:`~regret_gateway.retrain.gate.evaluate` are laid out."""
        return np.concatenate(self.folds)


def out_of_fold_fits(
    logged: LoggedFeedback, tier_lams: list[float], *, folds: int | None = None, every: bool = True, seed: int = 0,
    on_fit: Callable[[int, int, int], None] | None = None, precision: str = "auto", executor: Executor | None = None,
) -> OutOfFoldFits:  # fmt: skip
    """One :func:`fit_router` per fold (at ``precision``), each on the other folds (``every=False``: the first fold only;
    ``folds=None``: :func:`default_folds` of the rows; ``on_fit(k, of, rows)`` is called as fit k starts). A
    prompt logged several times lies in one fold (:func:`~regret_gateway.causal.stats.cross_fit_splits`). The fits run
    on ``executor`` (retrain/executor.py; default: here, one after another -- on 2 cores, torch's two threads
    already keep both busy: fitting the folds in two one-thread processes measured 1.02-1.04 times as fast,
    docs/experiments/retrain-time.md)."""
    groups = prompt_groups(logged.X)
    folds = default_folds(logged.n_samples) if folds is None else folds
    splits = cross_fit_splits(logged.n_samples, folds, seed, groups)[: None if every else 1]
    parts, rests = [held for held, _ in splits], [rest for _, rest in splits]

    def started(k: int) -> None:  # (this fit, of how many, on how many rows): retrain's progress lines
        if on_fit is not None:
            on_fit(k + 1, len(parts), len(rests[k]))

    calls = [(logged.subset(rest), tier_lams, seed, precision) for rest in rests]
    learners = (executor or LocalExecutor()).map(_fit, calls, on_start=started)
    return OutOfFoldFits(logged, parts, learners, groups)


def _fit(logged: LoggedFeedback, tier_lams: list[float], seed: int, precision: str):
    """:func:`fit_router` with positional arguments: one executor call."""
    return fit_router(logged, tier_lams, seed=seed, precision=precision)


@dataclass(frozen=True)
class HeldOutRows:
    """The held-out rows of :func:`out_of_fold_fits` (in ``fits.order``): each fold scored by the fit that did
    not see it (``held``), the rows themselves (``logs``) and their off-policy evaluation data (``data``:
    logged, or for imported rows estimated, propensities, each fold's outcome predictions by its own fit,
    each row's logger and prompt, 0..G-1 over the held-out rows)."""

    held: list[HeldOut]
    logs: LoggedFeedback
    data: LoggedData


def held_out_rows(fits: OutOfFoldFits, loggers: np.ndarray | None, favoured: np.ndarray | None = None,
                  distributions: np.ndarray | None = None) -> HeldOutRows:  # fmt: skip
    """The held-out rows of ``fits`` with ``loggers`` (n,) naming each row's logging policy (or None),
    ``favoured`` (n,) what it favoured at each row's prompt and ``distributions`` (n, T) its logged distribution
    there (NaN: not logged): the loggers' weights read them (causal/ope.py)."""
    held = [learner.nuisance_.held_out(fits.logged.subset(f)) for learner, f in zip(fits.learners, fits.folds)]
    order = fits.order
    hold = fits.logged.subset(order)
    q_hat, c_hat = np.concatenate([h.quality_hat for h in held]), np.concatenate([h.cost_hat for h in held])
    p_hold = np.concatenate([h.propensity for h in held])  # logged, or estimated for imported rows (floored there)
    strata = None if loggers is None else np.asarray(loggers)[order]
    groups = np.unique(fits.groups[order], return_inverse=True)[1].reshape(-1)
    data = LoggedData(hold.action, hold.quality_target, hold.cost, p_hold, q_hat, c_hat, strata=strata, groups=groups,
                      target_errors=hold.target_errors, favoured=None if favoured is None else np.asarray(favoured)[order],
                      distributions=None if distributions is None else np.asarray(distributions)[order])  # fmt: skip
    return HeldOutRows(held, hold, data)
