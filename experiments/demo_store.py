"""A demo's store as it stood at one retrain, for the dev studies that re-run retrain on it
(claims_cause_dev.py, keys_cause_dev.py): the demo's world, its settings and engine, the retrain's read of
the logs up to the end of that round, and each read row's prompt in the world."""

import sys
from pathlib import Path

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from regret_gateway.bench.demo.world import DemoConfig, prepare
from regret_gateway.config.settings import load_settings
from regret_gateway.retrain.options import RetrainOptions
from regret_gateway.retrain.pipeline import read_training_set
from regret_gateway.store.engine import make_engine
from regret_gateway.store.schema import Decision


def store_at(work: Path, rnd: int, cfg: DemoConfig):
    """(world, settings, engine, training set, each row's prompt (-1: none)) of the demo in ``work`` as it stood
    at the retrain after round ``rnd`` (0 = the first): the logs up to the first decision of the next round."""
    world = prepare(cfg, work, lambda line: print(line, file=sys.stderr))
    settings = load_settings(work / "config.yaml")
    engine = make_engine(settings.store.url)
    with Session(engine) as s:
        times = s.scalars(select(Decision.created_at).order_by(Decision.created_at)).all()
    per_round = len(times) // (len(list((work / "reports").glob("retrain-*.json"))) + 1)
    until = times[(rnd + 1) * per_round]  # the first decision of the next round (exclusive)
    ts = read_training_set(settings, engine, RetrainOptions(seed=cfg.seed, until=until, n_boot=200))
    d = world.X.shape[1]
    key = {world.X[i].tobytes(): i for i in range(len(world.X))}
    prompt = np.array([key.get(np.ascontiguousarray(x[:d]).tobytes(), -1) for x in ts.logged.X])
    print(f"{ts.logged.n_samples} rows, {np.mean(prompt >= 0):.1%} mapped to prompts", file=sys.stderr)
    return world, settings, engine, ts, prompt
