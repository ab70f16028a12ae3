"""retrain: logs in the store -> checked router -> published; refusals leave the active router alone."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy.orm import Session

from regret_gateway.artifacts import active_version_id
from regret_gateway.causal.stats import folds_of
from regret_gateway.config import EmbedderSpec, Settings, StoreSpec, TierSpec
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.synthetic import write_world
from regret_gateway.retrain import RetrainOptions, retrain
from regret_gateway.store.engine import make_engine
from regret_gateway.store.loggers import Logger, loggers_of
from regret_gateway.store.migrate import upgrade
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
from regret_gateway.store.writes import record_decisions, record_feedback

TIERS = {"premium": TierSpec(lam=0.0), "standard": TierSpec(lam=200.0), "economy": TierSpec(lam=1000.0)}


@pytest.fixture(scope="module")
def world(tmp_path_factory, encoder):
    """A RouterBench-layout file, loaded as a user's would be, embedded once."""
    path = write_world(tmp_path_factory.mktemp("world") / "world.csv", n=3000, seed=3)
    bench = load_benchmark(path)
    unique, inverse = np.unique(bench.prompts, return_inverse=True)
    X = encoder(list(unique))[inverse]
    return bench, X


def logging_policy(bench) -> np.ndarray:
    """A known, x-dependent logging policy: 40% on the model with the best family accuracy, the rest uniform."""
    family = np.array([g.split("-")[0] for g in bench.groups])
    p = np.full(bench.quality.shape, 0.6 / bench.quality.shape[1])
    for f in np.unique(family):
        rows = family == f
        p[np.ix_(rows, [int(np.argmax(bench.quality[rows].mean(0)))])] += 0.4
    return p


def log_to_store(engine, bench, X, *, actions, propensity, feedback=True, prefix="r"):
    records = [
        DecisionRecord(
            request_id=f"{prefix}{i}",
            tier="standard",
            lam=200.0,
            embedding_model=EmbedderSpec().embedding_id,
            embedding=X[i],
            chosen_model=bench.model_names[a],
            propensity=float(propensity[i]),
            team="t",
            outcome=OutcomeRecord(f"{prefix}{i}", cost_usd=float(bench.cost[i, a])),
        )
        for i, a in enumerate(actions)
    ]
    with Session(engine) as s, s.begin():
        record_decisions(s, records)
        if feedback:
            record_feedback(s, [FeedbackRecord(f"{prefix}{i}", float(bench.quality[i, a])) for i, a in enumerate(actions)])


def settings_for(tmp_path, bench, teams: dict | None = None) -> Settings:
    return Settings(
        models=bench.model_names,
        tiers=TIERS,
        default_tier="standard",
        artifacts_dir=str(tmp_path / "artifacts"),
        store=StoreSpec(url=f"sqlite:///{tmp_path}/gw.db"),
        teams=teams or {},
    )


def new_engine(settings):
    upgrade(settings.store.url)
    return make_engine(settings.store.url)


def test_each_tier_under_each_router_version_is_its_own_logger_and_imported_rows_one():
    tiers, versions = ("premium", "premium", "economy", "premium", "economy", "premium"), (None, "v1", "v1", "v2", None, None)
    loggers = loggers_of(tiers, versions, ("policy",) * 5 + ("imported",))
    assert len(set(loggers)) == 6 and loggers[0] == Logger("premium", None) and loggers[-1] == Logger.imported()
    assert list(loggers_of(("a", "a"), ("v1", "v1"), ("policy", "exploration"))) == [Logger("a", "v1")] * 2


