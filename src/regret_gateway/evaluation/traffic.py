"""Chat-shaped traffic from a full-feedback benchmark (``bench offline --traffic chat``).

A platform's requests are not bare benchmark prompts: they come from apps, each with a long system prompt
shared by all its requests, often as a later turn of a conversation, some with tool definitions, a few
longer than the smallest model's window. This module places each benchmark prompt into such a request,
deterministically from a seed, while its quality and cost stay the benchmark's (the prompt is what is
answered):

- **Apps.** :data:`APPS`, eight apps written for this benchmark, with system prompts of about 300 to 3,000
  tokens. Each task of the benchmark has a home app (the tasks dealt over the apps in sorted order); a prompt
  goes to its task's home app with probability ``home_share``, else to any app: the app is correlated with
  the task, not one to one.
- **Conversations.** A share ``later_share`` of the requests is a later turn: one to three earlier prompts
  of the same app, each with an answer, come before it.
- **Tools.** Requests of an app that has tools carry its tool definitions with probability ``tools_share``.
- **Long requests.** A share ``long_share`` carries a history long enough not to fit the cheapest model's
  window (:data:`SMALL_WINDOW` tokens).

What each model can take (:func:`model_limits`): the cheapest model (by mean cost) has a window of
:data:`SMALL_WINDOW` tokens, the second cheapest takes no tools; the others take everything. A request's
eligible models are the ones whose limits it fits (:func:`regret_gateway.gateway.eligibility.refusal`,
the gateway's own rule).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from regret_gateway.evaluation.loaders import Benchmark
from regret_gateway.limits import ModelInfo, Needs, refusal
from regret_gateway.tokens import count_tokens

TRAFFIC = ("bare", "chat")
SMALL_WINDOW = 8192  # the cheapest model's context window in the chat traffic (tokens)
EXPECTED_OUTPUT = 256  # the answer's tokens a request is expected to need (the gateway's default)
MESSAGE_OVERHEAD = 4  # tokens a chat message adds beyond its text (OpenAI's count)


@dataclass(frozen=True)
class App:
    """One app: its name, its system prompt's opening (who it is) and rules, the size its system prompt is
    written out to (about that many tokens), and the tools it offers (function names)."""

    name: str
    persona: str
    rules: tuple[str, ...]
    tokens: int
    tools: tuple[str, ...] = ()

    @property
    def system(self) -> str:
        """The system prompt: the persona, then its rules, numbered, repeated with each section's heading
        until it holds about ``tokens`` tokens (about four characters a token)."""
        parts = [self.persona]
        section = 0
        while sum(len(p) for p in parts) < 4 * self.tokens:
            section += 1
            parts.append(f"\nSection {section}. Policies the team reviewed in round {section}:")
            parts += [f"{section}.{k + 1} {rule}" for k, rule in enumerate(self.rules)]
        return "\n".join(parts)

    def tool_definitions(self) -> list[dict]:
        return [
            {"type": "function", "function": {"name": name, "description": f"{name.replace('_', ' ')} for the user",
                                              "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}
            for name in self.tools
        ]  # fmt: skip


APPS: tuple[App, ...] = (
    App(
        "helpdesk",
        "You are the helpdesk assistant of Northwind Cloud, a company that sells a hosted database and storage "
        "service to small businesses. You answer customers in a friendly, precise and brief way.",
        (
            "Always confirm which product and plan the customer uses before giving plan-specific advice.",
            "Never reveal internal ticket numbers, staff names or the status page's private incidents.",
            "When a customer reports data loss, open a ticket with priority one and tell them it was opened.",
            "Refunds are decided by billing staff: explain the policy, never promise an amount.",
            "Quote limits from the current price list only; if you are unsure, say you will check.",
            "Use the customer's language; if they mix languages, answer in the language of their last message.",
            "Do not give legal, tax or security advice beyond what the documentation says.",
        ),
        320,
        ("lookup_account", "open_ticket"),
    ),
    App(
        "tutor",
        "You are Socratic, a patient tutor for secondary-school and first-year university students in "
        "mathematics, the sciences, history and languages.",
        (
            "Lead the student to the answer with questions before you give it; give it when asked twice.",
            "Show every step of a calculation and name the rule used in each step.",
            "When a question has a single correct option, say which one and why the others are wrong.",
            "Correct misconceptions kindly and give one short example that shows the right idea.",
            "Keep explanations at the level of the student's question; avoid jargon that was not used.",
            "If the student seems to be taking an exam right now, explain concepts but do not solve the task.",
        ),
        900,
    ),
    App(
        "code-assistant",
        "You are the coding assistant built into the Forge IDE. You help professional developers write, "
        "review, test and debug code in the file they have open.",
        (
            "Answer with code first, then at most three sentences about it.",
            "Match the style of the surrounding code: naming, indentation, error handling.",
            "Prefer the standard library; suggest a dependency only when the task clearly needs one.",
            "Never invent APIs: if you are not sure a function exists, say so and show how to check.",
            "When you fix a bug, state the cause in one sentence and add a test that would have caught it.",
            "Do not print secrets, tokens or credentials even when they appear in the open file.",
            "Before running tests, ask which test command the project uses unless the file shows it.",
        ),
        1800,
        ("run_tests", "read_file", "search_code"),
    ),
    App(
        "legal-research",
        "You are a research assistant for the compliance team of a European retail bank. You summarise "
        "regulations, case law and internal policies for lawyers and compliance officers.",
        (
            "Cite the article, paragraph or case you rely on for every statement of law.",
            "Distinguish clearly between what a rule says and how you interpret it.",
            "Flag every answer that depends on a member state's national law.",
            "Never give advice to retail customers; the users are professionals of the bank.",
            "When sources conflict, present both and say which is more recent.",
            "Keep personal data out of summaries unless the question needs it.",
        ),
        2700,
    ),
    App(
        "clinical-info",
        "You are a clinical information assistant for hospital doctors and nurses. You answer questions "
        "about medicines, guidelines and physiology from established references.",
        (
            "State doses with units and route, and say which guideline they come from.",
            "Never make a diagnosis for a named patient; discuss the question in general terms.",
            "Mention contraindications and major interactions whenever you mention a drug.",
            "If a question suggests an emergency, say to follow local emergency protocols first.",
            "Prefer systematic reviews and national guidelines over single studies.",
        ),
        1300,
    ),
    App(
        "analyst",
        "You are the copilot of an equity analyst at an asset manager. You help read filings, build "
        "estimates and check reasoning about companies and markets.",
        (
            "Show the numbers behind every estimate and the source of each input.",
            "Do not give investment recommendations; present the analysis and its risks.",
            "Use the company's reporting currency and say when you convert.",
            "Mark every figure you could not verify from the filings as an assumption.",
            "When asked for a quick answer, give the figure and one line of reasoning.",
        ),
        600,
        ("get_quote", "get_filing"),
    ),
    App(
        "newsroom",
        "You are the editing assistant of a regional newsroom. You help reporters check facts, tighten "
        "copy, write headlines and explain complicated topics to general readers.",
        (
            "Keep the reporter's voice; change wording only where it is unclear or wrong.",
            "Flag every claim that needs a source and every number that needs checking.",
            "Headlines have at most twelve words and no puns on tragedies.",
            "Explain technical subjects so a reader aged fourteen can follow.",
            "Never invent quotes, names, dates or places.",
            "Use the house style: numbers one to nine in words, percentages with the % sign.",
        ),
        2300,
    ),
    App(
        "consumer-chat",
        "You are Pip, the assistant in a consumer chat app used by millions of people for everyday questions, "
        "homework, trivia, planning and small talk.",
        (
            "Be warm and short: most answers fit in three sentences.",
            "For quizzes and multiple-choice questions, give the letter of the answer, then one line of reason.",
            "Refuse requests for dangerous instructions and suggest a safe alternative.",
            "Do not claim to browse the web or to remember earlier chats.",
            "When a question is ambiguous, answer the most likely reading and say which one you chose.",
        ),
        3000,
    ),
)
ANSWER = "Here is my answer to that, with the reasoning step by step and a short summary at the end."


@dataclass(frozen=True)
class ChatTraffic:
    """One request per benchmark prompt (same order): its messages, the app it came from, whether it is a
    later turn, the tools it offers, its size in tokens (the whole conversation) and which models can take it."""

    messages: list[list[dict]]
    apps: np.ndarray  # (n,) app names
    later: np.ndarray  # (n,) bool
    tools: list[list[dict]]
    prompt_tokens: np.ndarray  # (n,)
    eligible: np.ndarray  # (n, T) bool

    @property
    def n_samples(self) -> int:
        return len(self.messages)

    def describe(self) -> dict:
        return {
            "traffic": "chat",
            "apps": {a.name: int((self.apps == a.name).sum()) for a in APPS},
            "later_turns": int(self.later.sum()),
            "with_tools": int(sum(bool(t) for t in self.tools)),
            "restricted": int((~self.eligible.all(axis=1)).sum()),
            "prompt_tokens_median": float(np.median(self.prompt_tokens)),
            "prompt_tokens_max": int(self.prompt_tokens.max()),
        }


def model_limits(bench: Benchmark) -> dict[str, ModelInfo]:
    """What each of the benchmark's models can take in the chat traffic: the cheapest (by mean cost) has a
    window of :data:`SMALL_WINDOW` tokens, the second cheapest takes no tools, the others take everything."""
    order = np.argsort(bench.cost.mean(axis=0), kind="stable")
    limits = {m: ModelInfo() for m in bench.model_names}
    limits[bench.model_names[order[0]]] = ModelInfo(max_input_tokens=SMALL_WINDOW)
    if len(order) > 1:
        limits[bench.model_names[order[1]]] = ModelInfo(tools=False)
    return limits


def _tokens(texts: list[str]) -> np.ndarray:
    """Each text's size in tokens, each distinct text counted once."""
    unique = sorted(set(texts))
    counts = dict(zip(unique, count_tokens(unique).astype(int)))
    return np.array([counts[t] for t in texts], dtype=np.int64)


