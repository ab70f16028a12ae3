"""How the embedder cuts a text longer than its ``max_length`` tokens (``embedder.truncation``).

* ``head``: its first ``max_length`` tokens.
* ``head-and-tail`` (default): its first quarter of them and its last three quarters, joined. Sun, Qiu, Xu and
  Huang (2019, "How to Fine-Tune BERT for Text Classification?") found head-and-tail the best cut of long
  texts for a classifier. Here the reason is plainer: a few-shot or retrieval prompt repeats a long template
  and puts what it asks last. RouterBench's ARC and Winogrande prompts share their first 1,000 characters
  (five worked examples), so their first 256 tokens are one text: a router that reads the head sees one
  prompt per task (docs/experiments/truncation.md).

Where a text is long, its characters are cut first (:func:`clip_chars`: at most ``chars_per_token`` characters
per kept token at each end), so a huge prompt costs no more to tokenise than a long one. The static encoder
cuts token ids (:func:`clip_ids`); a transformer's tokenizer adds special tokens and pads, so its texts are
cut at the kept tokens' characters (:func:`clip_texts`) and then tokenised as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

Truncation = Literal["head", "head-and-tail"]
TRUNCATIONS: tuple[str, ...] = ("head", "head-and-tail")
DEFAULT_TRUNCATION: Truncation = "head-and-tail"
HEAD_SHARE = 0.25  # of the kept tokens, from the text's start (Sun et al. 2019: 128 of 512)
# characters read per kept token: 256 MiniLM tokens of the shared datasets' prompts span at most 1,623
# characters, so 8 x 256 never cuts one of them, and tokenising a ~5,000-character prompt costs half as much
CHARS_PER_TOKEN = 8


def check_truncation(truncation: str) -> None:
    if truncation not in TRUNCATIONS:
        raise ValueError(f"`truncation` must be one of {TRUNCATIONS}, got {truncation!r}")


def kept(max_tokens: int, truncation: str) -> tuple[int, int]:
    """(head, tail): how many of a long text's first and last tokens are kept."""
    check_truncation(truncation)
    if truncation == "head":
        return max_tokens, 0
    head = int(round(HEAD_SHARE * max_tokens))
    return head, max_tokens - head


def clip_chars(text: str, max_tokens: int, truncation: str, chars_per_token: int = CHARS_PER_TOKEN) -> str:
    """``text`` with at most ``chars_per_token`` characters per kept token at each end (the rest cut)."""
    head, tail = kept(max_tokens, truncation)
    h, t = chars_per_token * head, chars_per_token * tail
    if len(text) <= h + t:
        return text
    return text[:h] + (" " + text[-t:] if t else "")


def clip_ids(ids: Sequence[int] | np.ndarray, max_tokens: int, truncation: str) -> np.ndarray:
    """The token ids a text of ``ids`` is read as: all of them, or the kept head and tail."""
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) <= max_tokens:
        return ids
    head, tail = kept(max_tokens, truncation)
    return np.concatenate([ids[:head], ids[len(ids) - tail :]]) if tail else ids[:head]


def clip_texts(tokenizer: Any, texts: Sequence[str], max_tokens: int, truncation: str) -> list[str]:
    """Each text cut to its kept head and tail tokens' characters, joined by a space (texts that fit, and
    every text under ``head``, unchanged: the tokenizer's own truncation reads the head). ``tokenizer``: a
    ``tokenizers.Tokenizer`` without truncation, whose encodings carry character offsets."""
    if truncation == "head":
        return list(texts)
    head, tail = kept(max_tokens, truncation)
    out = list(texts)
    long = [i for i, t in enumerate(texts) if len(t) > max_tokens]  # a token spans at least one character
    if not long:
        return out
    clipped = [clip_chars(texts[i], max_tokens, truncation) for i in long]
    for i, text, enc in zip(long, clipped, tokenizer.encode_batch(clipped, add_special_tokens=False)):
        spans = enc.offsets
        if len(spans) > max_tokens:
            out[i] = (text[: spans[head - 1][1]] if head else "") + " " + text[spans[len(spans) - tail][0] :]
        else:
            out[i] = text
    return out


def cutter(tokenizer: Any, truncation: str, model: str) -> tuple[Any, int]:
    """(what :func:`clip_texts` reads, the special tokens the tokenizer adds to a text) for a transformers fast
    tokenizer or an exported one (their ``backend_tokenizer``): a copy of its ``tokenizers`` form without
    truncation or padding; (None, 0) under ``head``, which the tokenizer's own truncation reads."""
    if truncation == "head":
        return None, 0
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(f"truncation {truncation!r} needs a fast tokenizer; {model!r} has none (use `head`)")
    from tokenizers import Tokenizer

    copy = Tokenizer.from_str(backend.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy, len(copy.encode("", add_special_tokens=True).ids)
