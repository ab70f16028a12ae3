"""The sampled LLM judge's settings (``judge:``) and the rubric it is asked with."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator, model_validator

from regret_gateway.config.specs import _Strict

# What the LLM judge is asked (judge.rubric replaces it). The answer must be one JSON object with a score.
DEFAULT_RUBRIC = """You grade the answer an AI assistant gave to a user's request.
Score 1 if the answer correctly and fully does what was asked, 0 if it is wrong, off-topic, refuses
without reason or leaves out what was asked for, and a value in between for an answer that is partly
right or partly complete. Judge correctness and completeness only, not style or length.
Reply with one JSON object and nothing else: {"score": <a number from 0 to 1>, "reason": "<one sentence>"}"""


class JudgeSpec(_Strict):
    """The sampled LLM judge (``judge/sampled.py``): scores a share of routed answers with a model of the
    proxy's ``model_list`` and records each as feedback with source ``judge``. Off unless ``model`` is set
    and a team opts in: the judge sends the prompt and the answer to that model. A list of models is a
    panel: each scores the answer and the mean of their scores is recorded."""

    # a model group of the proxy's model_list, or a list of them (a panel); None: no judge
    model: str | tuple[str, ...] | None = None
    sample: float | dict[str, float] = 0.1  # share of a tier's routed requests scored (the cost knob)
    # share of the judged answers judged a second time (source judge-repeat): the judge's self-agreement,
    # which estimates its error where no user scores (judge/calibration.py); a judge sampled at
    # temperature 0 always agrees with itself, and says nothing this way
    repeat: float = Field(default=0.0, ge=0.0, le=1.0)
    teams: tuple[str, ...] = ()  # teams whose traffic may be judged ("*": every team); empty: none
    rubric: str | None = None  # the judge's instructions (default: judge.DEFAULT_RUBRIC)
    rubric_file: str | None = None  # or read them from this file
    timeout_s: float = Field(default=30.0, gt=0)
    concurrency: int = Field(default=4, ge=1)  # judge calls in flight at once
    queue_size: int = Field(default=1000, ge=1)  # answers waiting for the judge; past it: dropped, counted
    max_chars: int = Field(default=8000, ge=100)  # prompt and answer are each cut to this many characters

    @field_validator("sample")
    @classmethod
    def _shares(cls, v: float | dict[str, float]) -> float | dict[str, float]:
        for share in v.values() if isinstance(v, dict) else (v,):
            if not (isinstance(share, (int, float)) and 0.0 <= share <= 1.0):
                raise ValueError(f"judge.sample: a share must be in [0, 1], got {share!r}")
        return v

    @field_validator("model")
    @classmethod
    def _panel(cls, v: str | tuple[str, ...] | None) -> str | tuple[str, ...] | None:
        if isinstance(v, tuple) and (not v or len(set(v)) != len(v)):
            raise ValueError(f"judge.model: a panel lists one or more distinct model groups, got {list(v)!r}")
        return v

    @property
    def panel(self) -> tuple[str, ...]:
        """The judge's model groups (one, or a panel's; none when off)."""
        return () if self.model is None else (self.model,) if isinstance(self.model, str) else self.model

    @model_validator(mode="after")
    def _one_rubric(self) -> "JudgeSpec":
        if self.rubric is not None and self.rubric_file is not None:
            raise ValueError("judge: set `rubric` or `rubric_file`, not both")
        if self.rubric_file is not None and not Path(self.rubric_file).is_file():
            raise ValueError(f"judge.rubric_file not found: {self.rubric_file}")
        return self

    def share(self, tier: str) -> float:
        """The share of ``tier``'s routed requests to judge (0 for a tier not named in a per-tier ``sample``)."""
        return float(self.sample.get(tier, 0.0)) if isinstance(self.sample, dict) else float(self.sample)

    def judges(self, team: str | None) -> bool:
        """Whether ``team``'s traffic may be sent to the judge (opt-in)."""
        return self.model is not None and ("*" in self.teams or (team is not None and team in self.teams))

    def rubric_text(self) -> str:
        if self.rubric_file is not None:
            return Path(self.rubric_file).read_text()
        return self.rubric if self.rubric is not None else DEFAULT_RUBRIC
