"""Which rows a sample keeps, decided by a hash of each request id and nothing else: retrain's window past
:data:`MAX_ROWS` (:mod:`regret_gateway.trainset.window`), the offline bench's ``served`` row (the same sample on
simulated logs) and the trust check's cap (:mod:`regret_gateway.trust`). Numpy only."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

# The rows retrain's fits read at most. Past 100,000 the learning curve still climbs on MMLU-Pro (every one of
# 191,220 logged rows against 100,000 of them: +0.42 points, 3 of 3 trials) and is flat on LLMRouter and
# RouterBench (docs/experiments/learning-curve.md); a cross-fitted retrain of 200,000 rows peaks at 3.2 GB
# (1.8 GB at 100,000; docs/experiments/retrain-time.md). A larger window is sampled.
MAX_ROWS = 200_000


def request_id_keys(ids) -> np.ndarray:
    """(n,) uint64: a hash of each request id -- the order in which a sample keeps rows without reading
    anything about them (the cap here, the store's window sample)."""
    return np.array([int.from_bytes(hashlib.blake2b(r.encode(), digest_size=8).digest(), "little") for r in ids],
                    dtype=np.uint64)  # fmt: skip


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
