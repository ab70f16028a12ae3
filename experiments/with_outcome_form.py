"""Run a `regret-gateway` command with retrain's outcome networks in another form (dev studies): the
production learner of `retrain/fits.py` built with `OutcomeModel(shared=True)` (one trunk for every
model, `causal/outcome.py`) or the per-model networks, whatever the default.

    python experiments/with_outcome_form.py shared|per-model demo --replay ...
"""

import functools
import sys

import regret_gateway.retrain.fits as production
from regret_gateway.cli import app

form, args = sys.argv[1], sys.argv[2:]
if form not in ("shared", "per-model"):
    sys.exit("the first argument is the outcome form: shared or per-model")
production.production_learner = functools.partial(production.production_learner, outcome_options={"shared": form == "shared"})
app(args)
