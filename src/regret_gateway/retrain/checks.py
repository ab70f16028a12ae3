"""Whether the logs can support a router (refused in words otherwise), and what the report says of the judge."""

from __future__ import annotations

import numpy as np

from regret_gateway.causal.stats import effective_sample_size
from regret_gateway.data import LoggedFeedback
from regret_gateway.retrain.options import RetrainOptions, RetrainRefused


def check_data(logged: LoggedFeedback | None, skipped: dict, opts: RetrainOptions, *, first: bool = False,
               loggers: np.ndarray | None = None, favoured: np.ndarray | None = None,
               distributions: np.ndarray | None = None) -> dict:  # fmt: skip
    """Diagnostics of the training logs; raises :class:`RetrainRefused` when they cannot support a router.
    A model's effective sample size is that of the weights its value rests on: with each row's logger
    (``loggers``, and what it ``favoured`` at each row: :class:`~regret_gateway.trainset.window.TrainingSet`)
    the pooled weights the gate reads (:func:`~regret_gateway.causal.pooling.pooled_weights`), where a row a
    router drew at a tiny propensity counts as much as its logger knew of the model -- not 1 / p, which let
    one such row refuse a retrain its cold start's uniform draws could support; without loggers, 1 / p.
    ``first``: no router is active yet, so every model also needs ``opts.cold_start_rows`` scored rows: the
    constant each tier starts from is chosen on the cold start's rows and stays until another is proven better
    (:func:`regret_gateway.retrain.gate.evaluate`), so a longer cold start chooses it better
    (docs/experiments/closed-loop.md). A judge's score counts as one row like a user's: counted at its worth in
    true scores, a noisy judge's cold start lasted 1 / (1 - false pass - false fail)^2 times as long, and the
    teams paid for the uniform rounds more than the better first choice gave back (docs/experiments/judge.md)."""
    left_out = ", ".join(f"{k}={v}" for k, v in skipped.items() if v) or "none"
    if logged is None or logged.n_samples == 0:
        untrusted = skipped.get("untrusted", 0)
        raise RetrainRefused(
            f"no usable rows (left out: {left_out}); rows need an outcome and a quality score "
            "(POST /regret/feedback or `regret-gateway feedback import`)"
            + (f"; {untrusted} were scored only by teams the trust check left out (`status` says which and why; "
               "`trust:` in the config)" if untrusted else "")
        )  # fmt: skip
    if logged.n_samples < opts.min_rows:
        raise RetrainRefused(f"only {logged.n_samples} usable rows, at least {opts.min_rows} needed (left out: {left_out})")
    counts = logged.counts()
    need = opts.min_rows_per_model
    few = [f"{m} ({int(c)})" for m, c in zip(logged.model_names, counts) if c < need]
    if few:
        raise RetrainRefused(f"too few logged rows for {', '.join(few)}; every model needs {need}. "
                             "Raise exploration (tier epsilon) or remove the model from `models`.")  # fmt: skip
    if first and opts.cold_start_rows > need:
        need = opts.cold_start_rows
        few = [f"{m} ({int(c)})" for m, c in zip(logged.model_names, counts) if c < need]
        if few:
            raise RetrainRefused(
                f"too few logged rows for {', '.join(few)}; before the first router every model needs {need} "
                "(cold_start_rows): the constant each tier starts from is chosen on them and kept until another is "
                "proven better. Let the cold start log more and retrain later."
            )
    info = {
        "rows": int(logged.n_samples),
        "rows_per_model": {m: int(c) for m, c in zip(logged.model_names, counts)},
        "left_out": dict(skipped),
    }
    imported = logged.imported
    if imported.all():  # every row imported: propensities are estimated (XGBoost), overlap unknown here
        return {**info, "propensity": "estimated (XGBoost): the rows were imported without a logged propensity"}
    if imported.any():  # the logged rows' overlap is checked below; the imported rows' is estimated
        info["propensity_imported_rows"] = int(imported.sum())
        kept = np.flatnonzero(~imported)
        logged = logged.subset(kept)
        loggers = None if loggers is None else np.asarray(loggers)[kept]
        favoured = None if favoured is None else np.asarray(favoured)[kept]
        distributions = None if distributions is None else np.asarray(distributions)[kept]
    p = logged.propensity
    assert p is not None
    if np.all(p >= 1.0 - 1e-12):
        raise RetrainRefused(
            "every logged propensity is 1: the logging was not randomised, so the outcome of any "
            "other model cannot be estimated without bias. Set epsilon > 0 on the tiers (a tier at epsilon 0 "
            "serves one model, its fallback under `cold_start: fallback`) and log more."
        )
    weights = _weights(logged, loggers, favoured, distributions)
    ess = {m: effective_sample_size(weights[logged.action == t, t]) for t, m in enumerate(logged.model_names)}
    low = [f"{m} ({v:.1f})" for m, v in ess.items() if v < opts.min_ess_per_model]
    if low:
        raise RetrainRefused(
            f"effective sample size too small for {', '.join(low)} (need {opts.min_ess_per_model}): "
            "a few rows with tiny propensities dominate"
        )
    how = "logged" if not imported.any() else f"logged; estimated (XGBoost) for the {int(imported.sum())} imported rows"
    return {**info, "propensity": how, "min_propensity": float(p.min()), "ess_per_model": ess}


def _weights(logged: LoggedFeedback, loggers: np.ndarray | None, favoured: np.ndarray | None,
             distributions: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """(n, T) each row's weight in each model's value (:func:`check_data`)."""
    from regret_gateway.causal.ope import LoggedData
    from regret_gateway.causal.pooling import pooled_weights

    n, T = logged.n_samples, len(logged.model_names)
    if loggers is None or favoured is None or len(loggers) != n or len(favoured) != n:
        favoured = distributions = None  # what the loggers favoured is not known: each logger's worst case stands for it
    if distributions is not None and np.shape(distributions) != (n, T):
        distributions = None
    zeros = np.zeros((n, T))
    data = LoggedData(logged.action, logged.quality, logged.cost, np.asarray(logged.propensity), zeros, zeros,
                      strata=loggers, favoured=favoured, distributions=distributions)  # fmt: skip
    return pooled_weights(data)


def judge_calibration(ts) -> dict | None:
    """What the report says of the judge's scores among the rows (None: no row learns from one): its error
    measured against the users' scores and against itself per model, and how many rows each estimate
    corrected (keys: the users' estimate of a model or "*", "self-agreement <model>")."""
    from regret_gateway.store.queries import JUDGE_SOURCE

    judged = ts.rows_by_source().get(JUDGE_SOURCE, 0)
    if not judged:
        return None
    errors = {m: e.describe() for m, e in ts.judge_errors.items()}
    agreement = {m: a.describe() for m, a in ts.judge_self_agreement.items()}
    if not ts.judge_corrected:
        measured = [*ts.judge_errors.values(), *ts.judge_self_agreement.values()]
        why = (
            "no request scored by both a user and the judge, and none judged twice"
            if not measured
            else "--no-judge-calibration"
            if any(e.usable for e in measured)
            else "too few user-scored or twice-judged requests to estimate its error"
        )
        return {"rows": judged, "calibrated": False, "why": f"uncalibrated ({why}): its scores are used as they are",
                "errors": errors, "self_agreement": agreement}  # fmt: skip
    return {"rows": judged, "calibrated": True, "corrected_rows": ts.judge_corrected, "errors": errors,
            "self_agreement": agreement}  # fmt: skip
