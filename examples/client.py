"""A client of the gateway: the OpenAI SDK, unchanged -- only base_url, the team's key and the model name.

RESEARCH_KEY=sk-... python examples/client.py "Write a haiku about routers"
"""

import os
import sys

from openai import OpenAI

client = OpenAI(base_url=os.environ.get("GATEWAY_URL", "http://localhost:4000/v1"), api_key=os.environ["RESEARCH_KEY"])
prompt = " ".join(sys.argv[1:]) or "Explain doubly robust estimation in two sentences."

raw = client.chat.completions.with_raw_response.create(model="regret-router", messages=[{"role": "user", "content": prompt}])
reply = raw.parse()
print(reply.choices[0].message.content)
print(
    f"\nanswered by {raw.headers.get('x-regret-model')} (tier {raw.headers.get('x-regret-tier')}); "
    f"request id {raw.headers.get('x-regret-request-id')}"
)

# Streamed, as chat apps ask; a request may ask for another tier if its team allows it (research may use economy):
stream = client.chat.completions.with_raw_response.create(
    model="regret-router", messages=[{"role": "user", "content": prompt}], stream=True, extra_body={"regret_tier": "economy"}
)
text = "".join(chunk.choices[0].delta.content or "" for chunk in stream.parse() if chunk.choices)
print(f"economy tier, streamed, answered by {stream.headers.get('x-regret-model')}: {text[:60]}")
