"""What a retrain is asked to do (``RetrainOptions``), what it did (``RetrainResult``), and its refusal."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import Enum
from pathlib import Path

from regret_gateway.causal.ope import N_BOOT
from regret_gateway.nn.training import PRECISIONS
from regret_gateway.retrain.executor import EXECUTORS
from regret_gateway.retrain.gate import TierEvaluation
from regret_gateway.sampling import MAX_ROWS


class RetrainRefused(ValueError):
    """The logs cannot support a router (the message says why); nothing was published."""


@dataclass(frozen=True)
class RetrainOptions:
    since: datetime | None = None
    until: datetime | None = None
    team: str | None = None
    feedback: tuple[str, ...] | None = None  # quality sources to learn from, in order (None: all, user first, judge last)
    margin: float = 0.0  # a candidate must beat the incumbent by more than this (lower end of the paired 95% CI)
    force: bool = False
    regions: bool = True  # the safe default departs from the constant where the logs prove it (policy/regions.py)
    folds: int | None = None  # the rows split into this many folds (None: 5, or 2 past 60,000 rows: default_folds)
    cross_fit: bool = True  # every fold held out once (``folds`` fits, every row evaluated); False: the first (one fit)
    calibrate_judge: bool = True  # the judge's scores corrected by its error against user scores (judge/calibration.py)
    # read the window from the Parquet day parts at this folder or URL (store/parts.py) instead of the store
    parts: str | None = None
    max_rows: int | None = MAX_ROWS  # a larger window is sampled down to this many rows (sampling.sample_rows)
    precision: str = "auto"  # the mini-batch fits' products (past 5,000 rows): auto | float32 | bfloat16 (nn.training)
    min_rows: int = 200
    min_rows_per_model: int = 20
    cold_start_rows: int = 0  # before the first router (none active): every model needs this many scored rows (check_data)
    min_ess_per_model: float = 10.0
    n_boot: int = N_BOOT
    seed: int = 0
    executor: str = "local"  # where the cross-fitting folds are fitted: local | ray (retrain/executor.py)
    out: Path | None = None  # report folder (default: the new version's folder, or artifacts/reports)

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {self.executor!r}")
        if self.cold_start_rows < 0:
            raise ValueError(f"cold_start_rows must be >= 0, got {self.cold_start_rows}")


class RetrainStatus(str, Enum):
    """What came of a retrain; its command's exit code."""

    PUBLISHED = "published"  # a tier serves something new (or none was served before)
    KEPT = "kept"  # every tier serves what it served; republished with this retrain's utility estimates
    REFUSED = "refused"  # the logs cannot support a router (the reason says why); nothing published

    def __str__(self) -> str:
        return self.value

    @property
    def exit_code(self) -> int:
        return {"published": 0, "kept": 1, "refused": 2}[self.value]


@dataclass
class RetrainResult:
    status: RetrainStatus
    reason: str
    version: str | None = None
    active_before: str | None = None
    data: dict = field(default_factory=dict)
    tiers: list[TierEvaluation] = field(default_factory=list)
    seconds: dict = field(default_factory=dict)
    report_paths: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)
