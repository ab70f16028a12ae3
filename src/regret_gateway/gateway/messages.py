"""What the hook reads of a chat request and its answer: the text the router sees, the app it comes from and
the tools it carries, the answer's text, the model group LiteLLM says answered, and the stream option that
has a stream's cost counted."""

from __future__ import annotations

import hashlib
import hmac

# What the router reads of a conversation (``embedder.reads``): ``last-user``, the last user turn alone;
# ``turns``, the last user turn, then the turns before it, latest first (the embedder's max_length cuts the
# rest); ``system-and-last-user``, the first system message then the last user turn. The first two never read
# the system prompt, which an app shares with all its requests: it is the ``{app}`` context field instead.
READS = ("last-user", "turns", "system-and-last-user")


def message_text(m) -> str:
    """A message's text: its content, or its content parts' text joined ('' for anything else)."""
    c = m.get("content") if isinstance(m, dict) else None
    if isinstance(c, list):  # OpenAI content parts
        return " ".join(p.get("text", "") for p in c if isinstance(p, dict) and isinstance(p.get("text", ""), str))
    return c if isinstance(c, str) else ""


def system_text(messages: list | None) -> str:
    """The conversation's system prompt: its first system message's text ('' without one)."""
    return next((message_text(m) for m in messages or () if isinstance(m, dict) and m.get("role") == "system"), "")


def routed_text(messages: list | None, reads: str) -> str:
    """The text the router sees of a conversation, as plain text (:data:`READS`). Without a user turn: the
    conversation's turns, latest first (``system-and-last-user``: its last message)."""
    if not messages:
        return ""
    if reads not in READS:
        raise ValueError(f"reads: one of {READS}, got {reads!r}")
    turns = [m for m in messages if isinstance(m, dict)]
    last = max((i for i, m in enumerate(turns) if m.get("role") == "user"), default=None)
    if reads == "system-and-last-user":
        final = message_text(turns[last]) if last is not None else message_text(messages[-1])
        return "\n".join([system_text(turns), final]).strip()
    said = [message_text(m) for m in turns if m.get("role") in ("user", "assistant")]
    if last is None:
        return "\n".join(reversed([s for s in said if s])).strip()
    if reads == "last-user":
        return message_text(turns[last]).strip()
    before = [message_text(m) for m in turns[:last] if m.get("role") in ("user", "assistant")]
    return "\n".join([message_text(turns[last]), *reversed(before)]).strip()


def app_key(messages: list | None, key: bytes) -> str | None:
    """The app a request comes from, as a stable key: a keyed hash of its first system message, normalised
    (whitespace collapsed, case folded); None without one. A new app (or a changed system prompt) is a new key."""
    text = " ".join(system_text(messages).split()).casefold()
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()[:12] if text else None


def tool_names(data: dict) -> list[str]:
    """The names of the tools (or legacy functions) a request offers the model, sorted."""
    names = []
    for tool in data.get("tools") or data.get("functions") or ():
        if isinstance(tool, dict):
            fn = tool.get("function")
            name = (fn if isinstance(fn, dict) else tool).get("name")
            if isinstance(name, str):
                names.append(name)
    return sorted(set(names))


def answer_text(response) -> str:
    """The text of a chat completion's first choice ('' when there is none, e.g. a stream's summary)."""
    try:
        choice = response.choices[0]
        content = choice.message.content if hasattr(choice, "message") else choice["message"]["content"]
    except (AttributeError, IndexError, KeyError, TypeError):
        return ""
    return content if isinstance(content, str) else ""


def answered_by(source) -> str | None:
    """The model group whose answer this is, as LiteLLM reports it: a success event's standard logging
    object (``model_group``), or a response's hidden ``x-litellm-model-group`` header. A LiteLLM fallback's
    group where one answered for the routed model; None where it is not said."""
    if isinstance(source, dict):
        group = source.get("model_group")
    else:
        hidden = getattr(source, "_hidden_params", None)
        headers = (hidden.get("additional_headers") or {}) if isinstance(hidden, dict) else {}
        group = headers.get("x-litellm-model-group") if isinstance(headers, dict) else None
    return group if isinstance(group, str) and group else None


def count_stream_usage(data: dict) -> None:
    """Have a routed stream's cost and tokens counted: LiteLLM asks the upstream for the stream's usage
    (``stream_options.include_usage``) only where the client did or the *requested* model supports it --
    decided on the virtual model's name, before this hook routes -- and without usage it logs a stream at
    $0 and no tokens. Ask for it for the routed model; where the client did not, LiteLLM strips the usage
    chunk from what the client receives (``_litellm_strip_stream_usage``), and where the upstream sends none
    LiteLLM counts the assembled stream's tokens itself."""
    options = data.get("stream_options")
    options = dict(options) if isinstance(options, dict) else {}
    if options.get("include_usage") is True:
        return
    data["stream_options"] = {**options, "include_usage": True}
    data["_litellm_strip_stream_usage"] = True
