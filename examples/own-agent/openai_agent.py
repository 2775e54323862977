"""A minimal tool-calling agent for an instance served by evoaudit (``evoaudit serve --transport http``, or
the workflow's ``agent.external``): an OpenAI-compatible chat-completions loop over the MCP tools. Copy it
and put your own scaffold in its place; docs/own-agent.md.

    python openai_agent.py --base-url http://127.0.0.1:8000/v1 --model MODEL [--api-key-env VAR]

It reads the served instance from the environment (EVOAUDIT_MCP_URL: the tools and the prompts ``system``
and ``task``; EVOAUDIT_MCP_CONTROL_URL: ``submit_answer``; EVOAUDIT_SEED: the episode's seed, sent with
each request when set), runs the model until it answers without a tool call or ``--max-steps`` turns, and
hands the answer over with ``submit_answer``.
"""

from __future__ import annotations

import argparse
import json
import os

import anyio
from mcp import Client
from openai import AsyncOpenAI


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def run(args: argparse.Namespace) -> str:
    model = AsyncOpenAI(base_url=args.base_url, api_key=os.environ.get(args.api_key_env, "not-needed"))
    seed = os.environ.get("EVOAUDIT_SEED")
    extra = {"seed": int(seed)} if seed else {}
    answer = ""
    async with Client(os.environ["EVOAUDIT_MCP_URL"]) as tools_server:
        listed = (await tools_server.list_tools()).tools
        tools = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description or "",
                    "parameters": t.input_schema,
                },
            }
            for t in listed
        ]
        system = (await tools_server.get_prompt("system")).messages[0].content.text
        task = (await tools_server.get_prompt("task")).messages[0].content.text  # starts the episode
        messages: list[dict] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
        for _ in range(args.max_steps):
            response = await model.chat.completions.create(
                model=args.model, messages=messages, tools=tools, temperature=args.temperature, **extra
            )
            reply = response.choices[0].message
            calls = reply.tool_calls or []
            turn: dict = {"role": "assistant", "content": reply.content}
            if calls:
                turn["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in calls
                ]
            messages.append(turn)
            if not calls:
                answer = reply.content or ""
                break
            for call in calls:
                try:
                    arguments = json.loads(call.function.arguments or "{}")
                except json.JSONDecodeError as exc:
                    text = f"JSONDecodeError: {exc}"
                else:
                    text = _text(await tools_server.call_tool(call.function.name, arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    async with Client(os.environ["EVOAUDIT_MCP_CONTROL_URL"]) as control:
        await control.call_tool("submit_answer", {"answer": answer})
    return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--base-url", required=True, help="the OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1"
    )
    parser.add_argument("--model", required=True, help="the model id the endpoint serves")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="variable holding the key (if any)")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-steps", type=int, default=12, help="model turns before the episode stops")
    print(anyio.run(run, parser.parse_args()))


if __name__ == "__main__":
    main()