def test_folds_hold_out_every_row_once():
    folds = folds_of(103, 5, seed=1)
    assert sorted(np.concatenate(folds).tolist()) == list(range(103))
    assert {len(f) for f in folds} == {20, 21}
    assert [f.tolist() for f in folds] == [f.tolist() for f in folds_of(103, 5, seed=1)]
    for k in (1, 104):
        with pytest.raises(ValueError, match="folds"):
            folds_of(103, k, seed=1)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_retrain_learns_from_logs_and_its_estimate_covers_the_truth(tmp_path, world):
    bench, X = world
    settings = settings_for(tmp_path, bench, teams={"t": {"tier": "standard", "budget": {"usd": 10.0, "per": "day"}}})
    engine = new_engine(settings)
    P = logging_policy(bench)
    rng = np.random.default_rng(0)
    actions = np.array([rng.choice(len(bench.model_names), p=p) for p in P])
    log_to_store(engine, bench, X, actions=actions, propensity=P[np.arange(len(actions)), actions])

    # --no-regions: the safe default is the constant alone, so that the kept branch below is deterministic (the
    # regional default is re-derived from each window: test_retrain_departs_from_the_constant_in_proven_regions)
    result = retrain(settings, engine, RetrainOptions(n_boot=300, regions=False))
    assert result.status == "published", result.reason
    assert active_version_id(settings.artifacts_dir) == result.version
    report = json.loads(open(result.report_paths["json"]).read())
    assert report["status"] == "published" and len(report["tiers"]) == 3
    # cross-fitted (the default): every candidate is valued on every logged row, each by a fit that did not see it
    assert result.data["evaluation"].startswith("cross-fitted, 5 folds")
    assert all(v.n == len(actions) for row in result.tiers for v in row.values.values())

    from regret_gateway.artifacts import load_artifact

    artifact = load_artifact(tmp_path / "artifacts" / result.version)
    # one stored policy per distinct candidate served (RM-Interval / R&C shared by tiers are stored once)
    served = artifact.router
    assert len(served.state()["policies"]) == len({t.candidate for t in served.tiers.values()})
    assert set(served.tiers) == set(TIERS)  # every tier by its name
    # the artifact carries this retrain's utility estimates for exploration, whatever each tier serves
    for row in result.tiers:
        estimates = served.utility_estimates(X[:50], row.lam)
        assert estimates is not None and estimates.shape == (50, len(bench.model_names))
    for row in result.tiers:
        lam = row.lam
        U = bench.quality - lam * bench.cost  # the truth: every model's outcome on every prompt
        chosen = served.choose(row.tier, X)
        # the report's model mix is what the published policy does with the logged requests
        mix = np.bincount(chosen, minlength=len(bench.model_names)) / len(chosen)
        assert np.allclose([row.model_mix[m] for m in bench.model_names], mix, atol=1e-9), (row.model_mix, mix)
        true_new = U[np.arange(len(U)), chosen].mean()
        true_logging = (P * U).sum(1).mean()
        lo, hi = row.new.dr_ci
        assert lo - 0.02 <= true_new <= hi + 0.02, (row.tier, true_new, row.new.dr_ci)
        assert true_new > true_logging + 0.03, (row.tier, true_new, true_logging)

    # every tier serves a candidate confidently better than the fixed choice, or the fixed choice itself
    for row in result.tiers:
        assert row.incumbent.startswith("constant:") and (row.served == row.incumbent or row.gain_ci[0] > 0), row.reason
    # the budgeted team's ladder: the frontier of cost and quality the logs estimate for every model and tier,
    # from the best to the cheapest; each model rung's estimate near that model's truth on the team's requests
    ladders = served.ladders
    assert set(ladders.frontier) == set(ladders.tiers) == {"*", "t"}  # everyone's, and the team's own (3,000 requests)
    # the tiers' ladder (the default) with its forecast: each tier's cost per request, then the cheapest model's,
    # near its true mean cost on the team's requests -- where a team's first period starts
    tiers = ladders.tiers["t"].rungs
    assert [r.kind for r in tiers] == ["tier"] * len(TIERS) + ["cheapest"] and tiers[-1].usd == min(r.usd for r in tiers)
    assert abs(tiers[-1].usd / bench.cost.mean(0).min() - 1) < 0.25, tiers
    rungs = ladders.frontier["t"].rungs
    assert len(rungs) >= 2 and rungs[-1].kind == "model" and rungs[-1].name == bench.model_names[int(bench.cost.mean(0).argmin())]
    assert all(a.usd > b.usd and a.quality > b.quality and a.lam <= b.lam for a, b in zip(rungs, rungs[1:])), rungs
    for r in rungs:
        if r.kind == "model":
            m = bench.model_names.index(r.name)
            assert abs(r.usd / bench.cost[:, m].mean() - 1) < 0.25 and abs(r.quality - bench.quality[:, m].mean()) < 0.05, r
    assert rungs[0].quality >= bench.quality.mean(0).max() - 0.05  # the top rung is the best the logs know
    # the "kept" branch: on 300 newer rows, demanding a gain of 50 points over what each tier serves now,
    # no candidate can deliver it; the active version stays and the report says why, tier by tier
    newer = datetime.now(timezone.utc)
    log_to_store(engine, bench, X[:300], actions=actions[:300], propensity=P[np.arange(300), actions[:300]], prefix="k")
    kept = retrain(settings, engine, RetrainOptions(n_boot=50, margin=0.5, since=newer, cross_fit=False, regions=False))
    # without cross-fitting one fold of five is held out, and every candidate is valued on those rows only
    assert kept.data["evaluation"] == "1/5 of the rows held out"
    assert all(v.n == 300 // 5 for row in kept.tiers for v in row.values.values())
    first = {row.tier: row.served for row in result.tiers}
    for t in kept.tiers:
        if first[t.tier].startswith("constant:"):  # a safe default: re-derived over the same (sticky) constant
            assert t.served == t.incumbent == first[t.tier], (first, t.reason)
        else:  # a learned router is kept: nothing is confidently 50 points better
            assert t.incumbent == f"{first[t.tier]} ({result.version})" and t.served == t.incumbent, t.reason
    assert kept.status == "kept" and kept.active_before == result.version, kept.reason
    assert "the active router stays" in kept.reason and all(t.tier in kept.reason for t in kept.tiers)
    # every tier serves exactly what it served; the new version renews only the estimates exploration reads
    assert active_version_id(settings.artifacts_dir) == kept.version != result.version
    renewed = load_artifact(tmp_path / "artifacts" / kept.version)
    assert {n: t.candidate for n, t in renewed.router.tiers.items()} == {n: t.candidate for n, t in served.tiers.items()}
    for row in kept.tiers:
        assert np.array_equal(renewed.router.logits(row.tier, X), served.logits(row.tier, X))
    assert not np.allclose(renewed.router.utility_estimates(X[:50], 0.0), served.utility_estimates(X[:50], 0.0))
    assert json.loads(open(kept.report_paths["json"]).read())["status"] == "kept"
    engine.dispose()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_retrain_departs_from_the_constant_in_proven_regions(tmp_path, world):
    """Each prompt logged three times: the safe default of some tier departs from its constant in regions of
    prompt space, a tier that serves it routes by region (kind ``regions``), and on every prompt's true
    outcomes what each tier serves is at least its constant."""
    bench, X = world
    settings = settings_for(tmp_path, bench)
    engine = new_engine(settings)
    P = logging_policy(bench)
    rng = np.random.default_rng(1)
    for draw in range(3):
        actions = np.array([rng.choice(len(bench.model_names), p=p) for p in P])
        log_to_store(engine, bench, X, actions=actions, propensity=P[np.arange(len(actions)), actions], prefix=f"d{draw}-")
    result = retrain(settings, engine, RetrainOptions(n_boot=200))
    assert result.status == "published", result.reason
    assert any(row.regions_adopted > 0 for row in result.tiers), result.reason
    from regret_gateway.artifacts import load_artifact

    artifact = load_artifact(tmp_path / "artifacts" / result.version)
    kinds = {row.tier: artifact.router.tiers[row.tier].policy.kind for row in result.tiers}
    for row in result.tiers:
        U = bench.quality - row.lam * bench.cost
        chosen = artifact.router.choose(row.tier, X)
        constant = bench.model_names.index(row.incumbent.split(":", 1)[1])
        assert U[np.arange(len(U)), chosen].mean() >= U[:, constant].mean() - 0.005, (row.tier, row.reason)
        if row.served.startswith("regions:"):
            assert kinds[row.tier] == "regions" and row.regions_adopted > 0 and "regions" in row.reason
    engine.dispose()


@pytest.mark.slow
def test_where_the_prompt_does_not_matter_every_tier_serves_the_fixed_choice(tmp_path, world):
    """Outcomes that do not depend on the prompt: no learned router can be confidently better than the
    best constant model, so every tier serves a constant -- never something estimated worse; cross-fitted
    (the default), so every candidate is valued on every row, each by the fit that did not see it."""
    bench, X = world
    n = 1200
    rng = np.random.default_rng(4)
    shuffled = rng.permutation(n)  # the embeddings no longer say anything about the outcomes
    settings = settings_for(tmp_path, bench)
    engine = new_engine(settings)
    n_models = len(bench.model_names)
    actions = rng.integers(0, n_models, n)
    log_to_store(engine, bench, X[shuffled], actions=actions, propensity=np.full(n, 1.0 / n_models))
    result = retrain(settings, engine, RetrainOptions(n_boot=300))
    assert result.status == "published", result.reason
    assert result.data["evaluation"].startswith("cross-fitted, 5 folds")
    assert all(v.n == n for row in result.tiers for v in row.values.values())
    served = {row.tier: row.served for row in result.tiers}
    assert all(label.startswith("constant:") for label in served.values()), result.reason
    # the models the logs could not show worse than each tier's constant are published for its exploration
    from regret_gateway.artifacts import load_artifact

    router = load_artifact(Path(settings.artifacts_dir) / result.version).router
    for row in result.tiers:
        assert router.tier(row.tier).contenders == row.contenders
        assert row.served.removeprefix("constant:") not in row.contenders
        assert not row.contenders or "not yet shown worse" in row.reason
    engine.dispose()


def uniformly_logged(tmp_path, world, n: int, seed: int):
    """(settings, engine) of a store holding ``n`` rows of the world logged by a uniform policy."""
    bench, X = world
    rng = np.random.default_rng(seed)
    settings = settings_for(tmp_path, bench)
    engine = new_engine(settings)
    n_models = len(bench.model_names)
    log_to_store(engine, bench, X[:n], actions=rng.integers(0, n_models, n), propensity=np.full(n, 1.0 / n_models))
    return settings, engine


def test_a_window_past_max_rows_is_fitted_on_its_sample_and_the_report_says_so(tmp_path, world):
    n, n_models = 1200, len(world[0].model_names)
    settings, engine = uniformly_logged(tmp_path, world, n, seed=5)
    result = retrain(settings, engine, RetrainOptions(n_boot=50, max_rows=600, cross_fit=False))
    assert result.data["sampled_from"] == n and abs(result.data["rows"] - 600) <= n_models, result.data
    assert all(v.n == pytest.approx(result.data["rows"] / 5, abs=2) for row in result.tiers for v in row.values.values())
    engine.dispose()


def test_a_large_window_is_split_in_two_folds_unless_the_folds_are_given(tmp_path, world, monkeypatch):
    """Past ``TWO_FOLDS_FROM`` rows (here lowered to 1,000) the fits learn from half the rows each, so a fold
    holds half of them; ``folds`` given keeps what it says."""
    from regret_gateway.retrain import fits

    monkeypatch.setattr(fits, "TWO_FOLDS_FROM", 1000)
    n = 1200
    settings, engine = uniformly_logged(tmp_path, world, n, seed=6)
    steps: list[str] = []
    halves = retrain(settings, engine, RetrainOptions(n_boot=50, cross_fit=False, force=True), progress=steps.append)
    assert halves.data["evaluation"] == "1/2 of the rows held out", halves.data
    assert steps[0] == "reading the logs" and steps[1].startswith("read 1,200 usable rows in "), steps
    assert steps[2].startswith("fit 1 of 1 on 600 rows") and "on 600 held-out rows" in steps[3], steps
    assert steps[-1].endswith("publishing") and len(steps) == 5, steps
    assert all(v.n == pytest.approx(n / 2, abs=2) for row in halves.tiers for v in row.values.values())
    given = retrain(settings, engine, RetrainOptions(n_boot=50, cross_fit=False, folds=5, force=True))
    assert given.data["evaluation"] == "1/5 of the rows held out", given.data
    engine.dispose()


def test_the_precision_asked_for_trains_the_mini_batch_fits_and_the_report_says_so(tmp_path, world, monkeypatch):
    """``precision`` reaches every network of the fits past ``FULL_BATCH_ROWS`` rows (here lowered to 300); the
    small full-batch fits stay float32; the report names what the products ran in."""
    from regret_gateway.nn.training import TrainConfig
    from regret_gateway.retrain import fits, pipeline

    for module in (fits, pipeline):
        monkeypatch.setattr(module, "FULL_BATCH_ROWS", 300)
    seen: list[str] = []
    monkeypatch.setattr(TrainConfig, "__post_init__", lambda self: seen.append(self.precision))
    settings, engine = uniformly_logged(tmp_path, world, 800, seed=7)
    result = retrain(settings, engine, RetrainOptions(n_boot=50, cross_fit=False, precision="float32"))
    assert result.status != "refused" and set(seen) == {"float32"}, (result.reason, seen)
    assert result.data["precision"] == "float32: fits past 300 rows multiply in float32, smaller ones in float32"
    seen.clear()
    result = retrain(settings, engine, RetrainOptions(n_boot=50, cross_fit=False, precision="bfloat16"))
    assert "bfloat16" in seen, seen  # the fit on 7/8 of 4/5 of 800 rows (560) is a mini-batch fit
    assert result.data["precision"] == "bfloat16: fits past 300 rows multiply in bfloat16, smaller ones in float32"
    with pytest.raises(ValueError, match="precision must be one of float32, bfloat16, auto"):
        RetrainOptions(precision="half")
    engine.dispose()


@pytest.mark.parametrize("case", ["one model only", "no feedback", "all propensities 1", "too few rows", "one tiny propensity"])
def test_degenerate_logs_are_refused_and_the_active_router_stays(tmp_path, world, case):
    bench, X = world
    settings = settings_for(tmp_path, bench)
    engine = new_engine(settings)
    n = len(bench.prompts)
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "ACTIVE").write_text("v-previous\n")
    if case == "one model only":
        log_to_store(engine, bench, X, actions=np.zeros(n, dtype=int), propensity=np.full(n, 1.0))
    elif case == "no feedback":
        rng = np.random.default_rng(1)
        log_to_store(engine, bench, X, actions=rng.integers(0, 4, n), propensity=np.full(n, 0.25), feedback=False)
    elif case == "all propensities 1":  # deterministic logging: each family always to one model
        family = np.unique([g.split("-")[0] for g in bench.groups], return_inverse=True)[1] % 4
        log_to_store(engine, bench, X, actions=family, propensity=np.full(n, 1.0))
    elif case == "too few rows":
        rng = np.random.default_rng(2)
        log_to_store(engine, bench, X[:50], actions=rng.integers(0, 4, 50), propensity=np.full(50, 0.25))
    else:  # one row of model 3 logged at p = 1e-4 outweighs all its others: its effective sample size is ~1
        actions = np.random.default_rng(3).integers(0, 4, n)
        propensity = np.full(n, 0.25)
        propensity[np.flatnonzero(actions == 3)[0]] = 1e-4
        log_to_store(engine, bench, X, actions=actions, propensity=propensity)
    result = retrain(settings, engine, RetrainOptions(n_boot=50))
    assert result.status == "refused"
    expected = {
        "one model only": "too few logged rows for",
        "no feedback": "no usable rows",
        "all propensities 1": "every logged propensity is 1",
        "too few rows": "only 50 usable rows",
        "one tiny propensity": "effective sample size too small for frontier-xl (",
    }[case]
    assert expected in result.reason
    assert active_version_id(settings.artifacts_dir) == "v-previous"
    assert sorted(p.name for p in (tmp_path / "artifacts").iterdir()) == ["ACTIVE", "reports"]
    engine.dispose()


