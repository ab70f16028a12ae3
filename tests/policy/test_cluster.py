"""RM-Cluster: where prompts come in tasks with different best models it finds them from logged DR scores
and beats the single best model; where the prompt does not matter it serves the fixed choice; what it
learned survives the artifact round trip."""

import numpy as np

from regret_gateway.causal.estimators import DoublyRobust, Nuisance
from regret_gateway.causal.outcome import OutcomeModel
from regret_gateway.causal.propensity import LoggedPropensity
from regret_gateway.context import ContextCode
from regret_gateway.data import FullFeedback
from regret_gateway.evaluation.offline import evaluate_actions, reference_actions
from regret_gateway.evaluation.simulation import simulate_logs
from regret_gateway.nn.training import TrainConfig
from regret_gateway.policy.cluster import RMCluster, spherical_kmeans
from regret_gateway.policy.learner import fit_training_data
from regret_gateway.servable import from_state, unit_rows

LAMBDAS = [0.0, 100.0, 300.0]


def task_world(n=2400, tasks=6, seed=0, prompt_matters=True) -> FullFeedback:
    """Prompts in ``tasks`` blobs; each task has its own best model among three (one of them expensive)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(tasks, 16)) * 3
    task = rng.integers(tasks, size=n)
    X = (centres[task] + rng.normal(size=(n, 16))).astype(np.float32)
    acc = rng.uniform(0.3, 0.9, size=(tasks, 3)) if prompt_matters else np.tile([0.5, 0.6, 0.7], (tasks, 1))
    quality = (rng.random((n, 3)) < acc[task]).astype(float)
    cost = np.tile([1e-4, 2e-4, 1e-3], (n, 1))
    return FullFeedback(X=X, quality=quality, cost=cost, model_names=("a", "b", "c"), groups=task.astype(str))


def _fit(world: FullFeedback, seed=0):
    train, val, test = (world.subset(np.arange(a, b)) for a, b in ((0, 1600), (1600, 2000), (2000, world.n_samples)))
    logs = simulate_logs(world.subset(np.arange(2000)), policy="uniform", seed=seed)
    nuisance = Nuisance(propensity=LoggedPropensity(), outcome=OutcomeModel(train=TrainConfig(max_epochs=50)),
                        estimator=DoublyRobust())  # fmt: skip
    data = fit_training_data(nuisance, logs.subset(np.arange(1600)), logs.subset(np.arange(1600, 2000)))
    return RMCluster(random_state=seed).fit(data, LAMBDAS), train, test


def test_rm_cluster_finds_the_tasks_and_beats_the_single_best_model():
    router, train, test = _fit(task_world())
    learned = evaluate_actions(test, LAMBDAS, router.predict(test.X, LAMBDAS))["utility"]
    single = evaluate_actions(test, LAMBDAS, reference_actions("single-best", train, test, LAMBDAS))["utility"]
    oracle_task = []
    for lam in LAMBDAS:  # the best model per task, chosen with every outcome known: what routing by task can reach
        Y = train.utility(lam)
        best = {g: int(np.argmax(Y[train.groups == g].mean(0))) for g in set(train.groups.tolist())}
        oracle_task.append(np.array([best[g] for g in test.groups]))
    per_task = evaluate_actions(test, LAMBDAS, np.stack(oracle_task))["utility"]
    assert per_task.mean() > single.mean() + 3  # the world rewards routing by task
    assert router.k_ > 1
    # from uniform logs of 1,600 prompts it closes most of the gap between the single best model and
    # the best model per task (chosen with every outcome known)
    assert learned.mean() - single.mean() > 0.6 * (per_task.mean() - single.mean()), (learned, single, per_task)


def test_where_the_prompt_does_not_matter_rm_cluster_is_one_model():
    router, train, test = _fit(task_world(prompt_matters=False, seed=1), seed=1)
    for actions in router.predict(test.X, LAMBDAS):
        assert len(set(actions.tolist())) == 1


def test_the_served_policy_routes_exactly_as_fitted_after_a_round_trip():
    router, _, test = _fit(task_world(seed=2), seed=2)
    served = from_state(router.to_policy().state())
    for lam in (0.0, 55.0, 300.0, 1e4):  # any lambda, not only the fitted ones
        assert np.array_equal(served.choose(test.X, lam), router.to_policy().choose(test.X, lam))


def test_spherical_kmeans_separates_clear_directions():
    rng = np.random.default_rng(0)
    directions = unit_rows(rng.normal(size=(4, 32)))
    Z = unit_rows(np.repeat(directions, 50, axis=0) + 0.05 * rng.normal(size=(200, 32)))
    C = spherical_kmeans(Z, 4, seed=0)
    labels = np.argmax(Z @ C.T, axis=1).reshape(4, 50)
    assert all(len(set(row.tolist())) == 1 for row in labels) and len({row[0] for row in labels}) == 4


def test_spherical_kmeans_on_a_sample_of_a_large_log_still_separates_every_row():
    """Beyond ``sample`` rows the centroids come from a seeded sample; every row, sampled or not, is
    assigned by them, and the clusters are as clear as when fitted on all rows."""
    rng = np.random.default_rng(1)
    directions = unit_rows(rng.normal(size=(5, 32)))
    Z = unit_rows(np.repeat(directions, 400, axis=0) + 0.05 * rng.normal(size=(2000, 32)))
    C = spherical_kmeans(Z, 5, seed=0, sample=300)
    labels = np.argmax(Z @ C.T, axis=1).reshape(5, 400)
    assert all(len(set(row.tolist())) == 1 for row in labels) and len({row[0] for row in labels}) == 5
    assert np.allclose(np.linalg.norm(C, axis=1), 1.0) and C.dtype == np.float64


def test_cluster_sums_are_the_per_cluster_row_sums():
    from regret_gateway.policy.cluster import cluster_sums

    rng = np.random.default_rng(0)
    values, cluster = rng.normal(size=(300, 7)), rng.integers(5, size=300)
    cluster[cluster == 3] = 4  # cluster 3 is empty: its sum is 0
    expected = np.stack([values[cluster == c].sum(0) for c in range(6)])
    assert np.allclose(cluster_sums(values, cluster, 6), expected)


def test_shrinkage_keeps_a_clear_cluster_and_pulls_a_noisy_one_home():
    from regret_gateway.policy.cluster import shrunk_means

    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(0.0, 0.1, 500), rng.normal(1.0, 0.1, 500), rng.normal(0.5, 3.0, 3)])[:, None]
    cluster = np.repeat([0, 1, 2], [500, 500, 3])
    means = shrunk_means(values, cluster, 4)[:, 0]
    overall = values.mean()
    assert abs(means[0] - 0.0) < 0.02 and abs(means[1] - 1.0) < 0.02  # big, clearly apart: kept
    assert abs(means[2] - overall) < 0.5 * abs(values[cluster == 2].mean() - overall)  # 3 noisy rows: pulled home
    assert means[3] == overall  # empty: the global mean


def test_where_only_the_requests_context_tells_the_tasks_apart_its_code_lets_rm_cluster_win():
    """Tasks whose prompts look alike (the embedding is noise) but whose best models differ: from the prompt
    alone RM-Cluster can only serve the fixed choice; with the code of each request's context (its task, as
    a team's tags would name it) appended to the embedding it finds the tasks and beats the single best
    model -- what `embedder.context` is for."""
    world = task_world(seed=3)
    noise = unit_rows(np.random.default_rng(3).normal(size=world.X.shape)).astype(np.float32)  # unit, as the embedder's
    contexts = [{"tags": [g]} for g in world.groups]
    results = {}
    for name, X in (("prompt", noise), ("context", ContextCode("{tags}").append(noise, contexts))):
        w = FullFeedback(X=X, quality=world.quality, cost=world.cost, model_names=world.model_names, groups=world.groups)
        router, train, test = _fit(w)
        util = evaluate_actions(test, LAMBDAS, router.predict(test.X, LAMBDAS))["utility"]
        single = evaluate_actions(test, LAMBDAS, reference_actions("single-best", train, test, LAMBDAS))["utility"]
        results[name] = float(np.mean(util - single))
        per_task = []
        for lam in LAMBDAS:  # the best model per task, chosen with every outcome known
            Y = train.utility(lam)
            best = {g: int(np.argmax(Y[train.groups == g].mean(0))) for g in set(train.groups.tolist())}
            per_task.append(np.array([best[g] for g in test.groups]))
        gap = float(np.mean(evaluate_actions(test, LAMBDAS, np.stack(per_task))["utility"] - single))
    assert gap > 3.0, gap  # the world rewards routing by task
    assert results["prompt"] < 0.2 * gap, (results, gap)  # nothing to learn from the prompt
    assert results["context"] > 0.5 * gap, (results, gap)
