"""Full-feedback benchmark loaders: RouterBench's layout (any file in it) and SPROUT's published layout.

RouterBench layout (the published pickle, or CSV / CSV.gz / Parquet with the same columns):
``sample_id``, ``prompt`` (often a string holding a Python list of turns), ``eval_name``, one 0/1
column per model, and ``<model>|total_cost`` in US dollars. A model is every column ``m`` for which
``m|total_cost`` exists. Rows with a missing quality or cost for any model are dropped and counted.

SPROUT layout (``CARROT-LLM-Routing/SPROUT`` on the HF hub, exported as JSONL / JSON / Parquet): a
``prompt`` column and one column per model holding ``{"score", "num_input_tokens",
"num_output_tokens", ...}``. Cost = input tokens x input price + output tokens x output price, with the
list prices below (US dollars per million tokens, as published with SPROUT); pass ``prices`` for others.

A folder is read as the union of its supported files. The split comes from file names (``*_train*``,
``*_val*`` / ``*validation*``, ``*_test*``); files without one get a deterministic prompt-level
80/10/10 split (by a hash of the prompt text, so duplicates stay together).
"""

from __future__ import annotations

import ast
import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from regret_gateway.data import FullFeedback
from regret_gateway.tables import SUFFIXES, read_rows, table_format

SPROUT_PRICES: dict[str, tuple[float, float]] = {
    "aws-claude-3-5-sonnet-v1": (3.0, 15.0),
    "aws-titan-text-premier-v1": (0.8, 3.2),
    "openai-gpt-4o": (2.5, 10.0),
    "openai-gpt-4o-mini": (0.15, 0.6),
    "wxai-granite-3-2b-instruct-8k-max-tokens": (0.1, 0.1),
    "wxai-granite-3-8b-instruct-8k-max-tokens": (0.2, 0.2),
    "wxai-llama-3-1-70b-instruct": (0.9, 0.9),
    "wxai-llama-3-1-8b-instruct": (0.2, 0.2),
    "wxai-llama-3-2-1b-instruct": (0.06, 0.06),
    "wxai-llama-3-2-3b-instruct": (0.06, 0.06),
    "wxai-llama-3-3-70b-instruct": (0.9, 0.9),
    "wxai-mixtral-8x7b-instruct-v01": (0.6, 0.6),
    "wxai-llama-3-405b-instruct": (3.5, 3.5),
}

COST_SUFFIX = "|total_cost"


@dataclass(frozen=True)
class Benchmark:
    """Prompts with every model's quality and cost, plus the split each prompt belongs to."""

    prompts: list[str]
    quality: np.ndarray  # (n, T)
    cost: np.ndarray  # (n, T)
    model_names: tuple[str, ...]
    split: np.ndarray  # (n,) "train" | "val" | "test"
    groups: np.ndarray  # (n,) task / dataset name
    sample_ids: list[str]
    source: str
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def n_samples(self) -> int:
        return len(self.prompts)

    def full_feedback(self, X: np.ndarray) -> FullFeedback:
        return FullFeedback(X=X, quality=self.quality, cost=self.cost, model_names=self.model_names, groups=self.groups)

    def subset(self, index: np.ndarray) -> "Benchmark":
        index = np.asarray(index)
        return Benchmark(
            prompts=[self.prompts[i] for i in index],
            quality=self.quality[index],
            cost=self.cost[index],
            model_names=self.model_names,
            split=self.split[index],
            groups=self.groups[index],
            sample_ids=[self.sample_ids[i] for i in index],
            source=self.source,
            dropped=dict(self.dropped),
        )

    def describe(self) -> dict:
        return {
            "source": self.source,
            "n_prompts": self.n_samples,
            "n_models": len(self.model_names),
            "models": list(self.model_names),
            "split": {s: int((self.split == s).sum()) for s in ("train", "val", "test")},
            "tasks": {str(g): int((self.groups == g).sum()) for g in sorted(set(self.groups.tolist()))},
            "dropped": dict(self.dropped),
            "mean_accuracy": dict(zip(self.model_names, np.round(self.quality.mean(0), 4).tolist())),
            "mean_cost": dict(zip(self.model_names, np.round(self.cost.mean(0), 8).tolist())),
        }