def test_the_first_router_waits_for_the_cold_start_rows_asked_for(tmp_path, world):
    """``cold_start_rows``: with no router active, retrain refuses until every model has that many rows (the
    constant each tier starts from is chosen on them); once a router is active the same logs pass the check."""
    from regret_gateway.retrain import RetrainRefused, check_data, read_training_set

    bench, X = world
    settings = settings_for(tmp_path, bench)
    engine = new_engine(settings)
    n = 400  # uniform over the 4 models: ~100 rows each
    log_to_store(engine, bench, X[:n], actions=np.random.default_rng(4).integers(0, 4, n), propensity=np.full(n, 0.25))
    opts = RetrainOptions(n_boot=50, cold_start_rows=150)
    result = retrain(settings, engine, opts)
    assert result.status == "refused", result.reason
    assert "before the first router every model needs 150 (cold_start_rows)" in result.reason, result.reason
    assert active_version_id(settings.artifacts_dir) is None
    ts = read_training_set(settings, engine, opts)
    assert min(ts.logged.counts()) >= RetrainOptions().min_rows_per_model  # what the usual check asks is there
    with pytest.raises(RetrainRefused, match="needs 150"):
        check_data(ts.logged, ts.skipped, opts, first=True)
    assert check_data(ts.logged, ts.skipped, opts, first=False)["rows"] == n  # a router is active: the usual 20
    assert check_data(ts.logged, ts.skipped, RetrainOptions(cold_start_rows=50), first=True)["rows"] == n
    with pytest.raises(ValueError, match="cold_start_rows must be >= 0"):
        RetrainOptions(cold_start_rows=-1)
    engine.dispose()


