"""Whose scores train the router: every team's user scores are checked on the same models and app, capped
in share, and left out where the deployment does not trust them (``trust:`` config).

Retrain fits one model of every model's quality from the whole window and chooses every tier's policy
from it, so a team's scores change what the tiers other teams use are served. Four rules bound that:

- ``trust.teams``: only the listed teams' user scores train (default: every team's);
- agreement, like with like: a team's mean score on a model within one app (the requests of one system
  prompt, gateway/messages.py ``app_key``; requests without one are one app) is compared with the others'
  there, and a difference of at least ``min_gap``, beyond chance (a two-sample z test, Bonferroni over
  every team, app and model compared, at ``alpha``), is a disagreement. Teams whose apps differ are never
  compared: a platform's teams each on their own apps really score each model differently;
- a reference decides, a count never does: where the judge or a team the operator lists in
  ``trust.reference`` scored that model in that app, a team is compared with them alone, and one that
  disagrees is flagged and its scores left out. Where only peer teams scored it, which side is right cannot
  be told -- two colluding teams look like a majority -- so every team that scored that model there loses
  its scores of that app (its other apps' still train): a coalition can stop the learning of an app it
  shares with an honest team, never steer it. ``trust.exempt`` teams are never checked, and no reference;
- cap: where several teams score, no team's scores are more than ``max_team_share`` of the user scores
  that train; a team past it keeps a share of its scores chosen by a hash of the request id.

Numpy only; the store reads the scores (:func:`regret_gateway.trainset.window.training_set`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from regret_gateway.confidence import z_critical
from regret_gateway.config import TrustSpec
from regret_gateway.sampling import request_id_keys

VAR_FLOOR = 0.01  # a score's variance is taken as at least this: a team that gives one score to everything has none


@dataclass(frozen=True)
class TeamCheck:
    """One team's user scores in the window, checked (``status`` and the retrain report show it)."""

    team: str
    rows: int  # its user scores in the window
    kept: int  # of them, those that train
    verdict: str  # trusted | not listed | flagged | exempt | capped
    model: str | None = None  # where it disagrees most with everyone else
    gap: float | None = None  # its mean score there minus everyone else's
    z: float | None = None
    app: str | None = None  # the app of that comparison (None: requests without a system prompt, or none)

    def line(self) -> str:
        app = "" if self.app is None else f" in app {self.app}"
        where = "" if self.model is None else f"; on {self.model}{app} {self.gap:+.2f} against everyone else (z {self.z:.1f})"
        return f"team {self.team}: {self.rows} user scores, {self.kept} train ({self.verdict}{where})"


def _hash_order(ids: list[str]) -> np.ndarray:
    return np.argsort(request_id_keys(ids), kind="stable")


Stratum = tuple[str, str]  # (app, model): scores compared like with like ("" : no app)
Found = tuple[Stratum | None, float, float, bool]  # (where, gap, z, against a reference)


def _disagreement(team: str, teams: np.ndarray, strata: np.ndarray, labels: list[Stratum], scores: np.ndarray,
                  is_user: np.ndarray, peers: np.ndarray, independent: np.ndarray, spec: TrustSpec) -> Found:  # fmt: skip
    """((app, model), gap, z, referenced) where ``team``'s user scores differ most (in z) from the others' of
    the same app and model, by at least ``min_gap``: the ``independent`` scores there (the judge's, the
    reference teams') where they are at least ``min_rows`` (``referenced``), else the ``peers``' (the other
    checked teams'). ``strata``: (n,) each score's code of its (app, model) in ``labels``."""
    best: Found = (None, 0.0, 0.0, False)
    mine = is_user & (teams == team)
    for key in np.unique(strata[mine]):
        same = strata == key
        referenced = int((independent & same).sum()) >= spec.min_rows
        ref = (independent if referenced else peers & ~mine) & same
        a, b = scores[mine & same], scores[ref]
        if len(a) < spec.min_rows or len(b) < spec.min_rows:
            continue
        # the spread under the null (both from one distribution): the pooled scores'. Each side's own variance
        # understates it where a team's few scores sit near 0 or 1 (43 of 44 answers good), and flags honest teams
        pooled = max(float(np.concatenate([a, b]).var(ddof=1)), VAR_FLOOR)
        se = np.sqrt(pooled / len(a) + pooled / len(b))
        gap = float(a.mean() - b.mean())
        z = abs(gap) / se
        if abs(gap) >= spec.min_gap and z > best[2]:
            best = (labels[int(key)], gap, float(z), referenced)
    return best


