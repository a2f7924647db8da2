"""An application built on the official Python MCP SDK, the way applications use it: one
ClientSession over stdio, tools listed once at start and again only when the server says
`notifications/tools/list_changed`, each tool call given a timeout. Its "model" is the tests'
scripted stand-in (tests/src/model.rs), asked over its Anthropic-style API without streaming.

    python_agent.py <model base url> <prompt> <tool timeout seconds> -- <server command...>

Prints the model's last words on stdout. Used by tests/tests/real_agents.rs.
"""

import asyncio
import json
import sys
import urllib.request

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
import mcp.types as types


def ask_model(base, tools, messages):
    body = json.dumps({
        "model": "stand-in", "max_tokens": 1024, "stream": False,
        "tools": [{"name": t.name, "description": t.description or "",
                   "input_schema": t.input_schema} for t in tools],
        "messages": messages,
    }).encode()
    request = urllib.request.Request(base + "/v1/messages", data=body,
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as answer:
        return json.loads(answer.read())


async def main():
    base, prompt, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
    command = sys.argv[sys.argv.index("--") + 1:]
    server = StdioServerParameters(command=command[0], args=command[1:])
    relist = asyncio.Event()

    async def on_message(message):
        # SDK 1.x wraps notifications in a root model; 2.x hands them over as they are.
        if isinstance(getattr(message, "root", message), types.ToolListChangedNotification):
            relist.set()

    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            messages = [{"role": "user", "content": prompt}]
            while True:
                if relist.is_set():
                    relist.clear()
                    tools = (await session.list_tools()).tools
                reply = await asyncio.to_thread(ask_model, base, tools, messages)
                content = reply["content"]
                messages.append({"role": "assistant", "content": content})
                uses = [c for c in content if c["type"] == "tool_use"]
                if not uses:
                    print(" ".join(c.get("text", "") for c in content), flush=True)
                    return
                results = []
                for use in uses:
                    try:
                        result = await session.call_tool(use["name"], use["input"],
                                                         read_timeout_seconds=timeout)
                        text = "\n".join(c.text for c in result.content if c.type == "text")
                        error = bool(result.is_error)
                    except Exception as e:  # a timeout, a protocol error: the model is told
                        text, error = f"the tool call failed: {e}", True
                    results.append({"type": "tool_result", "tool_use_id": use["id"],
                                    "content": text, "is_error": error})
                messages.append({"role": "user", "content": results})


asyncio.run(main())
