"""What the router reads of a conversation: the text it embeds (either reading), the app a request comes
from, the tools it offers."""

from __future__ import annotations

from regret_gateway.gateway.messages import app_key, routed_text, tool_names

SYSTEM = {"role": "system", "content": "You are the assistant of a travel agency. " * 50}
CONVERSATION = [
    SYSTEM,
    {"role": "user", "content": "Find me a flight to Lisbon."},
    {"role": "assistant", "content": "For which dates?"},
    {"role": "user", "content": [{"type": "text", "text": "Next Friday,"}, {"type": "text", "text": "back Sunday."}]},
]


def test_system_and_last_user_reads_the_system_prompt_first():
    text = routed_text(CONVERSATION, "system-and-last-user")
    assert text.startswith("You are the assistant") and text.endswith("Next Friday, back Sunday.")
    assert "Lisbon" not in text  # only the last user turn
    assert routed_text([{"role": "assistant", "content": "only this"}], "system-and-last-user") == "only this"
    assert routed_text(None, "turns") == "" and routed_text([], "system-and-last-user") == ""


def test_turns_reads_the_last_user_turn_then_the_earlier_turns_latest_first_never_the_system_prompt():
    text = routed_text(CONVERSATION, "turns")
    assert text.split("\n") == ["Next Friday, back Sunday.", "For which dates?", "Find me a flight to Lisbon."]
    assert "travel agency" not in text
    # a last user turn followed by the assistant's (a tool call's answer): the user turn still leads
    assert routed_text([*CONVERSATION, {"role": "assistant", "content": "Searching."}], "turns").startswith("Next Friday")


def test_an_app_is_a_keyed_hash_of_its_normalised_system_prompt():
    key = b"k" * 32
    a = app_key(CONVERSATION, key)
    assert a is not None and len(a) == 12 and "travel" not in a
    respaced = [{"role": "system", "content": "  " + SYSTEM["content"].upper().replace(" ", "\n ")}]
    assert app_key(respaced, key) == a  # whitespace and case do not make another app
    assert app_key([{"role": "system", "content": "Another app."}], key) != a
    assert app_key(CONVERSATION, b"o" * 32) != a  # another deployment's key: not linkable
    assert app_key(CONVERSATION[1:], key) is None


def test_tool_names_are_the_offered_functions_sorted():
    tools = [{"type": "function", "function": {"name": "search_flights"}}, {"type": "function", "function": {"name": "book"}}]
    assert tool_names({"tools": tools}) == ["book", "search_flights"]
    assert tool_names({"functions": [{"name": "legacy"}]}) == ["legacy"]
    assert tool_names({"tools": "nonsense"}) == [] and tool_names({}) == []


def test_last_user_reads_the_last_user_turn_alone():
    assert routed_text(CONVERSATION, "last-user") == "Next Friday, back Sunday."
    assert routed_text([{"role": "assistant", "content": "only this"}], "last-user") == "only this"
