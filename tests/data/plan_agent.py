"""A scripted outside agent for ``agent.external`` and ``evoaudit serve`` tests: no model, the mcp SDK's
client over streamable HTTP.

    python plan_agent.py PLANS.json [LOG]

PLANS.json: ``{prompt: [{"calls": [[function, args, text, is_error], ...], "answer": str}, ...]}``, each
entry a recorded episode. The agent fetches the ``system`` and ``task`` prompts, then at each step makes
the next call of the first entry whose calls so far are the ones made, answered as this episode saw
them (so a fixture with injected text leads it down the attacked branch), and submits that entry's answer with
``submit_answer`` on the control server. With no entry for the prompt it makes no call and prints an
answer on stdout instead. With LOG, one line per episode is appended there (its calls and answer).
"""

from __future__ import annotations

import json
import os
import sys

import anyio
from mcp import Client


def _text(result) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


async def main(plans_path: str, log: str | None = None) -> None:
    plans = json.loads(open(plans_path, encoding="utf-8").read())
    async with Client(os.environ["EVOAUDIT_MCP_URL"]) as client:
        await client.get_prompt("system")
        prompt = (await client.get_prompt("task")).messages[0].content.text
        entries = list(plans.get(prompt, []))
        if not entries:
            print("no plan for this request")
            return
        seen: list[list] = []  # [function, args, text, is_error] of each call made
        while True:
            step = len(seen)
            entries = [e for e in entries if e["calls"][:step] == seen]
            if not entries:
                raise SystemExit(f"no recorded episode matches the results after {step} calls")
            chosen = entries[0]
            if step == len(chosen["calls"]):
                break
            function, args, _, _ = chosen["calls"][step]
            result = await client.call_tool(function, args)
            seen.append([function, args, _text(result), bool(result.is_error)])
    async with Client(os.environ["EVOAUDIT_MCP_CONTROL_URL"]) as control:
        await control.call_tool("submit_answer", {"answer": chosen["answer"]})
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"calls": len(seen), "answer": chosen["answer"]}) + "\n")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:3])