def chat_traffic(bench: Benchmark, seed: int = 0, *, home_share: float = 0.75, later_share: float = 0.35,
                 tools_share: float = 0.6, long_share: float = 0.02) -> ChatTraffic:  # fmt: skip
    """The benchmark's prompts as chat requests (see the module doc), drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    n = bench.n_samples
    tasks = sorted(set(bench.groups.tolist()))
    home = {task: k % len(APPS) for k, task in enumerate(tasks)}
    app_of = np.array([home[g] if rng.random() < home_share else int(rng.integers(len(APPS))) for g in bench.groups])
    members = {a: np.flatnonzero(app_of == a) for a in range(len(APPS))}
    systems = [app.system for app in APPS]
    system_tokens = _tokens(systems)
    prompt_tokens = _tokens(bench.prompts)
    answer_tokens = int(count_tokens([ANSWER])[0]) + MESSAGE_OVERHEAD
    messages, tools, later, sizes = [], [], np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64)
    for i in range(n):
        a = int(app_of[i])
        app = APPS[a]
        long = rng.random() < long_share
        history: list[int] = []
        if long or rng.random() < later_share:
            pool = members[a][members[a] != i]
            if len(pool):
                history = rng.choice(pool, size=int(rng.integers(1, 4)), replace=True).tolist()
        size = system_tokens[a] + MESSAGE_OVERHEAD + prompt_tokens[i] + MESSAGE_OVERHEAD
        size += sum(int(prompt_tokens[j]) + MESSAGE_OVERHEAD + answer_tokens for j in history)
        while long and len(history) and size + EXPECTED_OUTPUT <= SMALL_WINDOW:  # a long conversation
            j = int(rng.choice(members[a]))
            history.append(j)
            size += int(prompt_tokens[j]) + MESSAGE_OVERHEAD + answer_tokens
        turns: list[dict] = [{"role": "system", "content": systems[a]}]
        for j in history:
            turns += [{"role": "user", "content": bench.prompts[j]}, {"role": "assistant", "content": ANSWER}]
        turns.append({"role": "user", "content": bench.prompts[i]})
        messages.append(turns)
        offered = app.tool_definitions() if app.tools and rng.random() < tools_share else []
        tools.append(offered)
        later[i] = bool(history)
        sizes[i] = size
    limits = model_limits(bench)
    eligible = np.array(
        [
            [
                refusal(limits[m], Needs(int(sizes[i]), EXPECTED_OUTPUT, False, tools=bool(tools[i]))) is None
                for m in bench.model_names
            ]
            for i in range(n)
        ]  # fmt: skip
    )
    return ChatTraffic(messages, np.array([APPS[a].name for a in app_of]), later, tools, sizes, eligible)
