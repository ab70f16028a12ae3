"""What a model can take and what a request needs of it: a model's limits and input prices (:class:`ModelInfo`),
a chat request's needs (:class:`Needs`), and whether the one can take the other (:func:`refusal`). Plain
values, read by the gateway (gateway/eligibility.py, gateway/model_info.py: where the limits come from) and
by the offline bench's chat traffic (evaluation/traffic.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import TypeGuard

# LiteLLM's model-info keys -> ours
_LITELLM_KEYS = {
    "max_input_tokens": "max_input_tokens",
    "max_output_tokens": "max_output_tokens",
    "supports_function_calling": "tools",
    "supports_vision": "images",
    "supports_response_schema": "json_schema",
    "input_cost_per_token": "input_cost_per_token",
    "output_cost_per_token": "output_cost_per_token",
    "cache_read_input_token_cost": "cached_input_cost_per_token",
}


@dataclass(frozen=True)
class ModelInfo:
    """One model group's limits and prices; None: not known."""

    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    tools: bool | None = None
    images: bool | None = None
    json_schema: bool | None = None
    input_cost_per_token: float | None = None
    cached_input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None

    def over(self, base: ModelInfo) -> ModelInfo:
        """This info where it says something, ``base`` elsewhere."""
        return replace(base, **{f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None})

    def strictest(self, other: ModelInfo) -> ModelInfo:
        """What both deployments of a group take: the smaller limit, a capability only where neither lacks it,
        the dearer price."""
        out = {}
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a is None or b is None:
                out[f.name] = a if b is None else b
            elif isinstance(a, bool):
                out[f.name] = a and b
            else:
                out[f.name] = min(a, b) if f.name.startswith("max_") else max(a, b)
        return ModelInfo(**out)

    @classmethod
    def of(cls, values: Mapping | None) -> ModelInfo:
        """From a mapping with LiteLLM's keys (``get_model_info``, a deployment's ``model_info`` or
        ``litellm_params``) or ours; values of the wrong type are ignored."""
        out: dict = {}
        for key, value in (values or {}).items():
            name = _LITELLM_KEYS.get(key, key if key in _OURS else None)
            if name is None or value is None or name in out:
                continue
            if name in _FLAGS and isinstance(value, bool):
                out[name] = value
            elif name not in _FLAGS and is_number(value) and value >= 0:
                out[name] = int(value) if name.startswith("max_") else float(value)
        return cls(**out)


_OURS = {f.name for f in fields(ModelInfo)}
_FLAGS = {"tools", "images", "json_schema"}


_IMAGE_PARTS = ("image_url", "input_image", "image")


def _has_images(messages) -> bool:
    for m in messages if isinstance(messages, list) else ():
        content = m.get("content") if isinstance(m, Mapping) else None
        if isinstance(content, list) and any(isinstance(p, Mapping) and p.get("type") in _IMAGE_PARTS for p in content):
            return True
    return False


def is_whole(value: object) -> TypeGuard[int]:
    """An integer as JSON and YAML give it: an ``int`` that is not a ``bool`` (True is an int in Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """An ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int(value) -> int | None:
    return value if is_whole(value) and value > 0 else None


@dataclass(frozen=True)
class Needs:
    """What a request asks of the model that answers it."""

    prompt_tokens: int | None  # the whole conversation as LiteLLM counts it (None: not counted)
    output_tokens: int  # the answer's: the request's max_tokens, else the settings' expected_output_tokens
    asked_output: bool  # the request set max_tokens (or max_completion_tokens) itself
    tools: bool = False
    images: bool = False
    json_schema: bool = False

    @classmethod
    def of(cls, data: Mapping, prompt_tokens: int | None, expected_output_tokens: int) -> Needs:
        """A chat request's needs (``data``: its body)."""
        asked = _int(data.get("max_completion_tokens")) or _int(data.get("max_tokens"))
        response_format = data.get("response_format")
        return cls(
            prompt_tokens=prompt_tokens,
            output_tokens=asked or expected_output_tokens,
            asked_output=asked is not None,
            tools=bool(data.get("tools") or data.get("functions")),
            images=_has_images(data.get("messages")),
            json_schema=isinstance(response_format, Mapping) and response_format.get("type") == "json_schema",
        )

    @property
    def label(self) -> str:
        """What the request needs, in words (an error says it)."""
        parts = [f"{self.prompt_tokens} prompt tokens + {self.output_tokens} for the answer"] if self.prompt_tokens else []
        parts += [
            name
            for name, needed in (("tools", self.tools), ("images", self.images), ("a JSON schema", self.json_schema))
            if needed
        ]
        return ", ".join(parts) or "nothing special"


def refusal(info: ModelInfo, needs: Needs) -> str | None:
    """Why a model of ``info`` cannot take a request of ``needs``; None where it can (or nothing says)."""
    if info.max_input_tokens is not None and needs.prompt_tokens is not None:
        if needs.prompt_tokens + needs.output_tokens > info.max_input_tokens:
            return f"window {info.max_input_tokens} tokens"
    if needs.asked_output and info.max_output_tokens is not None and needs.output_tokens > info.max_output_tokens:
        return f"answers at most {info.max_output_tokens} tokens"
    for needed, takes, what in ((needs.tools, info.tools, "tools"), (needs.images, info.images, "images"),
                                (needs.json_schema, info.json_schema, "a JSON schema")):  # fmt: skip
        if needed and takes is False:
            return f"takes no {what}"
    return None
