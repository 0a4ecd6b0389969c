"""Offline stand-ins for a model, so that the agent examples run without a provider key.

Each plays the part of the model in an agent run: one tool call per turn from SCRIPT, then a final
answer that quotes what the last tool returned (the fenced memories the server recalled). The
tools, the server and the framework's run loop are all real; only the model's choices are scripted.
With OPENAI_API_KEY set, the examples use a real model instead and never call these.
"""

from __future__ import annotations

import json

# What a model would do with "Remember that I prefer an aisle seat…, then tell me which seat I like."
SCRIPT = [
    (
        "remember_memory",
        {"namespace": "travel", "key": "seat", "text": "Prefers an aisle seat; tickets to ada@example.com"},
    ),
    ("recall_memories", {"namespace": "travel", "query": "which seat on a plane?"}),
]


def answer(tool_output: str) -> str:
    return f"From my memory tools:\n{tool_output}"


def agents_model(script=SCRIPT):
    """An OpenAI Agents SDK `Model` (agents.models.interface) that follows the script."""
    from agents import ModelResponse, Usage, set_tracing_disabled
    from agents.models.interface import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)  # traces are exported to OpenAI, which needs the key this model does without

    class ScriptedModel(Model):
        async def get_response(
            self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, **kwargs
        ) -> ModelResponse:
            outputs = [
                item["output"]
                for item in input
                if isinstance(item, dict) and item.get("type") == "function_call_output"
            ]
            if len(outputs) < len(script):
                name, arguments = script[len(outputs)]
                item = ResponseFunctionToolCall(
                    type="function_call", call_id=f"call_{len(outputs)}", name=name, arguments=json.dumps(arguments)
                )
            else:
                text = ResponseOutputText(type="output_text", text=answer(outputs[-1]), annotations=[])
                item = ResponseOutputMessage(
                    type="message", id="msg_answer", role="assistant", status="completed", content=[text]
                )
            return ModelResponse(output=[item], usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError("the scripted model answers whole turns (Runner.run), not streams")

    return ScriptedModel()


def pydantic_ai_model(script=SCRIPT):
    """A pydantic-ai `FunctionModel` (pydantic_ai.models.function) that follows the script."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def scripted(messages: list, info: AgentInfo) -> ModelResponse:
        outputs = [
            part.content
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ]
        if len(outputs) < len(script):
            name, arguments = script[len(outputs)]
            return ModelResponse(
                parts=[ToolCallPart(tool_name=name, args=arguments, tool_call_id=f"call_{len(outputs)}")]
            )
        return ModelResponse(parts=[TextPart(answer(outputs[-1]))])

    return FunctionModel(scripted)