# -- reading rows ---------------------------------------------------------------------------------
def _files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.name.lower().endswith(SUFFIXES))
        if not files:
            raise FileNotFoundError(f"no benchmark files ({', '.join(SUFFIXES)}) in folder {path}")
        return files
    if not path.exists():
        raise FileNotFoundError(f"benchmark file not found: {path}")
    table_format(path)  # raises for an unsupported file type
    return [path]


def _split_from_name(name: str) -> str | None:
    low = name.lower()
    if "_train" in low or low.startswith("train"):
        return "train"
    if "_val" in low or "validation" in low or low.startswith("val"):
        return "val"
    if "_test" in low or low.startswith("test"):
        return "test"
    return None


def hash_split(prompt: str) -> str:
    """Deterministic prompt-level 80/10/10 split."""
    bucket = int(hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()[:8], 16) % 10
    return "test" if bucket == 0 else "val" if bucket == 1 else "train"


def _prompt_text(value) -> str:
    """RouterBench stores prompts as the repr of a list of turns; join the turns."""
    if isinstance(value, (list, tuple)):
        return "\n".join(str(v) for v in value)
    text = "" if value is None else str(value)
    if text.startswith("[") and text.endswith("]"):
        try:
            turns = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text
        if isinstance(turns, (list, tuple)):
            return "\n".join(str(t) for t in turns)
    return text


def _float(value) -> float:
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


# -- the two layouts ------------------------------------------------------------------------------
def _routerbench_models(columns) -> list[str]:
    cols = set(columns)
    return [c for c in columns if c + COST_SUFFIX in cols]


def _finish(records, model_names, source, dropped) -> Benchmark:
    if not records:
        raise ValueError(f"{source}: no usable rows (dropped: {dropped})")
    prompts, q, c, split, groups, ids = zip(*records)
    return Benchmark(
        prompts=list(prompts),
        quality=np.asarray(q, dtype=np.float64),
        cost=np.asarray(c, dtype=np.float64),
        model_names=tuple(model_names),
        split=np.asarray(split, dtype=object),
        groups=np.asarray(groups, dtype=object),
        sample_ids=list(ids),
        source=source,
        dropped=dropped,
    )


def load_routerbench(path: str | Path) -> Benchmark:
    """Load a file or folder in RouterBench's layout."""
    path = Path(path)
    records: list = []
    dropped: dict[str, int] = {}
    models = None
    for file in _files(path):
        rows = read_rows(file)
        if not rows:
            continue
        file_models = _routerbench_models(list(rows[0].keys()))
        if len(file_models) < 2:
            raise ValueError(
                f"{file.name}: not in RouterBench's layout: need one 0/1 column per model and "
                f"'<model>{COST_SUFFIX}' columns for at least 2 models"
            )
        if models is None:
            models = file_models
        elif set(file_models) != set(models):
            raise ValueError(f"{file.name}: its models {sorted(file_models)} differ from the other files' {sorted(models)}")
        file_split = _split_from_name(file.name)
        for i, row in enumerate(rows):
            q = [_float(row.get(m)) for m in models]
            c = [_float(row.get(m + COST_SUFFIX)) for m in models]
            if any(math.isnan(v) for v in q + c):
                dropped["missing quality or cost"] = dropped.get("missing quality or cost", 0) + 1
                continue
            if any(v < 0 or v > 1 for v in q) or any(v < 0 for v in c):
                dropped["quality outside [0,1] or negative cost"] = dropped.get("quality outside [0,1] or negative cost", 0) + 1
                continue
            prompt = _prompt_text(row.get("prompt"))
            records.append(
                (
                    prompt,
                    q,
                    c,
                    file_split or hash_split(prompt),
                    str(row.get("eval_name", "") or ""),
                    str(row.get("sample_id", f"{file.name}:{i}")),
                )
            )
    if models is None:
        raise ValueError(f"{path}: no rows")
    return _finish(records, models, str(path), dropped)


