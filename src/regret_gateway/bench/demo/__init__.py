"""The closed loop (``regret-gateway demo``): the gateway learns from its own logs, round after round.

A full-feedback world (the generated default, or any RouterBench-layout file) is served by a local mock
upstream that answers each prompt with that model's recorded response and a token count that makes
LiteLLM's cost equal to the recorded cost. The LiteLLM proxy with the hook runs beside it. Each round,
three teams on three tiers send prompts through the OpenAI SDK; the recorded correctness of each answer
is posted as feedback; between rounds ``retrain`` runs and the gateway hot-swaps the new
router. Per round and tier the gateway's realised utility is compared on the same prompts with
always-cheapest, always-best-single-model (chosen on the train split with full feedback), uniform random
(expected value), LiteLLM's own adaptive router (``AdaptiveRouter``, Thompson sampling per request type,
fed the same correctness as reward, cost weight matched to the tier's lambda) and the full-information
references trained on the train split's true outcomes (``full-feedback``, the paper's; ``full-info``, the
better per lambda on the val split of Full-Feedback and the same network regressing the true utilities: the
ceiling). ``gateway`` is what the teams got
(exploration included); ``gateway-greedy`` is the router's own choice on the same requests (the
served router's choice without exploration), i.e. the price of exploration is the gap between the two.
Each team posts its round's scores in batches (``POST /regret/feedback/batch``) and audits one request.

A seeded share of the traffic prompts (``held_out``, 20%) is never sent: after every round the greedy
choices of the router that served it are scored on them (``held-out greedy``), beside the best single
model and the best full-information router on the same prompts -- what the logs taught about prompts the
router never saw, where ``gateway-greedy`` also counts prompts it was trained on.

Modules: ``world`` (configuration, data, mock answers), ``references`` (LiteLLM's adaptive router, the
full-information routers), ``traffic`` (the teams, over HTTP or replayed), ``loop`` (rounds, scoring, retrain),
``report`` (table, verdict, plot)."""

from __future__ import annotations

from regret_gateway.bench.demo.loop import run_demo
from regret_gateway.bench.demo.report import BASELINES, HELD_OUT, RoundStats
from regret_gateway.bench.demo.world import DemoConfig

__all__ = ["BASELINES", "HELD_OUT", "DemoConfig", "RoundStats", "run_demo"]
