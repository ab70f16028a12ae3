"""What retrain learns from: the store's scored decisions as :class:`~regret_gateway.data.LoggedFeedback`,
with what was left out and why, and its export for offline work."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
from sqlalchemy import and_, case, func, select
from sqlalchemy.orm import Session

from regret_gateway.config import TrustSpec
from regret_gateway.data import LoggedFeedback
from regret_gateway.judge_calibration import JudgeError, SelfAgreement, corrected_targets
from regret_gateway.store.judge_errors import judge_errors, self_agreement
from regret_gateway.store.loggers import Logger, favoured_of, loggers_of
from regret_gateway.store.queries import JUDGE_SOURCE, USER_SOURCE, source_rank
from regret_gateway.store.schema import Decision, Feedback, Outcome
from regret_gateway.store.writes import ID_CHUNK, chunks
from regret_gateway.tables import write_columns
from regret_gateway.trust import TeamCheck, check_teams, request_id_keys


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


READ_CHUNK = 10_000  # rows fetched at a time (a server-side cursor on PostgreSQL)
# What retrain's fits need at most: the regions' test uses up to 32 regions of 2,400 rows, and the learning
# curve (docs/experiments/learning-curve.md) was measured up to 56,000 rows. A larger window is sampled; a
# cross-fitted retrain peaks at about 24 KB per fitted row (100,000 rows: 2.4 GB; docs/experiments/retrain-time.md).
MAX_ROWS = 100_000


def sample_rows(request_ids: Sequence[str], strata: Sequence[tuple], max_rows: int) -> np.ndarray:
    """Which rows a window larger than ``max_rows`` keeps: (k,) sorted positions.

    Proportional stratified sampling: every stratum (tier, model) keeps the same share r = max_rows / n of
    its rows (rounded to whole rows), and within a stratum the rows whose request id hashes lowest, so the
    choice reads no prompt, outcome or score and repeats from run to run. A row's chance to be kept is r
    whichever its prompt, model or tier: the logged propensities stay exact (the sampling's factor r is the
    same for every row and cancels in the estimators' means), and the tiers' and models' shares are kept."""
    n = len(request_ids)
    if n <= max_rows:
        return np.arange(n)
    rate = max_rows / n
    key = request_id_keys(request_ids)
    groups: dict[tuple, list[int]] = {}
    for i, stratum in enumerate(strata):
        groups.setdefault(stratum, []).append(i)
    kept = []
    for rows in groups.values():
        members = np.array(rows)
        take = int(round(rate * len(members)))
        kept.append(members[np.argsort(key[members], kind="stable")[:take]])
    return np.sort(np.concatenate(kept))


def training_set(
    session: Session,
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
) -> TrainingSet:
    """Decisions joined with their outcome and current feedback, as :class:`LoggedFeedback`.

    A request's quality score is the best-ranked of its sources (``feedback``: the sources to use, in
    order, e.g. ``("user", "judge")``; None: every source, user first and the judge last, see
    :func:`source_rank`). Rows are kept when the request succeeded with an answer of the model the router
    chose, has a quality score from one of them, was embedded by ``embedding_model`` (default: the most
    frequent one in the window), was not a fail-open fallback, not answered by ``serve --mock-upstream``'s
    mock, and chose one of ``model_names`` (default: every model seen, sorted). The rest are counted in
    ``skipped``: ``mock``, ``no_outcome``, ``client_left`` (a stream the client closed before its end: its
    cost is real, its answer not whole), ``failed``, ``answered_by_other`` (a LiteLLM fallback's model
    answered: its score is not the chosen model's, and the chosen model's failure may be an outage, not its
    quality), ``no_feedback``, ``untrusted`` (scored only by a user whose scores may not train under ``trust``),
    ``fallback``, ``session_kept`` (a later turn of a conversation kept on its first
    turn's model, propensity 1: not a draw), ``other_embedder``, ``unknown_model``.
    Where more rows are usable than ``max_rows``, a stratified sample of them is kept (:func:`sample_rows`;
    ``sampled_from`` says of how many). A row scored by the LLM judge takes, as its ``target``, the judge's
    score corrected by the judge's error measured on the window's user-scored requests, else by its
    self-agreement on the answers it judged twice (:mod:`~regret_gateway.judge_calibration`;
    ``calibrate_judge=False``: measured, not applied). With ``trust`` (the deployment's ``trust:`` section),
    a user score that may not train -- a team not listed, flagged as disagreeing with everyone else, or past
    its share (:mod:`regret_gateway.trust`) -- is left out: the request takes its next source's score, if any
    (``team_checks`` says what each team's scores came to).

    Time and memory grow with the window's scored rows: the unscored ones are counted in the database, the
    scored ones read in chunks without their embeddings (which rows are usable and kept), then the kept rows'
    embeddings by id, into one float32 array."""
    window = []
    if since is not None:
        window.append(Decision.created_at >= since)
    if until is not None:
        window.append(Decision.created_at < until)
    if team is not None:
        window.append(Decision.team == team)
    rank = source_rank(feedback)
    best: dict[str, tuple[int, str, float]] = {}  # request id -> (rank, source, score) of its best-ranked score
    spend: dict[str, float] = {}
    read = _scores(session, window)
    untrusted, checks = _untrusted_user_scores(read, trust)
    for rid, src, score, cost, *_ in read:
        if cost:
            spend[src] = spend.get(src, 0.0) + cost
        k = rank(src)
        if k is not None and (rid not in best or (k, src) < best[rid][:2]) and not (src == USER_SOURCE and rid in untrusted):
            best[rid] = (k, src, score)
    del read
    outcome_reason = _outcome_reason().label("reason")
    q = (
        select(
            Decision.request_id,
            Decision.created_at,
            Decision.team,
            Decision.tier,
            Decision.lam,
            Decision.embedding_model,
            Decision.embedding_dim,
            Decision.chosen_model,
            Decision.propensity,
            Decision.mode,
            Decision.router_version,
            Outcome.cost_usd,
            outcome_reason,
            Decision.session_turn,
            Decision.greedy_model,
            Decision.app,
        )
        .select_from(Decision)
        .join(scored := select(Feedback.request_id).distinct().subquery(), scored.c.request_id == Decision.request_id)
        .outerjoin(Outcome, Outcome.request_id == Decision.request_id)
        .where(*window)
    )  # the scored decisions only, one by one; the rest are counted in the database below, by why they are left out
    skipped = {"no_outcome": 0, "failed": 0, "client_left": 0, "answered_by_other": 0, "mock": 0, "no_feedback": 0,
               "untrusted": 0, "fallback": 0, "session_kept": 0, "other_embedder": 0, "unknown_model": 0}  # fmt: skip
    unscored = (
        select(outcome_reason, func.count())
        .select_from(Decision).outerjoin(Outcome, Outcome.request_id == Decision.request_id)
        .where(*window, ~select(Feedback.request_id).where(Feedback.request_id == Decision.request_id).exists())
        .group_by(outcome_reason)
    )  # fmt: skip
    for reason, n in session.execute(unscored):
        skipped[reason or "no_feedback"] += int(n)
    candidates = []  # successful, scored, routed rows: the embedder is chosen among them
    for r in session.execute(q.execution_options(yield_per=READ_CHUNK)):
        if r.reason is not None:  # mock, no outcome, a stream the client left, failed, answered by a fallback's model
            skipped[r.reason] += 1
        elif r.request_id not in best:  # unscored, or only by a user whose scores may not train (the trust check)
            skipped["untrusted" if r.request_id in untrusted else "no_feedback"] += 1
        elif r.mode == "fallback":  # routing failed: not a draw of the logging policy
            skipped["fallback"] += 1
        elif r.session_turn == "kept":  # kept on its conversation's model (p = 1): no draw of the logging policy
            skipped["session_kept"] += 1
        else:
            candidates.append((*tuple(r)[:12], r.greedy_model, r.app))
    names = [c[5] for c in candidates]
    if embedding_model is None and names:
        embedder, counts = np.unique(names, return_counts=True)
        embedding_model = str(embedder[np.argmax(counts)])
    usable = [c for c in candidates if c[5] == embedding_model]
    skipped["other_embedder"] = len(candidates) - len(usable)
    del candidates, names
    chosen_names = tuple(model_names) if model_names is not None else tuple(sorted({c[7] for c in usable}))
    index = {m: i for i, m in enumerate(chosen_names)}
    kept = [c for c in usable if c[7] in index]
    skipped["unknown_model"] = len(usable) - len(kept)
    del usable
    sampled_from = None
    if max_rows is not None and len(kept) > max_rows:
        sampled_from = len(kept)
        kept = [kept[i] for i in sample_rows([c[0] for c in kept], [(c[3], c[7]) for c in kept], max_rows)]
    kept.sort(key=lambda c: (c[1], c[0]))  # by time, then request id
    ids, created, teams, tiers, lams, _, dims, models, propensities, modes, versions, costs, greedy, apps = (
        zip(*kept) if kept else ((),) * 14
    )
    logged = None
    left_out = [t for t, c in checks.items() if c.kept == 0]  # their scores do not measure the judge's error either
    judged = window + ([Decision.team.not_in(left_out)] if left_out else [])
    errors, agreement = judge_errors(session, judged), self_agreement(session, window)
    corrected: dict[str, int] = {}
    sources = tuple(best[r][1] for r in ids)
    if kept:
        quality = np.array([best[r][2] for r in ids])
        target, corrected, target_errors = corrected_targets(
            models, sources, quality, *((errors, agreement) if calibrate_judge else ())
        )
        X = _embeddings(session, ids, int(dims[0]))
        # a row imported without a propensity carries NaN (LoggedFeedback.imported): retrain estimates its logging
        # policy (XGBoost) and keeps every other row's logged value
        logged = LoggedFeedback(
            X=X,
            action=np.array([index[m] for m in models]),
            quality=quality,
            cost=np.array(costs, dtype=float),
            model_names=chosen_names,
            propensity=np.array([np.nan if p is None else p for p in propensities]),
            lam=np.array(lams, dtype=float),
            target=target,
            target_errors=target_errors,
        )
    return TrainingSet(
        logged=logged,
        request_ids=tuple(ids),
        created_at=np.array([t.replace(tzinfo=None) for t in created], dtype="datetime64[us]"),
        teams=tuple(teams),
        tiers=tuple(tiers),
        modes=tuple(modes),
        router_versions=tuple(versions),
        embedding_model=embedding_model,
        skipped=skipped,
        sources=sources,
        spend_by_source=spend,
        loggers=loggers_of(tiers, versions, modes),
        sampled_from=sampled_from,
        judge_errors=errors,
        judge_self_agreement=agreement,
        judge_corrected=corrected,
        team_checks=checks,
        favoured=favoured_of(modes, greedy, models, propensities, index),
        apps=tuple(apps),
    )


def _scores(session: Session, window: list) -> list:
    """The window's scores: (request id, source, score, cost, team, the model that answered, app) each."""
    answered = func.coalesce(Outcome.answered_model, Decision.chosen_model)
    scores = (
        select(Feedback.request_id, Feedback.source, Feedback.score, Feedback.cost_usd, Decision.team, answered, Decision.app)
        .select_from(Feedback)
        .join(Decision, Decision.request_id == Feedback.request_id)
        .outerjoin(Outcome, Outcome.request_id == Feedback.request_id)
        .where(*window)
    )
    return list(session.execute(scores.execution_options(yield_per=READ_CHUNK)))


def team_checks(session: Session, trust: TrustSpec, since: datetime | None = None) -> dict[str, TeamCheck]:
    """Each scoring team's check under ``trust`` over the requests since ``since`` (what `status` shows)."""
    return _untrusted_user_scores(_scores(session, [] if since is None else [Decision.created_at >= since]), trust)[1]


def _untrusted_user_scores(read: Sequence, trust: TrustSpec | None) -> tuple[set[str], dict[str, TeamCheck]]:
    """The request ids whose user score does not train under ``trust`` (:func:`regret_gateway.trust.check_teams`),
    and each scoring team's check; nothing left out where ``trust`` is None. ``read``: the window's scores as
    (request id, source, score, cost, team, model that answered, app)."""
    if trust is None:
        return set(), {}
    rows = [r for r in read if r[1] in (USER_SOURCE, JUDGE_SOURCE)]
    if not any(r[1] == USER_SOURCE for r in rows):
        return set(), {}
    return check_teams([r[0] for r in rows], [r[4] for r in rows], [r[5] for r in rows], np.array([r[2] for r in rows]),
                       np.array([r[1] == USER_SOURCE for r in rows]), trust, [r[6] for r in rows])  # fmt: skip


def _outcome_reason():
    """Why a decision's outcome keeps it from training, as a SQL expression (NULL: it does not): ``mock``
    (``serve --mock-upstream`` answered, not the model), ``no_outcome``, ``client_left`` (a stream the client
    closed: its cost is real, its answer not whole), ``failed``, ``answered_by_other`` (a LiteLLM fallback's
    model answered). Needs ``Outcome`` outer-joined to ``Decision``."""
    return case(
        (Decision.mock.is_(True), "mock"),
        (Outcome.cost_usd.is_(None), "no_outcome"),
        (Outcome.status == "client_left", "client_left"),
        (Outcome.status != "success", "failed"),
        (and_(Outcome.answered_model.is_not(None), Outcome.answered_model != Decision.chosen_model), "answered_by_other"),
        else_=None,
    )


def _embeddings(session: Session, ids: Sequence[str], dim: int) -> np.ndarray:
    """(k, dim) float32: the embeddings of the request ids ``ids``, in their order, read by id in chunks."""
    X = np.empty((len(ids), dim), dtype=np.float32)
    position = {r: i for i, r in enumerate(ids)}
    found = 0
    for chunk in chunks(list(ids), ID_CHUNK):
        for rid, blob in session.execute(select(Decision.request_id, Decision.embedding).where(Decision.request_id.in_(chunk))):
            X[position[rid]] = np.frombuffer(blob, dtype="<f4")
            found += 1
    if found != len(ids):  # pruned between the two reads
        raise RuntimeError(f"{len(ids) - found} of the window's rows went while it was read; read it again")
    return X


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
