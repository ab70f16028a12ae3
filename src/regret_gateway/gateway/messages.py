"""What the hook reads of a chat request and its answer: the text the router sees, the answer's text, the
model group LiteLLM says answered, and the stream option that has a stream's cost counted."""

from __future__ import annotations


def routed_text(messages: list | None) -> str:
    """The text the router sees: the last user turn (and the system prompt, if any), as plain text."""
    if not messages:
        return ""

    def content(m) -> str:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, list):  # OpenAI content parts
            return " ".join(p.get("text", "") for p in c if isinstance(p, dict))
        return c if isinstance(c, str) else ""

    users = [content(m) for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    system = [content(m) for m in messages if isinstance(m, dict) and m.get("role") == "system"]
    return "\n".join([*system[:1], *(users[-1:] or [content(messages[-1])])]).strip()


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
