"""The paper's offline experiment: simulate logs from full feedback, learn routers, score them on test.

Per trial (seed = seed + trial): the test split is fixed; validation is the benchmark's ``val`` split, or
a seeded 1/9 of the train pool. Logs are simulated on train + val, the nuisance stage fitted on the train
logs, every router trained and evaluated on the test prompts with the true outcomes: utility = mean_i
a_i(t_i) - lambda * c_i(t_i) (x100), accuracy and cost. ``evaluate_on="dev"`` scores on a seeded slice of
the train prompts (the size of val) held out of everything instead, to choose settings without test.

Reference rows: ``single-best`` (the best mean train utility at that lambda, with full feedback: slightly
optimistic), ``oracle`` (per-query best on test) and, where a method learns from the logs,
``logged-constant`` (the best mean DR utility on the logs: the fixed choice the logs can make).
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from regret_gateway.causal.estimators import ESTIMATORS, Nuisance
from regret_gateway.causal.outcome import OutcomeModel
from regret_gateway.causal.propensity import LoggedPropensity, PropensityModel
from regret_gateway.context import ContextCode, SizeFeature
from regret_gateway.data import FullFeedback, LoggedFeedback
from regret_gateway.evaluation.loaders import Benchmark
from regret_gateway.evaluation.simulation import simulate_logs
from regret_gateway.nn.training import OUTCOME_PRESET, preset
from regret_gateway.policy.learner import fit_training_data
from regret_gateway.policy.registry import method_names, router_class
from regret_gateway.policy.router import Router, TrainingData
from regret_gateway.sampling import MAX_ROWS, sample_rows
from regret_gateway.servable import LEARNED, Candidate, CandidateKind

REFERENCES = ("single-best", "oracle")
LOGGED_CONSTANT = "logged-constant"  # the best constant model by the training logs' mean DR scores (what the logs can pick)
SERVED = "served"  # what retrain publishes from the trial's logs (train + val), by its own code: served_actions
DEFAULT_LAMBDAS = tuple(float(l) for l in range(0, 1001, 100))


@dataclass(frozen=True)
class OfflineConfig:
    lambdas: tuple[float, ...] = DEFAULT_LAMBDAS
    trials: int = 10
    methods: tuple[str, ...] = field(default_factory=lambda: tuple(method_names()))
    seed: int = 0
    logging_policy: str = "accuracy-softmax"
    logging_temperature: float = 1.0
    propensity: str = "xgboost"  # "xgboost" (paper) or "logged" (exact)
    estimator: str = "dr"
    clip: tuple[float, float] | None = (5.0, 95.0)
    clip_scope: str = "column"
    max_weight: float | None = None
    self_normalize: bool = False
    correction: float = 1.0
    nuisance_folds: int = 1
    train_preset: str = "fast"  # policy networks
    outcome_preset: str = OUTCOME_PRESET  # outcome models of the nuisance stage ("paper")
    tau: float = 1.0  # chosen on validation (README); the paper's value is 100
    ties: str = "share"
    evaluate_on: str = "test"  # or "dev" (module doc), or "val" (which also early-stops the routers)
    served_cross_fit: bool = True  # the served row's retrain: cross-fitted (its default) or one fit
    served_max_rows: int | None = MAX_ROWS  # the served row's logs sampled to this many rows, as retrain's window (None: all)
    log_draws: int = 1  # each training prompt logged this many times, independent draws (the learning curve)
    size_feature: bool = False  # the embeddings carry the prompt's size last (SizeFeature): served offers the priced router
    context: str | None = None  # the embeddings carry this key's ContextCode (before the size): served's regions are its keys

    def __post_init__(self) -> None:
        unknown = [m for m in self.methods if m not in (*method_names(), SERVED)]
        if unknown:
            raise ValueError(f"unknown methods {unknown}; choose from {', '.join(method_names())}, {SERVED}")
        if self.trials < 1:
            raise ValueError(f"`trials` must be >= 1, got {self.trials}")
        if self.log_draws < 1:
            raise ValueError(f"`log_draws` must be >= 1, got {self.log_draws}")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"unknown estimator '{self.estimator}'; choose from {sorted(ESTIMATORS)}")
        preset(self.train_preset)
        preset(self.outcome_preset)
        if self.evaluate_on not in ("test", "val", "dev"):
            raise ValueError(f"`evaluate_on` must be 'test', 'val' or 'dev', got {self.evaluate_on!r}")
        if "rm-interval" in self.methods and len(self.lambdas) < 3:
            raise ValueError("rm-interval needs at least 3 lambdas (tiers on the even ones, evaluated between)")

    def estimator_object(self):
        kwargs = {"clip": self.clip, "clip_scope": self.clip_scope, "max_weight": self.max_weight,
                  "self_normalize": self.self_normalize}  # fmt: skip
        if self.estimator == "dr":
            kwargs["correction"] = self.correction
        return ESTIMATORS[self.estimator](**kwargs)

    def nuisance(self, seed: int) -> Nuisance:
        """The nuisance stage this configuration describes."""
        if self.propensity not in ("logged", "xgboost"):
            raise ValueError(f"`propensity` must be 'logged' or 'xgboost', got {self.propensity!r}")
        return Nuisance(
            propensity=LoggedPropensity() if self.propensity == "logged" else PropensityModel(),
            outcome=OutcomeModel(train=preset(self.outcome_preset)),
            estimator=self.estimator_object(),
            nuisance_folds=self.nuisance_folds,
            random_state=seed,
        )

    def router(self, name: str, seed: int) -> Router:
        """Router ``name`` with the policy preset and the options of this configuration it takes (tau, ties)."""
        cls = router_class(name)
        accepted = inspect.signature(cls.__init__).parameters
        options: dict[str, Any] = {k: v for k, v in (("tau", self.tau), ("ties", self.ties)) if k in accepted}
        return cls(train=preset(self.train_preset), random_state=seed, **options)


@dataclass
class MethodTrials:
    """Per-trial test results of one method: (trials, L) utility x100, accuracy, cost; (trials,) seconds."""

    utility: list[list[float]] = field(default_factory=list)
    accuracy: list[list[float]] = field(default_factory=list)
    cost: list[list[float]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def add(self, scores: dict[str, np.ndarray], seconds: float) -> None:
        for key in ("utility", "accuracy", "cost"):
            getattr(self, key).append(np.asarray(scores[key]).tolist())
        self.seconds.append(seconds)


@dataclass
class OfflineRun:
    """Everything an offline run measured; :func:`regret_gateway.evaluation.report.summarize` turns it into tables."""

    dataset: dict
    config: OfflineConfig
    lambdas: list[float]
    methods: dict[str, MethodTrials]
    diagnostics: list[dict[str, float]]


def _split(bench: Benchmark, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    test = np.flatnonzero(bench.split == "test")
    if test.size == 0:
        raise ValueError("the benchmark has no test rows")
    val = np.flatnonzero(bench.split == "val")
    train = np.flatnonzero(bench.split == "train")
    if val.size == 0:
        pool = rng.permutation(train)
        n_val = max(1, int(round(len(pool) / 9)))
        val, train = np.sort(pool[:n_val]), np.sort(pool[n_val:])
    if train.size == 0:
        raise ValueError("the benchmark has no train rows")
    return train, val, test


@dataclass(frozen=True)
class Trial:
    """One trial's prompts and logs. ``test`` holds the evaluated prompts: the benchmark's test split, or
    with ``evaluate_on="dev"`` a seeded slice of train the size of val (then out of ``train`` and the logs).
    The logs are simulated on ``pool`` = train + val, in that order, each prompt ``draws`` times (its rows
    next to each other); the test prompts are never logged."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    logs: LoggedFeedback
    full_train: FullFeedback
    full_val: FullFeedback
    full_test: FullFeedback  # ``full_val`` when evaluate_on="val"
    draws: int = 1

    @property
    def pool(self) -> np.ndarray:
        return np.concatenate([self.train, self.val])

    @property
    def logs_train(self) -> LoggedFeedback:
        return self.logs.subset(np.arange(len(self.train) * self.draws))

    @property
    def logs_val(self) -> LoggedFeedback:
        return self.logs.subset(np.arange(len(self.train) * self.draws, len(self.pool) * self.draws))


