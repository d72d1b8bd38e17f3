"""What a user of openai-python and the OpenAI Agents SDK does against Agentplane's Responses
API. Prints one JSON object of what it read; tests/openai_sdk.rs checks it.

Env: AP_BASE (the client API's base URL), AP_KEY (a project key), AP_AGENT (an agent id)."""
import asyncio
import json
import os
import time

import openai
from openai import AsyncOpenAI, OpenAI

base, key, agent = os.environ["AP_BASE"], os.environ["AP_KEY"], os.environ["AP_AGENT"]
client = OpenAI(base_url=base, api_key=key, max_retries=0)
seen = {}

# A plain create: `model` names the agent.
first = client.responses.create(model=agent, input="hi")
seen["create"] = {"id": first.id, "text": first.output_text, "status": first.status,
                  "total_tokens": first.usage.total_tokens, "item_id": first.output[0].id}

# Streaming, raw events.
events = list(client.responses.create(model=agent, input="stream please", stream=True))
seen["stream_types"] = [e.type for e in events]
seen["stream_sequence"] = [e.sequence_number for e in events]
seen["stream_text"] = "".join(e.delta for e in events if e.type == "response.output_text.delta")

# The stream helper.
with client.responses.stream(model=agent, input="and again") as stream:
    final = stream.get_final_response()
seen["helper_text"] = final.output_text

# previous_response_id continues the session.
again = client.responses.create(model=agent, input="more", previous_response_id=first.id)
seen["continued_id"] = again.id
seen["continued_text"] = again.output_text

# An unknown previous response is a 404 the SDK reads.
try:
    client.responses.create(model=agent, input="x", previous_response_id="resp_00000000-0000-4000-8000-000000000000")
    seen["unknown_previous"] = "no error"
except openai.NotFoundError as e:
    seen["unknown_previous"] = e.code

# A refused field names itself.
try:
    client.responses.create(model=agent, input="x", tool_choice="required")
    seen["refused"] = "no error"
except openai.BadRequestError as e:
    seen["refused"] = [e.code, e.param]

# A function tool run by the caller: the call comes back, its output goes in, the turn ends.
tools = [{"type": "function", "name": "lookup", "description": "Look a thing up",
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}]
paused = client.responses.create(model=agent, input="look it up", tools=tools)
call = next(item for item in paused.output if item.type == "function_call")
seen["function_call"] = {"name": call.name, "arguments": json.loads(call.arguments), "call_id": call.call_id}
done = client.responses.create(model=agent, previous_response_id=paused.id, tools=tools,
                               input=[{"type": "function_call_output", "call_id": call.call_id, "output": "42"}])
seen["function_answer"] = done.output_text

# Retrieve reads the session's latest turn back; cancel ends a paused one.
got = client.responses.retrieve(first.id)
seen["retrieve"] = {"id": got.id, "status": got.status, "text": got.output_text}
waiting = client.responses.create(model=agent, input="look again", tools=tools)
cancelled = client.responses.cancel(waiting.id)
seen["cancelled"] = {"before": waiting.status, "after": cancelled.status}

# A background turn: queued at once, then read back through its session's Response.
queued = client.responses.create(model=agent, input="in the background", background=True)
later = None
for _ in range(200):
    try:
        later = client.responses.retrieve(f"resp_{queued.session_id}")
        if later.status == "completed":
            break
    except openai.NotFoundError:
        pass
    time.sleep(0.1)
seen["background"] = {"queued": queued.status, "status": later.status if later else None,
                      "text": later.output_text if later else None}

# The Agents SDK with a local function tool that must run.
from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled

set_tracing_disabled(True)
set_default_openai_client(AsyncOpenAI(base_url=base, api_key=key, max_retries=0), use_for_tracing=False)
ran = []


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order's status."""
    ran.append(order_id)
    return f"order {order_id} shipped"


assistant = Agent(name="support", instructions="Use tools.", model=agent, tools=[lookup_order])


async def agents_sdk():
    result = await Runner.run(assistant, "where is A1?")
    seen["agents_run"] = result.final_output
    streamed = Runner.run_streamed(assistant, "where is B2?")
    async for _ in streamed.stream_events():
        pass
    seen["agents_streamed"] = streamed.final_output
    follow = await Runner.run(assistant, streamed.to_input_list() + [{"role": "user", "content": "thanks"}])
    seen["agents_multi_turn"] = follow.final_output
    seen["agents_tool_ran"] = ran


asyncio.run(agents_sdk())
print(json.dumps(seen))