def test_a_corrected_judge_score_counts_as_one_row_toward_the_cold_start():
    """The cold start counts scored rows, a judge's corrected for its measured 20% error like a user's: 50
    user-scored and 50 judged rows a model meet a cold start of 100 (counted at their worth in true scores,
    0.36 a judged row, they were 68, and the first router waited for ~2.8 times the judged rows)."""
    from regret_gateway.data import LoggedFeedback, TargetErrors
    from regret_gateway.retrain import RetrainRefused, check_data

    n, T = 400, 4
    action = np.repeat(np.arange(T), n // T)
    group = np.where(np.arange(n) % (n // T) < 50, -1, 0)  # each model: 50 user scores, then 50 judged
    raw = np.random.default_rng(0).integers(0, 2, n).astype(float)
    errors = TargetErrors(group=group, raw=raw, false_pass=np.array([0.2]), false_fail=np.array([0.2]),
                          failed=np.array([300]), passed=np.array([300]), repeats=np.array([0]), disagree=np.array([0.0]))  # fmt: skip
    logged = LoggedFeedback(X=np.zeros((n, 3)), action=action, quality=raw, cost=np.full(n, 0.001),
                            model_names=("a", "b", "c", "d"), propensity=np.full(n, 0.25),
                            target=np.where(group >= 0, (raw - 0.2) / 0.6, raw), target_errors=errors)  # fmt: skip
    assert check_data(logged, {}, RetrainOptions(cold_start_rows=100), first=True)["rows"] == n
    with pytest.raises(RetrainRefused, match=r"a \(100\).*needs 101 \(cold_start_rows\)"):
        check_data(logged, {}, RetrainOptions(cold_start_rows=101), first=True)
    assert check_data(logged, {}, RetrainOptions(cold_start_rows=101), first=False)["rows"] == n  # a router is active


@pytest.mark.slow
def test_imported_logs_without_propensities_train_a_router(tmp_path, world):
    """Historical logs (no propensities) go in through import-logs; retrain estimates the propensity."""
    import pandas as pd

    from regret_gateway.importer import import_logs
    from regret_gateway.store.records import StoreInputError

    bench, X = world
    settings = settings_for(tmp_path, bench)
    engine = new_engine(settings)
    P = logging_policy(bench)[:1500]
    rng = np.random.default_rng(5)
    actions = np.array([rng.choice(4, p=p) for p in P])
    rows = np.arange(1500)
    df = pd.DataFrame(
        {
            "model": [bench.model_names[a] for a in actions],
            "quality": bench.quality[rows, actions],
            "cost_usd": bench.cost[rows, actions],
            "team": "t",
            **{f"x{j}": X[:1500, j] for j in range(X.shape[1])},
        }
    )
    bad = df.copy()
    bad.loc[7, "cost_usd"] = float("nan")
    bad.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(StoreInputError, match="row 9: cost and quality must not be NaN"):
        import_logs(tmp_path / "bad.csv", settings, engine)
    df.to_parquet(tmp_path / "history.parquet")
    assert import_logs(tmp_path / "history.parquet", settings, engine) == 1500
    assert import_logs(tmp_path / "history.parquet", settings, engine) == 0  # idempotent
    # one fit is enough to show that imported rows train a router (the cross-fitted path is the same per fold)
    result = retrain(settings, engine, RetrainOptions(n_boot=100, cross_fit=False))
    assert result.status == "published", result.reason
    assert result.data["propensity"].startswith("estimated (XGBoost)")
    # the gateway's own rows join them: each row keeps what is known of it -- the logged rows their exact
    # propensity (and their overlap is checked), the imported ones an estimate of the history's policy
    uniform = np.full(len(X) - 1500, 1 / len(bench.model_names))
    logged_actions = rng.integers(len(bench.model_names), size=len(X) - 1500)
    log_to_store(engine, bench.subset(np.arange(1500, len(X))), X[1500:],
                 actions=logged_actions, propensity=uniform, prefix="g")  # fmt: skip
    mixed = retrain(settings, engine, RetrainOptions(n_boot=100, cross_fit=False, force=True))
    assert mixed.status == "published", mixed.reason
    assert mixed.data["propensity"] == "logged; estimated (XGBoost) for the 1500 imported rows"
    assert mixed.data["propensity_imported_rows"] == 1500 and mixed.data["min_propensity"] == pytest.approx(0.25)
    engine.dispose()


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("fmt", [1, 2], ids=["format-1 torch weights", "format-2 tiers by lambda"])
def test_an_unreadable_active_router_is_replaced_not_kept(tmp_path, world, fmt):
    """The upgrade path: ACTIVE names a router this version cannot read (a format-1 bundle of torch weights, or
    a format-2 one whose tiers were lambdas). retrain says so in its report, in one line, and publishes a
    readable one, as if no tier served anything yet."""
    bench, X = world
    settings = settings_for(tmp_path, bench)
    engine = new_engine(settings)
    rng = np.random.default_rng(1)
    actions = rng.integers(len(bench.model_names), size=len(X))
    log_to_store(engine, bench, X, actions=actions, propensity=np.full(len(X), 1 / len(bench.model_names)))
    old = tmp_path / "artifacts" / "v-old"
    old.mkdir(parents=True)
    (old / "weights.pt").write_bytes(b"torch weights")
    (old / "manifest.json").write_text(json.dumps({"format": fmt, "version": "v-old", "model_names": list(bench.model_names),
                                                   "tiers": {}, "embedder": {}, "files": {}}))  # fmt: skip
    (tmp_path / "artifacts" / "ACTIVE").write_text("v-old\n")

    result = retrain(settings, engine, RetrainOptions(n_boot=50, cross_fit=False))
    assert result.status == "published" and result.active_before == "v-old", result.reason
    why = result.data["active_unreadable"]
    assert f"format-{fmt} router" in why and "run `regret-gateway retrain`" in why and "\n" not in why
    assert active_version_id(settings.artifacts_dir) == result.version != "v-old"
    from regret_gateway.artifacts import load_artifact

    assert load_artifact(tmp_path / "artifacts" / result.version).version == result.version


def test_with_the_prompts_size_retrain_publishes_the_priced_router_where_it_pays(tmp_path):
    """`embedder.size_feature`: the store's rows end with the prompt's size; `dear` (right 90%, $20 per
    million prompt tokens) and `cheap` (60%, $1), logged uniformly. At lambda 10 the priced router (long
    prompts to `cheap`) is proven better than either fixed choice and published; at lambda 0 `dear` is."""
    from regret_gateway.artifacts import load_artifact
    from regret_gateway.context import SizeFeature

    rng = np.random.default_rng(0)
    n = 1500
    tokens = np.exp(rng.uniform(np.log(100), np.log(50_000), size=n))
    X = SizeFeature().append(rng.normal(size=(n, 8)).astype(np.float32) / 3, tokens)
    settings = Settings(models=("dear", "cheap"), tiers={"premium": TierSpec(lam=0.0), "economy": TierSpec(lam=10.0)},
                        default_tier="economy", artifacts_dir=str(tmp_path / "artifacts"),
                        store=StoreSpec(url=f"sqlite:///{tmp_path}/gw.db"), embedder={"size_feature": True})  # fmt: skip
    engine = new_engine(settings)
    actions = rng.integers(0, 2, n)
    right = rng.random(n) < np.where(actions == 0, 0.9, 0.6)
    with Session(engine) as s, s.begin():
        record_decisions(s, [DecisionRecord(request_id=f"s{i}", tier="economy", lam=10.0, embedding_model=settings.embedder.embedding_id,
                                            embedding=X[i], chosen_model=("dear", "cheap")[a], propensity=0.5,
                                            outcome=OutcomeRecord(f"s{i}", cost_usd=float(tokens[i] * (20e-6, 1e-6)[a])))
                             for i, a in enumerate(actions)])  # fmt: skip
        record_feedback(s, [FeedbackRecord(f"s{i}", float(right[i])) for i in range(n)])
    result = retrain(settings, engine, RetrainOptions(n_boot=300))
    assert result.status == "published", result.reason
    served = {row.tier: row.served for row in result.tiers}
    assert served["economy"] == "priced" and served["premium"] == "constant:dear", result.reason
    artifact = load_artifact(tmp_path / "artifacts" / str(result.version))
    sized = SizeFeature().append(np.zeros((2, 8), dtype=np.float32), [300, 30_000])
    assert artifact.router.choose("economy", sized).tolist() == [0, 1]  # a short prompt to `dear`, a long one to `cheap`
    engine.dispose()


@pytest.mark.slow
def test_with_an_app_key_retrain_departs_per_app_where_the_logs_prove_it_and_a_new_app_gets_the_baseline(tmp_path):
    """`embedder.context: "{tags}"` (the app as a key): six apps logged uniformly between `a` and `b`; `a` is
    better in four, `b` in two. The safe default serves `a` and departs to `b` for exactly those two apps'
    keys; an app the logs never held is served `a`."""
    from regret_gateway.artifacts import load_artifact
    from regret_gateway.context import ContextCode

    rng = np.random.default_rng(1)
    apps = [f"app-{k}" for k in range(6)]
    n = 300 * len(apps)
    app = np.repeat(np.arange(len(apps)), 300)
    code = ContextCode("{tags}")
    X = code.append(rng.normal(size=(n, 8)).astype(np.float32) / 3, [{"tags": [apps[k]]} for k in app])
    settings = Settings(models=("a", "b"), tiers={"standard": TierSpec(lam=0.0)}, default_tier="standard",
                        artifacts_dir=str(tmp_path / "artifacts"), store=StoreSpec(url=f"sqlite:///{tmp_path}/gw.db"),
                        embedder={"context": "{tags}"})  # fmt: skip
    engine = new_engine(settings)
    actions = rng.integers(0, 2, n)
    b_better = app >= 4
    p_right = np.where(actions == 0, np.where(b_better, 0.4, 0.8), np.where(b_better, 0.85, 0.5))
    right = rng.random(n) < p_right
    with Session(engine) as s, s.begin():
        record_decisions(s, [DecisionRecord(request_id=f"r{i}", tier="standard", lam=0.0, embedding_model=settings.embedder.embedding_id,
                                            embedding=X[i], chosen_model=("a", "b")[a], propensity=0.5,
                                            outcome=OutcomeRecord(f"r{i}", cost_usd=1e-4))
                             for i, a in enumerate(actions)])  # fmt: skip
        record_feedback(s, [FeedbackRecord(f"r{i}", float(right[i])) for i in range(n)])
    result = retrain(settings, engine, RetrainOptions(n_boot=300))
    assert result.status == "published", result.reason
    artifact = load_artifact(tmp_path / "artifacts" / str(result.version))
    assert result.tiers[0].served.startswith("regions"), result.reason
    assert np.array_equal(artifact.router.choose("standard", X), b_better.astype(int))  # each app to its better model
    new_app = code.append(rng.normal(size=(50, 8)).astype(np.float32) / 3, [{"tags": ["a new app"]}] * 50)
    assert (artifact.router.choose("standard", new_app) == 0).all()
    engine.dispose()


@pytest.mark.slow
def test_each_tier_is_valued_on_the_apps_its_own_requests_come_from(tmp_path):
    """A platform's teams each send their own apps: tier `chat` only the chat app's requests (`a` answers them
    better), tier `code` only the code app's (`b` better there, and better on the two together). Valued on
    everyone's requests both tiers would serve `b`; each valued on its own apps' requests, `chat` serves `a`."""
    rng = np.random.default_rng(2)
    n = 600
    settings = Settings(models=("a", "b"), tiers={"chat": TierSpec(lam=0.0), "code": TierSpec(lam=1.0)},
                        default_tier="chat", artifacts_dir=str(tmp_path / "artifacts"),
                        store=StoreSpec(url=f"sqlite:///{tmp_path}/gw.db"))  # fmt: skip
    engine = new_engine(settings)
    good = {"chat": (0.8, 0.5), "code": (0.35, 0.9)}  # each app's chance of a good answer from a and from b
    for app, (p_a, p_b) in good.items():
        actions = rng.integers(0, 2, n)
        right = rng.random(n) < np.where(actions == 0, p_a, p_b)
        X = rng.normal(size=(n, 8)).astype(np.float32)  # nothing in the prompt tells the apps apart
        with Session(engine) as s, s.begin():
            record_decisions(s, [DecisionRecord(request_id=f"{app}{i}", tier=app, lam=settings.tiers[app].lam, team=f"team-{app}", app=app,
                                                embedding_model=settings.embedder.embedding_id, embedding=X[i],
                                                chosen_model=("a", "b")[a], propensity=0.5, mode="cold_start",
                                                outcome=OutcomeRecord(f"{app}{i}", cost_usd=1e-4))
                                 for i, a in enumerate(actions)])  # fmt: skip
            record_feedback(s, [FeedbackRecord(f"{app}{i}", float(right[i])) for i in range(n)])
    result = retrain(settings, engine, RetrainOptions(n_boot=300, regions=False))
    engine.dispose()
    assert result.status == "published", result.reason
    served = {row.tier: row for row in result.tiers}
    assert served["chat"].served == "constant:a" and served["code"].served == "constant:b", result.reason
    assert served["chat"].new.n == served["code"].new.n == n  # each valued on its own apps' rows only


def _teams_log(engine, bench, X, rng, teams: dict[str, tuple[int, str | None]]) -> None:
    """Each team's requests (``n`` each) logged uniformly on tier standard; its users score them honestly, or
    -- the probe's attack, with ``promote`` a model -- 1.0 for that model's answers and 0 for the rest."""
    n_models, start = len(bench.model_names), 0
    for team, (n, promote) in teams.items():
        rows = np.arange(start, start + n)
        start += n
        actions = rng.integers(0, n_models, n)
        records = [DecisionRecord(f"{team}-{i}", "standard", 200.0, EmbedderSpec().embedding_id, X[i], bench.model_names[a],
                                  1.0 / n_models, team=team, outcome=OutcomeRecord(f"{team}-{i}", float(bench.cost[i, a])))
                   for i, a in zip(rows, actions)]  # fmt: skip
        scores = [
            float(bench.model_names[a] == promote) if promote else float(bench.quality[i, a]) for i, a in zip(rows, actions)
        ]
        with Session(engine) as s, s.begin():
            record_decisions(s, records)
            record_feedback(s, [FeedbackRecord(f"{team}-{i}", q) for i, q in zip(rows, scores)])


@pytest.mark.slow
def test_one_teams_scores_cannot_move_a_tier_other_teams_use_while_honest_scores_still_teach(tmp_path, world):
    """The probe's attack: a team scores its own requests 1.0 where the worst model answered and 0 elsewhere.
    Trusting every score (today's pooling), the premium tier -- which the honest teams use too -- serves that
    model; with the trust checks and a reference team the attacker is flagged, left out, and premium serves
    what the honest teams' scores alone choose: the best model. Two such teams against one honest team and
    no reference: no count decides, none of their scores train, and nothing is published."""
    bench, X = world
    X = X[np.random.default_rng(9).permutation(len(X))]  # outcomes that do not depend on the prompt: tiers serve constants
    rows = slice(0, 1400)
    truth = bench.quality[rows].mean(0)
    best, worst = bench.model_names[int(np.argmax(truth))], bench.model_names[int(np.argmin(truth))]
    served, results = {}, {}
    arms = {"pooled": ({"check_agreement": False, "max_team_share": 1.0}, {"x": (600, worst)}),
            "trusted": ({"reference": ["h1"]}, {"x": (600, worst)}), "honest": ({"reference": ["h1"]}, {}),
            "coalition": ({}, {"x1": (300, worst), "x2": (300, worst)})}  # fmt: skip
    for arm, (trust, attackers) in arms.items():
        folder = tmp_path / arm
        folder.mkdir()
        settings = settings_for(folder, bench).model_copy(update={"trust": Settings.model_validate({"trust": trust}).trust})
        engine = new_engine(settings)
        _teams_log(engine, bench, X, np.random.default_rng(11), {"h1": (400, None), "h2": (400, None)} | attackers)
        results[arm] = retrain(settings, engine, RetrainOptions(n_boot=300, cross_fit=False, regions=False))
        engine.dispose()
        if arm != "coalition":
            assert results[arm].status == "published", results[arm].reason
            served[arm] = {row.tier: row.served for row in results[arm].tiers}["premium"]
    trust = results["trusted"].data["trust"]
    assert any(line.startswith("team x: 600 user scores, 0 train (flagged") for line in trust), trust
    assert all("team h" not in line or "trusted" in line or "reference" in line for line in trust)
    assert served["pooled"] == f"constant:{worst}", served  # the attack works where every score is trusted
    assert served["trusted"] == served["honest"] == f"constant:{best}", served
    coalition = results["coalition"]
    assert coalition.status == "refused" and "trust check" in coalition.reason, coalition.reason
    assert all("disputed" in line for line in coalition.data["trust"]), coalition.data["trust"]


def test_no_name_the_package_loads_on_first_use_is_a_module_s_name():
    """A module once imported is the package's attribute of its name, so a lazy name equal to it would be the
    function or the module depending on what ran before (``from regret_gateway.retrain import publish``)."""
    import pkgutil

    import regret_gateway.retrain as package

    assert not {m.name for m in pkgutil.iter_modules(package.__path__)} & set(package.__all__)
