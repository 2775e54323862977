"""The pre-flight's tool-call probe: one request that needs a tool, shared by the pre-flight that sends it and
the simulator that answers it (as a server whose model calls tools natively would)."""

# Neutral on purpose (nothing like the audited suite's tools), and asked for in so many words, so that a
# model able to call tools at all calls this one.
TOOL_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city, e.g. London"}},
            "required": ["city"],
        },
    },
}
TOOL_PROBE_PROMPT = "What is the weather in Paris right now? Look it up with the get_weather tool."