def make_trial(
    bench: Benchmark, full: FullFeedback, config: OfflineConfig, seed: int, rng: np.random.Generator | None = None,
    eligible: np.ndarray | None = None,
) -> Trial:  # fmt: skip
    """The split and simulated logs of the trial with this seed (see the module doc). The split draws from
    ``rng`` (default: a new generator seeded with ``seed``); a caller that draws more after it passes its own.
    ``eligible`` (n, T): the models that can take each prompt; the logging policy draws among them."""
    rng = np.random.default_rng(seed) if rng is None else rng
    train, val, test = _split(bench, rng)
    if config.evaluate_on == "dev":  # a slice of train the size of val, held out from logs, training and selection
        order = rng.permutation(train)
        test, train = np.sort(order[: len(val)]), np.sort(order[len(val) :])
    pool = np.concatenate([train, val])
    logs = simulate_logs(
        full.subset(pool),
        policy=config.logging_policy,
        temperature=config.logging_temperature,
        seed=seed,
        draws=config.log_draws,
        eligible=None if eligible is None else eligible[pool],
    )
    full_val = full.subset(val)
    full_test = full_val if config.evaluate_on == "val" else full.subset(test)
    return Trial(train, val, test, logs, full.subset(train), full_val, full_test, config.log_draws)


