import numpy as np
import pytest

from regret_gateway.data import FullFeedback, LoggedFeedback


def logs(**overrides):
    base = dict(
        X=np.zeros((4, 2)),
        action=[0, 1, 0, 1],
        quality=[1, 0, 1, 1],
        cost=[0.1, 0.2, 0.1, 0.2],
        model_names=("a", "b"),
        propensity=[0.5, 0.5, 0.5, 0.5],
    )
    base.update(overrides)
    return LoggedFeedback(**base)


def test_valid_logs_are_frozen():
    lf = logs()
    assert lf.n_samples == 4 and lf.n_models == 2
    assert lf.counts().tolist() == [2, 2]
    with pytest.raises(ValueError):
        lf.quality[0] = 0.5


def test_a_subset_holds_the_rows_asked_for_frozen_with_the_same_types():
    lf = logs(X=np.arange(8, dtype=np.float64).reshape(4, 2), lam=[0.0, 1.0, 2.0, 3.0])
    part = lf.subset(np.array([3, 1]))
    assert part.X.dtype == np.float32 and part.X.tolist() == [[6, 7], [2, 3]]
    assert part.action.tolist() == [1, 1] and part.quality.tolist() == [1, 0] and part.lam.tolist() == [3.0, 1.0]
    assert part.propensity.tolist() == [0.5, 0.5] and part.model_names == ("a", "b")
    with pytest.raises(ValueError):
        part.cost[0] = 1.0
    assert lf.subset(np.array([0])).propensity is not None and logs(propensity=None).subset(np.array([0])).propensity is None


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"propensity": [0.0, 0.5, 0.5, 0.5]}, r"`propensity` must be in \(0, 1\] \(NaN: not logged\), got min=0"),
        ({"propensity": [np.inf, 0.5, 0.5, 0.5]}, r"`propensity` must be finite"),
        ({"propensity": [1.5, 0.5, 0.5, 0.5]}, r"`propensity` must be in \(0, 1\]"),
        ({"cost": [np.nan, 0.2, 0.1, 0.2]}, r"`cost` must be finite"),
        ({"cost": [-1, 0.2, 0.1, 0.2]}, r"`cost` must be in \[0.0, inf\)"),
        ({"quality": [1, 0, 1]}, r"`quality` has 3 rows but `X` has 4"),
        ({"quality": [1, 0, 2, 1]}, r"`quality` must be in \[0.0, 1.0\]"),
        ({"action": [0, 1, 2, 1]}, r"`action` must be in \[0, 1\]"),
        ({"action": [0, 1, 0.5, 1]}, r"`action` must hold integer model indices"),
        ({"model_names": ("a",)}, r"at least 2 models"),
        ({"model_names": ("a", "a")}, r"must be unique"),
        ({"X": np.zeros(4)}, r"`X` must be 2-dimensional"),
    ],
)
def test_bad_logs_are_refused_with_the_rule(overrides, message):
    with pytest.raises(ValueError, match=message):
        logs(**overrides)


def test_model_without_logged_rows_is_named():
    lf = logs(action=[0, 0, 0, 0], model_names=("a", "b"))
    with pytest.raises(ValueError, match=r"too few for: 'b' \(0\)"):
        lf.require_all_models()


def test_full_feedback_shapes_and_utility():
    full = FullFeedback(
        X=np.zeros((2, 3)), quality=[[1, 0], [0, 1]], cost=[[0.001, 0.002], [0.001, 0.002]], model_names=("a", "b")
    )
    assert np.allclose(full.utility(1000.0), [[0.0, -2.0], [-1.0, -1.0]])
    with pytest.raises(ValueError, match="`cost` has 1 columns but there are 2 model names"):
        FullFeedback(X=np.zeros((2, 3)), quality=[[1, 0], [0, 1]], cost=[[0.1], [0.1]], model_names=("a", "b"))
    with pytest.raises(ValueError, match="`quality` must be finite"):
        FullFeedback(X=np.zeros((1, 3)), quality=[[np.nan, 0]], cost=[[0.1, 0.1]], model_names=("a", "b"))