def load_sprout(path: str | Path, prices: dict[str, tuple[float, float]] | None = None) -> Benchmark:
    """Load SPROUT's published layout; ``prices`` maps model -> (input, output) US$ per million tokens."""
    path = Path(path)
    prices = SPROUT_PRICES if prices is None else prices
    records: list = []
    dropped: dict[str, int] = {}
    models = None
    for file in _files(path):
        rows = read_rows(file)
        if not rows:
            continue
        file_models = [k for k, v in rows[0].items() if isinstance(v, dict) and "score" in v]
        if len(file_models) < 2:
            raise ValueError(
                f"{file.name}: not in SPROUT's layout: need model columns holding {{'score', 'num_input_tokens', 'num_output_tokens'}}"
            )
        missing = [m for m in file_models if m not in prices]
        if missing:
            raise ValueError(f"{file.name}: no price for models {missing}; pass prices={{model: (input, output) per 1M tokens}}")
        if models is None:
            models = file_models
        elif set(file_models) != set(models):
            raise ValueError(f"{file.name}: its models differ from the other files'")
        file_split = _split_from_name(file.name)
        for i, row in enumerate(rows):
            try:
                q = [_float(row[m]["score"]) for m in models]
                c = [
                    (_float(row[m]["num_input_tokens"]) * prices[m][0] + _float(row[m]["num_output_tokens"]) * prices[m][1]) / 1e6
                    for m in models
                ]
            except (KeyError, TypeError):
                dropped["malformed model entry"] = dropped.get("malformed model entry", 0) + 1
                continue
            if any(math.isnan(v) for v in q + c) or any(v < 0 or v > 1 for v in q):
                dropped["missing or invalid score/tokens"] = dropped.get("missing or invalid score/tokens", 0) + 1
                continue
            prompt = _prompt_text(row.get("prompt"))
            group = str(row.get("dataset", row.get("eval_name", "")) or "")
            records.append((prompt, q, c, file_split or hash_split(prompt), group, str(row.get("id", f"{file.name}:{i}"))))
    if models is None:
        raise ValueError(f"{path}: no rows")
    return _finish(records, models, str(path), dropped)


def detect_format(path: str | Path) -> str:
    first = _files(Path(path))[0]
    rows = read_rows(first)
    if not rows:
        raise ValueError(f"{first}: empty file")
    keys = list(rows[0].keys())
    if len(_routerbench_models(keys)) >= 2:
        return "routerbench"
    if any(isinstance(v, dict) and "score" in v for v in rows[0].values()):
        return "sprout"
    raise ValueError(
        f"{first}: neither RouterBench's layout ('<model>{COST_SUFFIX}' columns) nor SPROUT's (model columns with a 'score')"
    )


def load_benchmark(path: str | Path, format: str = "auto", limit: int | None = None, seed: int = 0) -> Benchmark:
    """Load a benchmark; ``limit`` keeps a seeded random subset of that many prompts."""
    if format == "auto":
        format = detect_format(path)
    loaders = {"routerbench": load_routerbench, "sprout": load_sprout}
    if format not in loaders:
        raise ValueError(f"unknown format '{format}'; choose auto, routerbench or sprout")
    bench = loaders[format](path)
    if limit is not None:
        if limit < 1:
            raise ValueError(f"`limit` must be >= 1, got {limit}")
        if limit < bench.n_samples:
            keep = np.sort(np.random.default_rng(seed).choice(bench.n_samples, size=limit, replace=False))
            bench = bench.subset(keep)
    return bench