def evaluate_actions(full: FullFeedback, lambdas, actions: np.ndarray) -> dict[str, np.ndarray]:
    """Mean utility (x100), accuracy and cost of (L, n) chosen model indices, per lambda."""
    rows = np.arange(full.n_samples)
    acc = np.array([full.quality[rows, a].mean() for a in actions])
    cost = np.array([full.cost[rows, a].mean() for a in actions])
    util = np.array([100.0 * (full.quality[rows, a] - l * full.cost[rows, a]).mean() for l, a in zip(lambdas, actions)])
    return {"utility": util, "accuracy": acc, "cost": cost}


def reference_actions(
    name: str, train: FullFeedback, test: FullFeedback, lambdas, eligible: np.ndarray | None = None
) -> np.ndarray:
    """(L, n_test) the reference's choices; with ``eligible`` (n_test, T), among the models that can take each
    prompt (the single best: the best by train utility of those that can)."""
    if name == "single-best":
        return restrict(np.stack([np.full(test.n_samples, np.argmax(train.utility(l).mean(0))) for l in lambdas]), eligible,
                        fallback_order(train, lambdas))  # fmt: skip
    if name == "oracle":
        ok = True if eligible is None else eligible
        return np.stack([np.argmax(np.where(ok, test.utility(l), -np.inf), axis=1) for l in lambdas])
    raise ValueError(f"unknown reference '{name}'")


def fallback_order(train: FullFeedback, lambdas) -> np.ndarray:
    """(L, T) the models by mean train utility at each lambda, best first: where a choice cannot take a prompt,
    the first of these that can takes it (as the gateway's tier fallback gives way to a model that can)."""
    return np.stack([np.argsort(-train.utility(l).mean(0), kind="stable") for l in lambdas])


def restrict(actions: np.ndarray, eligible: np.ndarray | None, order: np.ndarray) -> np.ndarray:
    """(L, n) ``actions`` with every choice a prompt's model cannot take (``eligible``: (n, T)) replaced by the
    first model of ``order`` (L, T) that can."""
    if eligible is None:
        return actions
    out = actions.copy()
    for k in range(len(actions)):
        bad = ~eligible[np.arange(actions.shape[1]), actions[k]]
        if bad.any():
            ranked = eligible[np.ix_(np.flatnonzero(bad), order[k])]  # (bad, T) in the order's columns
            out[k, bad] = order[k][ranked.argmax(axis=1)]
    return out


def ineligible_share(actions: np.ndarray, eligible: np.ndarray | None) -> float:
    """The share of (lambda, prompt) choices a prompt's model could not take."""
    if eligible is None:
        return 0.0
    return float(np.mean(~eligible[np.arange(actions.shape[1])[None, :], actions]))


