"""``regret-gateway import-logs``: historical request logs (no propensities) into the store, so a team
can start from what it already has.

Columns (CSV, CSV.gz, Parquet or JSON lines): ``model``, ``quality`` in [0, 1], ``cost_usd`` >= 0, and
either ``prompt`` (embedded with the configured embedder, inside its context template: the columns
``team``, ``tier``, ``tags``, ``user``, ``dataset`` fill it where present) or ``x0..x{d-1}`` (embeddings
already computed that way; with `embedder.context` set, the code of each row's context is appended to either); optional ``request_id``, ``created_at``, ``team``, ``tier``, ``lam``, ``propensity``. Rows are
stored as decisions of mode ``imported`` with their outcome and a feedback score (source ``import``).
Every row is checked before anything is written: one bad row refuses the file, naming the row.
"""

from __future__ import annotations

import hashlib
import math
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from regret_gateway.config import Settings
from regret_gateway.context import render
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord, StoreInputError, prompt_hash
from regret_gateway.tables import read_frame, table_format
from regret_gateway.tokens import count_tokens

REQUIRED = ("model", "quality")


def _present(value):
    """A cell's value, or None where the table has none (NaN)."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def read_logs(path: str | Path, settings: Settings, encode=None) -> list[tuple[DecisionRecord, FeedbackRecord]]:
    """Validated (decision with outcome, quality score) pairs of a historical log file (``encode``:
    texts -> (n, d) embeddings)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"log file not found: {path}")
    try:
        table_format(path, allowed=("csv", "parquet", "jsonl"))
    except ValueError as exc:
        raise StoreInputError(f"{path}: {exc}") from None
    df = read_frame(path)
    cost_col = "cost_usd" if "cost_usd" in df.columns else "cost"
    missing = [c for c in (*REQUIRED, cost_col) if c not in df.columns]
    xcols = [c for c in df.columns if c.startswith("x") and c[1:].isdigit()]
    if missing or ("prompt" not in df.columns and not xcols):
        raise StoreInputError(
            f"{path}: needs columns model, quality, cost_usd and prompt (or x0..x{{d-1}}); missing {missing or ['prompt']}"
        )
    unknown = sorted(set(df["model"].astype(str)) - set(settings.models)) if settings.models else []
    if unknown:
        raise StoreInputError(f"{path}: models not in the configured `models` {list(settings.models)}: {unknown}")
    tier = settings.default_tier
    fields = [c for c in ("team", "tags", "user", "dataset") if c in df.columns]
    contexts = [
        {"tier": _present(row.get("tier")) or tier, **{c: _present(row.get(c)) for c in fields}} for row in df.to_dict("records")
    ]
    if xcols:
        X = df[sorted(xcols, key=lambda c: int(c[1:]))].to_numpy(np.float32)
    else:
        texts = [render(settings.embedder.template, str(p), c) for p, c in zip(df["prompt"], contexts)]
        X = np.asarray(encode(texts), dtype=np.float32)
    if (code := settings.embedder.context_code) is not None:  # the gateway's features: embedding + context code
        X = code.append(X, contexts)
    if (size := settings.embedder.size) is not None:  # + the prompt's size
        if "prompt" not in df.columns:
            raise StoreInputError(f"{path}: embedder.size_feature counts each prompt's tokens: the file needs a prompt column")
        X = size.append(X, count_tokens([str(p) for p in df["prompt"]]))
    records = []
    key = settings.prompt_hash_key()
    for i, row in enumerate(df.to_dict("records")):
        line = i + 2 if table_format(path) == "csv" else i + 1
        try:
            rid = str(row.get("request_id") or "imp-" + hashlib.sha256(f"{path.name}:{i}".encode()).hexdigest()[:24])
            cost, quality = float(row[cost_col]), float(row["quality"])
            if math.isnan(cost) or math.isnan(quality):
                raise StoreInputError("cost and quality must not be NaN")
            created = row.get("created_at")
            created = datetime.fromisoformat(str(created)) if created is not None and str(created) not in ("", "nan") else None
            tier_name = str(row.get("tier") or tier)
            lam = row.get("lam")
            lam = (
                float(lam)
                if lam is not None and not (isinstance(lam, float) and math.isnan(lam))
                else settings.tiers.get(tier_name, settings.tiers[tier]).lam
            )
            p = row.get("propensity")
            p = None if p is None or (isinstance(p, float) and math.isnan(p)) else float(p)
            text = str(row.get("prompt", ""))
            records.append(
                (
                    DecisionRecord(
                        request_id=rid,
                        tier=tier_name,
                        lam=lam,
                        embedding_model=settings.embedder.embedding_id,
                        embedding=X[i],
                        chosen_model=str(row["model"]),
                        propensity=p,
                        mode="imported",
                        team=None if row.get("team") is None else str(row["team"]),
                        prompt_hash=prompt_hash(text, key) if text else "",
                        created_at=created or datetime.now(timezone.utc),
                        outcome=OutcomeRecord(rid, cost_usd=cost),
                    ),
                    FeedbackRecord(rid, quality, source="import"),
                )
            )
        except (StoreInputError, ValueError, TypeError, KeyError) as exc:
            raise StoreInputError(f"{path} row {line}: {exc}") from None
    return records


def import_logs(path: str | Path, settings: Settings, engine, encode=None) -> int:
    """Read, validate and store a historical log file in one transaction. Returns the rows imported."""
    from sqlalchemy.orm import Session

    from regret_gateway.store.writes import record_decisions, record_feedback

    pairs = read_logs(path, settings, encode)
    with Session(engine) as session, session.begin():
        n = record_decisions(session, [d for d, _ in pairs])
        record_feedback(session, [f for _, f in pairs])
    return n
