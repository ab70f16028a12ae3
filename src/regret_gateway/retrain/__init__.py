"""``regret-gateway retrain``: from the gateway's logs to a new, checked router, published without a restart.

1. Read decisions with outcome and quality score from the store or its Parquet day parts
   (:mod:`regret_gateway.trainset.window`: rows without a score, failed requests and fail-open fallbacks are left out
   and counted).
2. Check the data: enough rows, enough per model, randomised logging (propensities < 1), overlap
   (minimum propensity, effective sample size per model). Refuse with a clear message otherwise.
3. Split the rows into ``folds`` (5) folds and hold out each in turn (cross-fitting, the default); on the
   other folds fit the nuisance stage (the logged propensities -- exact, the gateway sampled them;
   XGBoost estimates when some rows were imported without one -- and the outcome MLPs), doubly robust
   scores,
4. and the learned routers: RM-Interval (one RM-Softmax policy per configured tier lambda, interval nets
   between them), RM-Cluster (per embedding cluster, the model with the best mean DR score) and R&C (the
   outcome models' argmax). So every row is evaluated, each candidate's choice and the outcome models'
   predictions on it coming from the fit that did not see it; what is published is the first fold's
   fit. ``cross_fit=False`` holds out the first fold only: one fit instead of ``folds``, and the gate
   sees a fifth of the rows (intervals about sqrt(5) times as wide).
5. Per tier, the candidates: those learned routers, the safe default -- the best constant model (the
   fixed choice, by the mean DR score of every row: out of fold where cross-fitted), except in the
   regions of prompt space whose out-of-fold DR scores prove another model better
   (:mod:`regret_gateway.policy.regions`; ``regions=False``: the constant alone) -- and what the tier
   serves now (the active router's policy for it, when it is a learned router). Off-policy evaluation of each on the held-out rows: DR and SNIPS value,
   bootstrap intervals, ESS (cross-fitted: the value of the procedure that trains on 4/5 of the logs,
   on five times the rows). The best
   candidate replaces the incumbent only if the paired bootstrap interval of its gain lies above
   ``margin`` (``force``: whenever it is better). The held-out rows were logged by several policies (each
   tier under each router version); each one's DR correction counts as far as it saw the candidate's
   choices (:mod:`regret_gateway.causal.ope`), so a tier's comparison is not swamped by rows another tier
   explored at tiny propensities. Unless the tier serves a learned router, the incumbent is its
   safe default, re-derived over the constant the tier serves (that constant is sticky). So no tier serves something estimated worse than the fixed choice or than what it
   had, and a tier that does not improve keeps its policy while the others update.
6. Write the versioned artifact -- a per-tier policy with this retrain's utility estimates, which
   exploration reads -- point ``ACTIVE`` at it and mark it active in the store: the gateway swaps it in
   on its next reload check. "published" when a tier changed -- it sends some logged request elsewhere
   -- (or none was served before); "kept" when every tier serves what it served, with only the
   estimates renewed.
7. Report: a table per tier and candidate, which one each tier serves and why; JSON and PNG.

Modules: ``options`` (what is asked and what came of it), ``checks`` (step 2), ``pipeline`` (the steps in
order), ``publish`` (step 6), ``report`` (step 7), ``schedule`` (``--every``), ``fits`` (step 3, its folds on
``executor``: here, or Ray tasks with ``--executor ray``) and ``gate`` (steps 4-5); the last two hold no store or artifacts-folder code (the offline bench's ``served`` row runs them on simulated logs, with no incumbent).

The package's names are loaded on first use (PEP 562), so that importing a module of it loads no more of the
training stack than that module needs. None is named as a module is (``publish`` the
function is ``retrain.publish.publish``): a module once imported is the package's attribute of its name.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "check_data": "checks",
    "judge_calibration": "checks",
    "RetrainOptions": "options",
    "RetrainRefused": "options",
    "RetrainResult": "options",
    "RetrainStatus": "options",
    "read_training_set": "pipeline",
    "retrain": "pipeline",
    "PUBLISH_LOCK": "publish",
    "active_router": "publish",
    "report_table": "report",
    "write_report": "report",
    "retrain_every": "schedule",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value
