"""Retrain's data rules: what of a window's rows (:mod:`regret_gateway.store.rows`) trains, and why the rest does
not. A request's score is its best-ranked source's; a row trains when its request succeeded with an answer of
the model the router chose, was scored by a source that may train (:mod:`regret_gateway.trust`), was routed
(not a fail-open fallback, not a conversation turn kept on its model), embedded by the window's embedder and
chose a known model; a window larger than ``max_rows`` is sampled by stratum; the judge's scores are corrected
by its measured error. The same rules whichever source the rows come from: the store, or Parquet day parts
read with DuckDB (:mod:`regret_gateway.store.parts`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
from sqlalchemy.orm import Session

from regret_gateway.config import TrustSpec
from regret_gateway.data import JUDGE_REPEAT_SOURCE, JUDGE_SOURCE, USER_SOURCE, LoggedFeedback
from regret_gateway.judge.calibration import (
    JudgeError,
    SelfAgreement,
    agreement_from_repeats,
    corrected_targets,
    errors_from_pairs,
)
from regret_gateway.sampling import sample_rows
from regret_gateway.store.loggers import Logger, distributions_of, favoured_of, loggers_of
from regret_gateway.store.queries import source_rank
from regret_gateway.store.rows import EMBEDDING_DROPPED, OUTCOME_REASONS, RowSource, ScoreRow, StoreRows
from regret_gateway.tables import write_columns
from regret_gateway.trust import TeamCheck, check_teams

# Why a window's row does not train (TrainingSet.skipped), in the order they are decided: mock (answered by
# `serve --mock-upstream`), no_outcome, client_left (a stream the client closed before its end: its cost is
# real, its answer not whole), failed, answered_by_other (a LiteLLM fallback's model answered: its score is
# not the chosen model's, and the chosen model's failure may be an outage, not its quality), the embedding
# dropped, no_feedback, untrusted (scored only by a user whose scores may not train under `trust`),
# fallback, session_kept (a later turn kept on its conversation's model, propensity 1: not a draw),
# other_embedder, unknown_model.
SKIP_REASONS = (
    *OUTCOME_REASONS,
    EMBEDDING_DROPPED,
    "no_feedback",
    "untrusted",
    "fallback",
    "session_kept",
    "other_embedder",
    "unknown_model",
)


@dataclass(frozen=True)
class TrainingSet:
    """Logged feedback built from the store, with what was left out and why."""

    logged: LoggedFeedback | None  # None when no row is usable
    request_ids: tuple[str, ...]
    created_at: np.ndarray  # (n,) datetime64[us]
    teams: tuple[str | None, ...]
    tiers: tuple[str, ...]
    modes: tuple[str, ...]
    router_versions: tuple[str | None, ...]  # (n,) the router version that chose (None: cold start)
    embedding_model: str | None
    skipped: dict[str, int] = field(default_factory=dict)
    sources: tuple[str, ...] = ()  # (n,) where each row's quality score came from
    loggers: tuple[Logger, ...] = ()  # (n,) the policy that logged each row (:func:`loggers_of`)
    spend_by_source: dict[str, float] = field(default_factory=dict)  # what the window's scores cost (the judge's calls)
    sampled_from: int | None = None  # usable rows before a window larger than max_rows was sampled (None: all kept)
    judge_errors: dict[str, JudgeError] = field(default_factory=dict)  # measured on the window's user-scored requests
    judge_self_agreement: dict[str, SelfAgreement] = field(default_factory=dict)  # on the answers it judged twice
    judge_corrected: dict[str, int] = field(default_factory=dict)  # rows whose judge score each estimate corrected
    team_checks: dict[str, TeamCheck] = field(default_factory=dict)  # whose user scores train (regret_gateway.trust)
    # (n,) what each row's logger favoured at its prompt (:func:`favoured_of`): the off-policy weights read it
    favoured: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    apps: tuple[str | None, ...] = ()  # (n,) the app each row's request came from (None: no system prompt)
    # (n, T) each row's logging distribution over the models where the gateway logged it, NaN where not
    # (:func:`distributions_of`): the off-policy weights read it before ``favoured``
    distributions: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    @property
    def n_rows(self) -> int:
        return len(self.request_ids)

    def logger_codes(self) -> np.ndarray:
        """(n,) int: each row's logger as a number (one per distinct :class:`Logger`, in order of first row)."""
        codes: dict[Logger, int] = {}
        return np.array([codes.setdefault(lg, len(codes)) for lg in self.loggers], dtype=np.int64)

    def populations(self, tiers: Sequence[str]) -> dict[str, np.ndarray]:
        """Per tier name, (n,) bool: the rows of the apps that tier's own requests came from -- the requests a
        tier's candidates are valued on (a platform's teams each send their own apps, and a router worth more
        on everyone's requests can be worth less on theirs). A tier with no row of its own: every row."""
        apps, tier_of = np.array([a or "" for a in self.apps], dtype=object), np.array(self.tiers, dtype=object)
        out = {}
        for name in tiers:
            own = set(apps[tier_of == name].tolist())
            out[name] = np.isin(apps, list(own)) if own else np.ones(len(apps), dtype=bool)
        return out

    def rows_by_source(self) -> dict[str, int]:
        names, counts = np.unique(np.array(self.sources, dtype=object), return_counts=True) if self.sources else ((), ())
        return {str(k): int(v) for k, v in zip(names, counts)}


