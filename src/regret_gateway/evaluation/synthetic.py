"""A generated full-feedback world in RouterBench's layout (the demo's default, and test data).

RouterBench's dataset card states no licence, so the project ships its own world, generated from a seed:
prompts from five task families at three difficulties, four models whose chance of answering correctly
depends on both (a specialist for code, one for maths, a cheap generalist, an expensive frontier model),
and costs from token counts x list prices. Every prompt is its own text (a request number closes it): an
outcome is one draw, so a router must learn what the family and difficulty predict, not memorise texts.
Every model's answer is recorded, so a mock upstream can replay it. ``write_world`` writes the CSV that
``load_benchmark`` reads.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from regret_gateway.tables import open_text

# USD per 1M tokens (input, output): list prices of the kind of model each stands for.
MODELS = {
    "budget-chat": (0.15, 0.60),
    "code-pro": (1.00, 3.00),
    "math-pro": (1.00, 3.00),
    "frontier-xl": (5.00, 15.00),
}
FAMILIES = {
    "code": (
        [
            "Write a Python function that {}.",
            "Fix the bug in this JavaScript snippet that {}.",
            "Implement in Go a routine that {}.",
        ],
        [
            "parses ISO dates",
            "merges overlapping intervals",
            "deduplicates a list keeping order",
            "computes a rolling median",
            "validates an IPv4 address",
            "flattens nested JSON",
            "rate-limits calls per user",
            "serialises a tree to text",
        ],
        220,
    ),
    "math": (
        ["Solve for x: {}.", "Prove that {}.", "Compute {} and show your steps."],
        [
            "3x + 7 = 2x - 5",
            "the sum of two odd numbers is even",
            "the derivative of x^3 sin(x)",
            "the integral of 1/(1+x^2)",
            "there are infinitely many primes",
            "the limit of (1+1/n)^n",
            "the eigenvalues of [[2,1],[1,2]]",
            "12! / 10!",
        ],
        160,
    ),
    "translation": (
        ["Translate into French: '{}'", "Translate this into German: {}", "How do you say '{}' in Spanish?"],
        [
            "the meeting moved to Thursday",
            "please close the window",
            "the library opens at nine",
            "my train is late",
            "we need more coffee",
            "the invoice is attached",
            "happy birthday to your sister",
            "the road is closed",
        ],
        40,
    ),
    "trivia": (
        ["What is {}?", "Who {}?", "In one sentence: {}?"],
        [
            "the capital of Australia",
            "wrote Pride and Prejudice",
            "the boiling point of water at sea level",
            "painted the Mona Lisa",
            "the largest planet",
            "discovered penicillin",
            "the speed of light",
            "the longest river",
        ],
        30,
    ),
    "summary": (
        ["Summarise this email in two lines: {}", "Give a one-paragraph summary of: {}", "TL;DR: {}"],
        [
            "the quarterly sales grew 4% while costs stayed flat and the team asks for two hires",
            "the server outage on Monday was caused by an expired certificate and is now fixed",
            "the board approved the new office lease starting in March",
            "customers report slow checkout on mobile since the last release",
        ],
        90,
    ),
}
DIFFICULTY = {"easy": ("", 0.0), "medium": ("Be precise. ", 1.0), "hard": ("Answer rigorously, covering edge cases. ", 2.0)}
# skill[model][family]: logit of a correct answer on an easy prompt; `slope`: loss per difficulty step
SKILL = {
    "budget-chat": {"code": 0.0, "math": -0.5, "translation": 2.5, "trivia": 2.5, "summary": 2.0},
    "code-pro": {"code": 3.0, "math": 0.5, "translation": 1.5, "trivia": 1.5, "summary": 1.5},
    "math-pro": {"code": 0.5, "math": 3.0, "translation": 1.5, "trivia": 1.5, "summary": 1.5},
    "frontier-xl": {"code": 3.0, "math": 3.0, "translation": 3.0, "trivia": 3.0, "summary": 3.0},
}
SLOPE = {"budget-chat": 1.4, "code-pro": 0.9, "math-pro": 0.9, "frontier-xl": 0.5}


def generate_world(n: int = 2000, seed: int = 0) -> list[dict]:
    """``n`` RouterBench-layout rows: sample_id, prompt, eval_name, one 0/1 column per model,
    ``<model>|total_cost`` and ``<model>|model_response``."""
    if n < 1:
        raise ValueError(f"`n` must be >= 1, got {n}")
    rng = np.random.default_rng(seed)
    fams = list(FAMILIES)
    rows = []
    for i in range(n):
        fam = fams[rng.integers(len(fams))]
        templates, subjects, out_tokens = FAMILIES[fam]
        level = list(DIFFICULTY)[rng.integers(3)]
        prefix, steps = DIFFICULTY[level]
        prompt = (
            prefix + templates[rng.integers(len(templates))].format(subjects[rng.integers(len(subjects))]) + f" (request {i})"
        )
        row: dict[str, str | float] = {"sample_id": f"{fam}.{i}", "prompt": prompt, "eval_name": f"{fam}-{level}"}
        in_tokens = max(8, len(prompt) // 4)
        for m, (p_in, p_out) in MODELS.items():
            p = 1.0 / (1.0 + np.exp(-(SKILL[m][fam] - SLOPE[m] * steps)))
            correct = bool(rng.random() < p)
            completion = int(out_tokens * rng.uniform(0.6, 1.4))
            row[m] = float(correct)
            row[f"{m}|total_cost"] = (in_tokens * p_in + completion * p_out) / 1e6
            row[f"{m}|model_response"] = f"[{m}] {'a correct' if correct else 'an incorrect'} answer to: {prompt[:60]}"
        rows.append(row)
    return rows


def write_world(path: str | Path, n: int = 2000, seed: int = 0) -> Path:
    """Write :func:`generate_world` as a CSV (``.csv`` or ``.csv.gz``) that ``load_benchmark`` reads."""
    path = Path(path)
    rows = generate_world(n, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_text(path, "wt") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path
