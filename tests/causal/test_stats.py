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
