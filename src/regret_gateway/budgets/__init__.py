"""Team budgets: the UTC period a budget covers, where a team's spend stands in it, and how the team's
routing is steered so that its spend lands on the budget.

A budget (``teams.<team>.budget`` in the config: ``usd`` per ``day`` | ``week`` | ``month``) covers UTC
calendar periods: a day from 00:00, a week from Monday 00:00, a month from its first day. A team's spend
is what its requests' outcomes cost (the store's ``outcomes.cost_usd``, so every replica sharing the store
sees the same spend); the LLM judge's calls are the platform's, not the team's, and are not counted.

Steering. A budgeted team is routed on a **ladder** (:mod:`regret_gateway.budgets.ladder`): rungs from the dearest
to the cheapest -- the frontier of cost and quality retrain publishes for the team, else the configured
tiers by lambda and then the cheapest model. Its **position** u in [0, top] says where: at u = j + s the
request goes to rung j with probability 1 - s and to rung j + 1 with probability s, so spend moves
smoothly with u, and the logged propensity (the mixture's) stays exact. Every ``interval_s`` the controller (:func:`regret_gateway.budgets.controller.next_position`) compares what the
team's recent requests cost each with what it may spend per request for the rest of the period (the money
left over the requests it expects: the same span of the previous period; for a team new this period, its
requests so far scaled by how the platform's traffic went on in the previous period; else the period's
rate so far) and moves u by GAIN rungs per e-fold of that ratio, at most MAX_STEP rungs a step: an integral controller on
the log cost (dual ascent on the price of a dollar). A spent budget sends the team to the cheapest model;
a new period starts at the previous period's mean position over its requests (the fixed position that
would have spent about as much); the first where the ladder's forecast spends the budget, else at the
team's tier's lambda.

Modules: ``periods`` (a budget's period and the requests expected in the rest of it), ``ladder`` (the rungs
and what a position means), ``controller`` (one step, for every replica sharing the store), ``status`` (where
a team's budget stands: the budget route and ``status``), ``frontier`` (the ladders retrain publishes; it
values candidates off-policy, so it sits with the learning code's layer and the serving path never imports
it). The store holds only the SQL (:mod:`regret_gateway.store.steering`).
"""
