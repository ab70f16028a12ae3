"""Could `retrain` train large logs with fewer epochs? One production fit (`policy.production.fit_router`) of
the `bench retrain` synthetic logs, with retrain's mini-batch schedule and with faster ones, side by side:
per network the epochs run and the epoch of each member's best validation score, the fit's seconds, and
which model each tier's RM-Interval policy picks on the rows the fit did not see.

    python experiments/early_stopping_probe.py [ROWS]
"""

import sys
import tempfile
import time

import numpy as np

import regret_gateway.causal.outcome as outcome
import regret_gateway.nn.training as training
import regret_gateway.policy.methods as methods
import regret_gateway.policy.rm_interval as tiers
import regret_gateway.retrain.fits as production
from regret_gateway.bench import retrain_timing as rt
from regret_gateway.config import Settings, StoreSpec
from regret_gateway.nn.training import TrainConfig
from regret_gateway.retrain import RetrainOptions, read_training_set
from regret_gateway.store.engine import make_engine
from regret_gateway.store.migrate import upgrade

SCHEDULES = {
    "retrain (lr 1e-3, patience 5)": None,
    "lr 1e-3, patience 3": TrainConfig(batch_size=1024, max_epochs=40, patience=3),
    "lr 2e-3, patience 3": TrainConfig(lr=2e-3, batch_size=1024, max_epochs=40, patience=3),
}
LAMS = [0.0, 200.0, 1000.0]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    tmp = tempfile.mkdtemp()
    url = f"sqlite:///{tmp}/bench.db"
    upgrade(url)
    engine = make_engine(url)
    rt._fill(engine, n, 384, 0)
    settings = Settings(models=rt.MODELS, tiers=rt.TIERS, default_tier="standard", artifacts_dir=f"{tmp}/a",
                        store=StoreSpec(url=url))  # fmt: skip
    logged = read_training_set(settings, engine, RetrainOptions()).logged
    train, held = logged.subset(np.arange(int(0.8 * n))), logged.subset(np.arange(int(0.8 * n), n))
    log = []

    def recorded(*args, **kwargs):
        result = training.train_members(*args, **kwargs)
        log.append(f"{args[1]} rows: {result.epochs} epochs, best at {result.best_epoch.tolist()}")
        return result

    for module in (outcome, methods, tiers):
        module.train_members = recorded
    reference = production._train_config
    for name, config in SCHEDULES.items():
        production._train_config = (
            reference if config is None else (lambda rows, c=config: c if rows > 5_000 else reference(rows))
        )
        log.clear()
        t0 = time.perf_counter()
        learner = production.fit_router(train, LAMS)
        seconds = time.perf_counter() - t0
        policy = learner.policy_.to_policy()
        picks = {lam: np.bincount(policy.choose(held.X, lam), minlength=len(rt.MODELS)).tolist() for lam in LAMS}
        print(f"## {name}: fit {seconds:.1f} s (outcome networks, tier policies, interval networks)")
        print("\n".join(f"- {line}" for line in log))
        print(f"- picks per λ on {held.n_samples} held-out rows ({', '.join(rt.MODELS)}): {picks}\n", flush=True)


if __name__ == "__main__":
    main()