def served_actions(
    logs: LoggedFeedback, test_X: np.ndarray, lambdas: np.ndarray, *, cross_fitted: bool = True, seed: int = 0,
    size: SizeFeature | None = None, folds: int | None = None, precision: str = "auto", code: ContextCode | None = None,
    max_rows: int | None = MAX_ROWS) -> tuple[np.ndarray, list[Candidate]]:  # fmt: skip
    """(L, n_test) choices of what ``retrain`` publishes from ``logs`` with one tier per lambda, by its own
    code and defaults (:func:`regret_gateway.retrain.fits.out_of_fold_fits` and :func:`~regret_gateway.retrain.gate.evaluate`:
    the production learner fitted once per fold -- five, or two past 60,000 rows, unless ``folds`` says --, every candidate -- RM-Interval, R&C, RM-Cluster
    and the best constant model -- valued on every logged row out of fold, the gate of
    :func:`regret_gateway.causal.selection.select`), and the :class:`~regret_gateway.servable.Candidate` each tier serves (a
    safe default -- ``constant``, or ``regions``: that constant except in the regions the logs prove -- or a
    learned router). No tier serves anything yet, so each gate's incumbent is the best constant.
    ``cross_fitted=False``: one fit, as ``retrain --no-cross-fit``. ``size``: the size feature the rows carry
    last (``embedder.size_feature``); ``code``: the context code they carry (``embedder.context``);
    ``precision``: the mini-batch fits' products, as ``retrain --precision``; ``max_rows``: logs past it are
    sampled as retrain's window samples them (by model; None: all rows)."""
    from regret_gateway.config import TierSpec
    from regret_gateway.retrain.fits import out_of_fold_fits
    from regret_gateway.retrain.gate import evaluate

    lams, names = [float(lam) for lam in lambdas], [f"lambda={lam:g}" for lam in lambdas]
    if max_rows is not None:
        logs = logs.subset(sample_rows([str(i) for i in range(logs.n_samples)], [(a,) for a in logs.action.tolist()], max_rows))
    fits = out_of_fold_fits(logs, lams, folds=folds, every=cross_fitted, seed=seed, precision=precision)
    _, router = evaluate(fits, [(n, TierSpec(lam=lam)) for n, lam in zip(names, lams)], seed=seed, size=size, code=code)
    return np.stack([router.choose(name, test_X) for name in names]), [router.tiers[name].candidate for name in names]