def check_teams(request_ids: list[str], teams: list[str | None], models: list[str], scores: np.ndarray,
                is_user: np.ndarray, spec: TrustSpec, apps: list[str | None] | None = None) -> tuple[set[str], dict[str, TeamCheck]]:  # fmt: skip
    """(the request ids whose user score does not train, every scoring team's :class:`TeamCheck`).

    Args: one entry per score of the window: its request id, the team that asked, the model that answered,
    the score in [0, 1], whether it is a user's (``False``: the judge's, a reference for everyone), and the
    app the request came from (None: no system prompt; ``apps`` None: one app for all).

    The agreement check goes worst first: the team that disagrees most (in z) is flagged where a reference
    (the judge, ``trust.reference``) scored that model and app, and its scores leave the comparisons; where
    only peer teams did, every checked team that scored that model there loses its scores of that app (a
    dispute: no side wins by count), and the check goes on."""
    team_arr = np.array([t if t is not None else "" for t in teams], dtype=object)
    scores = np.asarray(scores, dtype=float)
    keys = [(a or "", str(m)) for a, m in zip(apps if apps is not None else [None] * len(models), models)]
    app_arr = np.array([a for a, _ in keys], dtype=object)
    labels = sorted(set(keys))
    code = {k: i for i, k in enumerate(labels)}
    strata = np.array([code[k] for k in keys], dtype=np.int64)
    is_user = np.asarray(is_user, dtype=bool)
    scoring = sorted({t for t, u in zip(team_arr, is_user) if u})
    listed = None if spec.teams is None else set(spec.teams)
    rows = {t: int((is_user & (team_arr == t)).sum()) for t in scoring}
    verdicts = {
        t: TeamCheck(t, rows[t], 0, "not listed in trust.teams") for t in scoring if listed is not None and t not in listed
    }
    vouched = [t for t in spec.reference if t in scoring and t not in verdicts]
    checked = [t for t in scoring if t not in verdicts and t not in spec.exempt and t not in vouched]
    independent = ~is_user | np.isin(team_arr, vouched)  # the judge and the operator's reference teams
    peers = is_user & np.isin(team_arr, checked)  # the teams checked: compared with each other where no reference is
    tests = max(1, sum(len(np.unique(strata[is_user & (team_arr == t)])) for t in checked))
    z_crit = z_critical(spec.alpha, tests, two_sided=True)
    found: dict[str, Found] = {t: (None, 0.0, 0.0, False) for t in scoring}
    disputed = np.zeros(len(scores), dtype=bool)  # user scores of an app peers disagree on with no reference: none train
    dispute: dict[str, Found] = {}
    while spec.check_agreement and checked:
        live = peers & ~disputed
        found.update({t: _disagreement(t, team_arr, strata, labels, scores, is_user & ~disputed, live, independent, spec)
                      for t in checked})  # fmt: skip
        worst = max(checked, key=lambda t: found[t][2])
        stratum, _, z, referenced = found[worst]
        if stratum is None or z < z_crit:
            break
        if not referenced:  # peers alone: which side is right cannot be told -- the app's scores of every party leave
            parties = {t for t in checked if (live & (team_arr == t) & (strata == code[stratum])).any()}
            for t in parties:
                disputed |= is_user & (team_arr == t) & (app_arr == stratum[0])
                dispute.setdefault(t, found[worst] if found[t][0] != stratum else found[t])
            continue
        verdicts[worst] = _check(worst, rows[worst], 0, "flagged: left out", found[worst])
        checked.remove(worst)
        peers &= team_arr != worst
    for t in scoring:
        if t in verdicts:
            continue
        lost = int((disputed & (team_arr == t)).sum())
        where = dispute[t][0] if t in dispute else None
        app = "(none)" if where is None or not where[0] else where[0]
        if t in dispute and lost == rows[t]:
            verdicts[t] = _check(t, rows[t], 0, f"disputed: disagrees with other teams in app {app} and no reference "
                                 "(the judge, trust.reference) tells who is right; none of their scores there train", dispute[t])  # fmt: skip
        elif t in dispute:
            verdicts[t] = _check(t, rows[t], rows[t] - lost, f"trusted, but not in app {app}: disagrees there with other "
                                 "teams and no reference tells who is right; none of their scores there train", dispute[t])  # fmt: skip
        else:
            verdict = "reference" if t in vouched else "exempt" if t in spec.exempt else "trusted"
            verdicts[t] = _check(t, rows[t], rows[t], verdict, found[t])
    ids = np.array(request_ids, dtype=object)
    out: set[str] = set(ids[disputed])
    for t, check in verdicts.items():
        if check.kept == 0:
            out.update(ids[is_user & (team_arr == t)])
    _cap_shares(verdicts, out, ids, is_user & ~disputed, team_arr, spec.max_team_share)
    return out, dict(sorted(verdicts.items()))


def _cap_shares(verdicts: dict[str, TeamCheck], out: set[str], ids: np.ndarray, scoring: np.ndarray, team_arr: np.ndarray,
                share: float) -> None:  # fmt: skip
    """No team more than ``share`` of the user scores that train: a team over it keeps a hash-ordered
    ``share`` and the rest of its ``scoring`` rows' request ids join ``out`` (only where two teams train)."""
    kept = {t: c.kept for t, c in verdicts.items()}
    if share >= 1 or sum(1 for k in kept.values() if k) < 2:
        return
    for t, c in list(verdicts.items()):
        limit = int(share / (1 - share) * (sum(kept.values()) - kept[t]))
        if c.kept > limit:
            mine = list(ids[scoring & (team_arr == t)])
            out.update(mine[i] for i in _hash_order(mine)[limit:])
            verdicts[t] = TeamCheck(t, c.rows, limit, f"capped at {share:.0%} of the user scores", c.model, c.gap, c.z,
                                    c.app)  # fmt: skip


def _check(team: str, rows: int, kept: int, verdict: str, found: Found) -> TeamCheck:
    stratum, gap, z, _ = found
    if stratum is None:
        return TeamCheck(team, rows, kept, verdict)
    app, model = stratum
    return TeamCheck(team, rows, kept, verdict, model, gap, z, app or None)
