"""How often a published claim's bound holds the true gain, among the claims published: the plain bound
(estimate - z se, or the bootstrap interval) beside the bound given that the test passed
(regret_gateway.confidence.selective_lower / selective_interval), in one run on the same seeded worlds.

* regions: 12 apps x 150 prompts, three models logged uniformly, unit-noise DR-like scores (the worlds of
  tests/policy/test_regions.py: _published_claims); half the apps gain G with model 1; five folds; the one-sided bound of the
  whole proposal (``total_lower``) against the true gain of what departed;
* the gate (tests/causal/test_ope.py: _replacements): 1,000 rows logged half and half, the challenger truly G better; the two-sided
  interval of a replacement's gain.

    python experiments/selective_claims.py [WORLDS]
"""

import sys
from contextlib import nullcontext
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import regret_gateway.policy.regions as regions_module  # noqa: E402
from regret_gateway.confidence import family_alpha, z_critical  # noqa: E402
from tests.causal.test_ope import _replacements  # noqa: E402
from tests.policy.test_regions import _published_claims  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200


def plain_lower(estimate, se, passed_at, alpha):
    return estimate - z_critical(alpha) * se


def region_claims(g: float, plain: bool) -> tuple[int, int, float]:
    with mock.patch.object(regions_module, "selective_lower", plain_lower) if plain else nullcontext():
        published = _published_claims(g, N)
    bounds = [choice.total_lower for choice, _ in published]
    held = sum(choice.total_lower <= truth for choice, truth in published)
    return len(published), held, float(np.mean(bounds)) if bounds else float("nan")


def gate_claims(g: float) -> tuple[int, int, int]:
    plain_held = given_held = 0
    replaced = _replacements(g, N)
    for seed, sel, data in replaced:
        n = len(data.logged)
        _, ci = data.gain(np.ones(n, int), np.zeros(n, int), 0.0, n_boot=200, alpha=family_alpha(0.05, 1), seed=seed)
        plain_held += ci[0] <= g <= ci[1]
        given_held += sel.gain_ci[0] <= g <= sel.gain_ci[1]
    return len(replaced), plain_held, given_held


print(f"{N} seeded worlds each\n")
print(
    "| test | true gain | claims published | plain bound held | given-passed bound held | mean plain bound | mean given-passed bound |"
)
print("|---|---:|---:|---:|---:|---:|---:|")
for g in (0.03, 0.05, 0.08, 0.15, 0.3):
    c, h_plain, b_plain = region_claims(g, plain=True)
    _, h_given, b_given = region_claims(g, plain=False)
    print(f"| regions (one-sided) | {g:.2f} (half the apps) | {c} | {h_plain} ({h_plain / max(c, 1):.0%}) | "
          f"{h_given} ({h_given / max(c, 1):.0%}) | {b_plain:+.3f} | {b_given:+.3f} |", flush=True)  # fmt: skip
for g in (0.02, 0.04, 0.08):
    c, h_plain, h_given = gate_claims(g)
    print(
        f"| gate (two-sided) | {g:.2f} | {c} | {h_plain} ({h_plain / max(c, 1):.0%}) | {h_given} ({h_given / max(c, 1):.0%}) | | |",
        flush=True,
    )