def training_set(
    source: RowSource | Session,
    *,
    model_names: Sequence[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    team: str | None = None,
    embedding_model: str | None = None,
    feedback: Sequence[str] | None = None,
    max_rows: int | None = None,
    calibrate_judge: bool = True,
    trust: TrustSpec | None = None,
    embeddings: bool = True,
) -> TrainingSet:
    """The window's usable rows as :class:`LoggedFeedback`, with what was left out and why.

    ``source``: where the rows come from (a store session, or :class:`~regret_gateway.store.parts.PartsRows`);
    the window: decisions made in [``since``, ``until``) by ``team`` (None: unbounded, every team).
    A request's quality score is the best-ranked of its sources (``feedback``: the sources to use, in
    order, e.g. ``("user", "judge")``; None: every source, user first and the judge last, see
    :func:`source_rank`). Rows are kept when the request succeeded with an answer of the model the router
    chose, has a quality score from one of them, was embedded by ``embedding_model`` (default: the most
    frequent one in the window), was not a fail-open fallback, not answered by ``serve --mock-upstream``'s
    mock, and chose one of ``model_names`` (default: every model seen, sorted). The rest are counted in
    ``skipped`` by reason (:data:`SKIP_REASONS`).
    Where more rows are usable than ``max_rows``, a stratified sample of them is kept (:func:`sample_rows`;
    ``sampled_from`` says of how many). A row scored by the LLM judge takes, as its ``target``, the judge's
    score corrected by the judge's error measured on the window's user-scored requests, else by its
    self-agreement on the answers it judged twice (:mod:`~regret_gateway.judge.calibration`;
    ``calibrate_judge=False``: measured, not applied). With ``trust`` (the deployment's ``trust:`` section),
    a user score that may not train -- a team not listed, flagged as disagreeing with everyone else, or past
    its share (:mod:`regret_gateway.trust`) -- is left out: the request takes its next source's score, if any
    (``team_checks`` says what each team's scores came to).

    ``embeddings=False`` reads no embedding (``logged.X`` has no columns): what the window holds and leaves out
    (``status``). Time and memory grow with the scored rows: the unscored are counted by the source, the
    scored read without embeddings, then the kept rows' embeddings by id."""
    rows_of = StoreRows(source) if isinstance(source, Session) else source
    read = rows_of.window(since, until, team)
    scores = sorted(read.scores, key=lambda s: (s.request_id, s.source))  # one order, whichever source read them
    untrusted, checks = _untrusted_user_scores(scores, trust)
    best, spend = _best_scores(scores, source_rank(feedback), untrusted)
    skipped = dict.fromkeys(SKIP_REASONS, 0)
    for reason, n in read.unscored.items():
        skipped[reason or "no_feedback"] += n
    candidates = _trainable(read.scored, best, untrusted, skipped)  # the embedder is chosen among them
    if embedding_model is None and candidates:
        embedder, counts = np.unique([c.embedding_model for c in candidates], return_counts=True)
        embedding_model = str(embedder[np.argmax(counts)])
    usable = [c for c in candidates if c.embedding_model == embedding_model]
    skipped["other_embedder"] = len(candidates) - len(usable)
    chosen_names = tuple(model_names) if model_names is not None else tuple(sorted({c.chosen_model for c in usable}))
    index = {m: i for i, m in enumerate(chosen_names)}
    kept = [c for c in usable if c.chosen_model in index]
    skipped["unknown_model"] = len(usable) - len(kept)
    del candidates, usable
    sampled_from = None
    if max_rows is not None and len(kept) > max_rows:
        sampled_from = len(kept)
        kept = [kept[i] for i in sample_rows([c.request_id for c in kept], [(c.tier, c.chosen_model) for c in kept], max_rows)]
    kept.sort(key=lambda c: (c.created_at, c.request_id))  # by time, then request id
    left_out = {t for t, c in checks.items() if c.kept == 0}  # their scores do not measure the judge's error either
    errors = errors_from_pairs(*_scored_by_both(scores, USER_SOURCE, JUDGE_SOURCE, left_out))
    agreement = agreement_from_repeats(*_scored_by_both(scores, JUDGE_SOURCE, JUDGE_REPEAT_SOURCE))
    ids, models = tuple(c.request_id for c in kept), tuple(c.chosen_model for c in kept)
    sources = tuple(best[r][1] for r in ids)
    logged, corrected = None, dict[str, int]()
    if kept:
        logged, corrected = _logged(kept, ids, models, sources, best, index, chosen_names, rows_of if embeddings else None,
                                    (errors, agreement) if calibrate_judge else ())  # fmt: skip
    tiers, versions, modes = (tuple(getattr(c, f) for c in kept) for f in ("tier", "router_version", "mode"))
    return TrainingSet(
        logged=logged, request_ids=ids, created_at=np.array([c.created_at for c in kept], dtype="datetime64[us]"),
        teams=tuple(c.team for c in kept), tiers=tiers, modes=modes, router_versions=versions,
        embedding_model=embedding_model, skipped=skipped, sources=sources, spend_by_source=spend,
        loggers=loggers_of(tiers, versions, modes), sampled_from=sampled_from, judge_errors=errors,
        judge_self_agreement=agreement, judge_corrected=corrected, team_checks=checks,
        favoured=favoured_of(modes, [c.greedy_model for c in kept], models, [c.propensity for c in kept], index),
        apps=tuple(c.app for c in kept), distributions=distributions_of([c.propensities for c in kept], index),
    )  # fmt: skip


def _best_scores(scores, rank, untrusted: set[str]) -> tuple[dict[str, tuple[int, str, float]], dict[str, float]]:
    """(request id -> (rank, source, score) of its best-ranked score, each source's spend): a user score of a
    request in ``untrusted`` does not count (:mod:`regret_gateway.trust`)."""
    best: dict[str, tuple[int, str, float]] = {}
    spend: dict[str, float] = {}
    for s in scores:
        if s.cost:
            spend[s.source] = spend.get(s.source, 0.0) + s.cost
        k = rank(s.source)
        if (
            k is not None
            and (s.request_id not in best or (k, s.source) < best[s.request_id][:2])
            and not (s.source == USER_SOURCE and s.request_id in untrusted)
        ):
            best[s.request_id] = (k, s.source, s.score)
    return best, spend


def _trainable(scored, best: dict, untrusted: set[str], skipped: dict[str, int]) -> list:
    """The successful, scored, routed rows of ``scored``; each other row counted in ``skipped`` by its reason."""
    out = []
    for r in scored:
        if r.reason is not None:  # mock, no outcome, a stream the client left, failed, a fallback's answer; no embedding
            skipped[r.reason] += 1
        elif r.request_id not in best:  # unscored, or only by a user whose scores may not train (the trust check)
            skipped["untrusted" if r.request_id in untrusted else "no_feedback"] += 1
        elif r.mode == "fallback":  # routing failed: not a draw of the logging policy
            skipped["fallback"] += 1
        elif r.session_turn == "kept":  # kept on its conversation's model (p = 1): no draw of the logging policy
            skipped["session_kept"] += 1
        else:
            out.append(r)
    return out


def _logged(kept: list, ids: tuple[str, ...], models: tuple[str, ...], sources: tuple[str, ...], best: dict,
            index: dict[str, int], names: tuple[str, ...], rows_of: RowSource | None,
            judge: tuple) -> tuple[LoggedFeedback, dict[str, int]]:  # fmt: skip
    """The ``kept`` rows (their request ``ids``, chosen ``models`` and score ``sources``) as
    :class:`LoggedFeedback` (their embeddings read by id from ``rows_of``; None: no columns), each
    judge-scored row's target corrected by ``judge`` (its measured errors and self-agreement; empty: not
    applied), and how many rows each correction touched."""
    quality = np.array([best[r][2] for r in ids])
    target, corrected, target_errors = corrected_targets(models, sources, quality, *judge)
    # a row imported without a propensity carries NaN (LoggedFeedback.imported): retrain estimates its logging
    # policy (XGBoost) and keeps every other row's logged value
    logged = LoggedFeedback(
        X=rows_of.embeddings(ids, int(kept[0].embedding_dim)) if rows_of is not None else np.zeros((len(ids), 0), np.float32),
        action=np.array([index[m] for m in models]), quality=quality, cost=np.array([c.cost_usd for c in kept], dtype=float),
        model_names=names, propensity=np.array([np.nan if c.propensity is None else c.propensity for c in kept]),
        lam=np.array([c.lam for c in kept], dtype=float), target=target, target_errors=target_errors,
    )  # fmt: skip
    return logged, corrected


def _scored_by_both(scores: Sequence[ScoreRow], first: str, second: str,
                    left_out: Collection[str] = frozenset()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The requests that sources ``first`` and ``second`` both scored, but those of the teams ``left_out``:
    (models that answered, ``first``'s scores, ``second``'s scores), each (k,)."""
    by_request: dict[str, dict[str, ScoreRow]] = {}
    for s in scores:
        if s.source in (first, second) and s.team not in left_out:
            by_request.setdefault(s.request_id, {})[s.source] = s
    pairs = [(both[first].answered, both[first].score, both[second].score) for both in by_request.values() if len(both) == 2]
    models = np.array([p[0] for p in pairs], dtype=object)
    values = np.array([p[1:] for p in pairs], dtype=float).reshape(-1, 2)
    return models, values[:, 0], values[:, 1]


def _untrusted_user_scores(scores: Sequence[ScoreRow], trust: TrustSpec | None) -> tuple[set[str], dict[str, TeamCheck]]:
    """The request ids whose user score does not train under ``trust`` (:func:`regret_gateway.trust.check_teams`),
    and each scoring team's check; nothing left out where ``trust`` is None."""
    if trust is None:
        return set(), {}
    rows = [s for s in scores if s.source in (USER_SOURCE, JUDGE_SOURCE)]
    if not any(s.source == USER_SOURCE for s in rows):
        return set(), {}
    return check_teams([s.request_id for s in rows], [s.team for s in rows], [s.answered for s in rows],
                       np.array([s.score for s in rows]), np.array([s.source == USER_SOURCE for s in rows]), trust,
                       [s.app for s in rows])  # fmt: skip


EXPORT_COLUMNS = ("request_id", "created_at", "team", "tier", "lam", "mode", "model", "propensity", "quality", "cost_usd")


def export_training_set(ts: TrainingSet, path: str | Path) -> Path:
    """Write a training set for offline work: ``.parquet`` (needs pyarrow) or ``.csv``/``.csv.gz``.
    Columns: :data:`EXPORT_COLUMNS` (propensity empty when not logged), then the embedding as x0..x{d-1}."""
    path = Path(path)
    if ts.logged is None:
        raise ValueError("the training set is empty: nothing to export")
    lg = ts.logged
    assert lg.lam is not None  # the store logs every row's lambda
    columns: dict[str, list | np.ndarray] = dict(zip(EXPORT_COLUMNS, (
        list(ts.request_ids),
        ts.created_at.astype(str).tolist(),
        list(ts.teams),
        list(ts.tiers),
        lg.lam,
        list(ts.modes),
        [lg.model_names[a] for a in lg.action],
        [None if imported else float(p)
         for imported, p in zip(lg.imported, lg.propensity if lg.propensity is not None else np.zeros(lg.n_samples))],
        lg.quality,
        lg.cost,
    )))  # fmt: skip
    for j in range(lg.X.shape[1]):
        columns[f"x{j}"] = lg.X[:, j]
    return write_columns(path, columns)