def _diagnostics(nuisance: Nuisance, scores, logs, full_train: FullFeedback) -> dict[str, float]:
    q_hat, _ = nuisance.outcome_.predict(logs.X)
    rows = np.arange(logs.n_samples)
    truth = full_train.quality[rows // (logs.n_samples // full_train.n_samples)]  # row j is prompt j // draws
    p_hat = nuisance.observed_propensity_
    lam_mid = 500.0
    Y_raw = scores.quality - lam_mid * scores.cost
    clipped = float(np.mean(scores.utility(lam_mid) != Y_raw))
    observed = np.zeros(scores.quality.shape, dtype=bool)
    observed[rows, logs.action] = True
    return {
        "dr_rmse_quality": float(np.sqrt(np.mean((scores.quality - truth) ** 2))),
        "dm_rmse_quality": float(np.sqrt(np.mean((q_hat - truth) ** 2))),
        "propensity_mae": float(np.mean(np.abs(p_hat - logs.propensity))),
        "logged_propensity_min": float(logs.propensity.min()),
        "logged_propensity_max": float(logs.propensity.max()),
        "clipped_share_lambda500": clipped,
        "clipped_share_observed_lambda500": float(np.mean((scores.utility(lam_mid) != Y_raw)[observed])),
    }


def run_offline(bench: Benchmark, X: np.ndarray, config: OfflineConfig, *, progress: bool = True,
                eligible: np.ndarray | None = None) -> OfflineRun:  # fmt: skip
    """Run every method for every trial; returns the per-trial results (see :mod:`.report`). ``eligible`` (n, T):
    the models that can take each prompt (chat traffic's windows and tools): the logs are drawn among them, and
    a choice a prompt's model cannot take goes to the first of :func:`fallback_order` that can (``ineligible_*``)."""
    lambdas = np.asarray(config.lambdas, dtype=np.float64)
    full = bench.full_feedback(X)
    routers = [m for m in config.methods if m != SERVED]  # ``served`` alone: retrain's choice, no bench nuisance stage
    candidates = SERVED in config.methods or any(m in LEARNED for m in routers)  # running a learned candidate runs served
    logged = not all(router_class(name).full_information for name in routers)
    names = routers + ([SERVED] if candidates else []) + list(REFERENCES) + ([LOGGED_CONSTANT] if logged else [])
    raw = {m: MethodTrials() for m in names}
    diagnostics, models_on_test, steps = [], [], None  # models_on_test: each model alone on the evaluated prompts
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(total=config.trials * (len(routers) + 1 + bool(candidates)), desc="offline bench", unit="step")
    for trial in range(config.trials):
        seed = config.seed + trial
        split = make_trial(bench, full, config, seed, eligible=eligible)
        ok = None if eligible is None else eligible[split.test]
        order = fallback_order(split.full_train, lambdas)
        logs_train, logs_val = split.logs_train, split.logs_val
        full_train, full_val, full_test = split.full_train, split.full_val, split.full_test

        t0 = time.perf_counter()
        oracle = TrainingData.from_full(full_train, full_val)
        data, diag = oracle, {}
        if logged:  # the logs are needed
            nuisance = config.nuisance(seed)
            data = fit_training_data(nuisance, logs_train, logs_val)
            diag = _diagnostics(nuisance, data.scores, logs_train, full_train)
            diag["nuisance_seconds"] = time.perf_counter() - t0
        diagnostics.append(diag)
        if steps is not None:
            steps.update(1)
        for name in routers:
            t0 = time.perf_counter()
            router = config.router(name, seed)
            router.fit(oracle if router.full_information else data, lambdas)
            actions = router.predict(full_test.X, lambdas)
            if ok is not None:
                diag[f"ineligible_{name}"] = ineligible_share(actions, ok)
                actions = restrict(actions, ok, order)
            seconds = time.perf_counter() - t0
            raw[name].add(evaluate_actions(full_test, lambdas, actions), seconds)
            if steps is not None:
                steps.set_postfix_str(f"trial {trial + 1}: {name} {seconds:.1f}s")
                steps.update(1)
        references = {name: reference_actions(name, full_train, full_test, lambdas, ok) for name in REFERENCES}
        if data is not oracle:
            pooled = data.scores.concat(data.val_scores)
            constant = np.stack([np.full(full_test.n_samples, pooled.best_constant(l)) for l in lambdas])
            references[LOGGED_CONSTANT] = restrict(constant, ok, order)
        if candidates:
            _served_trial(split, config, lambdas, seed, ok, order, raw[SERVED], diag, data.model_names,
                          references["single-best"][:, 0], steps, trial)  # fmt: skip
        for name, actions in references.items():
            raw[name].add(evaluate_actions(full_test, lambdas, actions), 0.0)
        models_on_test.append((full_test.quality.mean(0), full_test.cost.mean(0)))
    if steps is not None:
        steps.close()
    q_test, c_test = (dict(zip(bench.model_names, v.tolist())) for v in np.mean(models_on_test, axis=0))
    dataset = bench.describe() | {
        "n_train": len(split.train), "n_val": len(split.val), "n_test": len(split.test), "log_draws": config.log_draws,
        "logged_rows": split.logs.n_samples, "test_accuracy": q_test, "test_cost": c_test}  # fmt: skip
    return OfflineRun(dataset=dataset, config=config, lambdas=lambdas.tolist(), methods=raw, diagnostics=diagnostics)


def _served_trial(split, config: OfflineConfig, lambdas: np.ndarray, seed: int, ok, order, trials: MethodTrials,
                  diag: dict, names, single: np.ndarray, steps, trial: int) -> None:  # fmt: skip
    """One trial's ``served`` row: what retrain publishes from the trial's logs, evaluated on the test prompts,
    and why it differs from the single best model (a learned router won the gate, or the logs' fixed choice is
    another model than the one full feedback picks: ``served_*`` in ``diag``)."""
    t0 = time.perf_counter()
    actions, served = served_actions(split.logs, split.full_test.X, lambdas, cross_fitted=config.served_cross_fit, seed=seed,
                                     max_rows=config.served_max_rows, size=SizeFeature() if config.size_feature else None,
                                     code=None if config.context is None else ContextCode(config.context))  # fmt: skip
    if ok is not None:
        diag[f"ineligible_{SERVED}"] = ineligible_share(actions, ok)
        actions = restrict(actions, ok, order)
    seconds = time.perf_counter() - t0
    trials.add(evaluate_actions(split.full_test, lambdas, actions), seconds)
    if steps is not None:
        steps.set_postfix_str(
            f"trial {trial + 1}: {SERVED} (retrain, {'cross-fitted' if config.served_cross_fit else 'one fit'}) {seconds:.1f}s"
        )
        steps.update(1)
    diag["served_learned_share"] = float(np.mean([not c.safe for c in served]))
    diag["served_regions_share"] = float(np.mean([c.kind == CandidateKind.REGIONS for c in served]))
    diag["served_constant_is_single_best_share"] = float(
        np.mean([names[single[k]] == c.model for k, c in enumerate(served) if c.safe] or [np.nan]))  # fmt: skip
