"""Cross-fitting's splits (causal/stats.py): every fit is scored on rows, and prompts, it never saw."""

import numpy as np
import pytest

from regret_gateway.causal import stats
from regret_gateway.causal.stats import cross_fit_splits


def test_each_split_fits_on_every_other_fold_and_never_splits_a_prompt():
    groups = np.repeat(np.arange(40), 3)[np.random.default_rng(0).permutation(120)]
    splits = cross_fit_splits(120, 5, seed=2, groups=groups)
    assert len(splits) == 5
    held_all = np.concatenate([held for held, _ in splits])
    assert sorted(held_all.tolist()) == list(range(120))  # every row scored once
    for held, rest in splits:
        assert np.array_equal(np.sort(np.concatenate([held, rest])), np.arange(120))
        assert not set(groups[held]) & set(groups[rest])  # no prompt on both sides


@pytest.mark.parametrize("broken", ["overlap", "split_prompt"])
def test_folds_that_share_a_row_or_a_prompt_are_refused(monkeypatch, broken):
    groups = np.repeat(np.arange(10), 2)

    def bad_folds(n, k, seed, groups=None):
        if broken == "overlap":
            return [np.arange(0, 12), np.arange(10, 20)]
        return [np.arange(0, 11), np.arange(11, 20)]  # rows 10 and 11 are one prompt

    monkeypatch.setattr(stats, "folds_of", bad_folds)
    with pytest.raises(RuntimeError, match="folds"):
        cross_fit_splits(20, 2, seed=0, groups=groups)


def test_a_nuisance_model_s_copy_for_a_fold_keeps_every_setting_and_takes_the_fold_s_seed():
    """Cross-fitting fits one model per fold from the same settings (causal/reseed.py): every constructor
    setting is copied (a new one too, without a hand-written list), the seed is the fold's, the copy is
    unfitted; a model that keeps no attribute for a setting is refused, not copied with a default."""
    from regret_gateway.causal.outcome import OutcomeModel
    from regret_gateway.causal.propensity import PropensityModel
    from regret_gateway.causal.reseed import Reseedable
    from regret_gateway.nn.training import TrainConfig

    outcome = OutcomeModel(hidden=(8,), train=TrainConfig(max_epochs=3), val_fraction=0.3, random_state=1,
                           shared=True, shrink=0.5, judge_error=True)  # fmt: skip
    copy = outcome.with_seed(7)
    assert copy is not outcome and copy.random_state == 7
    assert (copy.hidden, copy.train, copy.val_fraction, copy.shared, copy.shrink, copy.judge_error) == (
        (8,), TrainConfig(max_epochs=3), 0.3, True, 0.5, True)  # fmt: skip
    propensity = PropensityModel(max_depths=(2,), n_estimators=(5, 3), floor=0.01, patience=4, n_jobs=1)
    again = propensity.with_seed(9)
    assert again.random_state == 9 and vars(again) == vars(propensity) | {"random_state": 9}

    class Forgetful(Reseedable):
        def __init__(self, *, width: int = 1, random_state: int = 0) -> None:
            self.random_state = random_state

    with pytest.raises(TypeError, match="width"):
        Forgetful(width=3).with_seed(1)
