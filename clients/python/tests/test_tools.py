"""The tool adapters against the live product: the schemas are the served REST bodies, and an
OpenAI Agents SDK run and pydantic-ai runs with scripted offline models call the four tools,
read the fenced MCP text, and get refusals as tool errors carrying the REST code."""

from __future__ import annotations

import json
import sys
from itertools import count
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from governed_memory import UNTRUSTED_HEADER, AsyncMemoryClient, MemoryClient
from governed_memory.tools import TOOLS, tool_spec
from live_server import LiveServer, World

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from sync_tool_schemas import derive, dump  # noqa: E402

SHIPPED = Path(__file__).resolve().parents[1] / "src" / "governed_memory" / "tool_schemas.json"


def test_the_shipped_tool_schemas_are_what_the_live_server_serves(live: LiveServer, world: World):
    derived = derive(live.url(), world.member("agents").credential(("memory:read",)))
    assert dump(derived) == SHIPPED.read_text(encoding="utf-8"), "run clients/python/scripts/sync_tool_schemas.py"
    for operation in TOOLS:
        jsonschema.Draft202012Validator.check_schema(tool_spec(operation)["parameters"])
    remember = tool_spec("remember")["parameters"]
    assert remember["required"] == ["namespace", "text"] and remember["properties"]["text"]["maxLength"] == 1000
    assert tool_spec("recall")["parameters"]["properties"]["limit"]["maximum"] == 50


# --- OpenAI Agents SDK ------------------------------------------------------------------------------
def test_an_agents_sdk_run_calls_the_tools(live: LiveServer, world: World, namespace: str):
    from agents import Agent, ModelResponse, Runner, Usage, set_tracing_disabled
    from agents.models.interface import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    from governed_memory.openai_agents import memory_tools

    set_tracing_disabled(True)
    calls = [
        (
            "remember_memory",
            {"namespace": namespace, "key": "seat", "text": "Prefers aisle seats; tickets to ada@example.com"},
        ),
        ("recall_memories", {"query": "which seat on a plane", "namespace": namespace}),
        ("remember_memory", {"namespace": namespace, "key": "ada@example.com", "text": "a key with personal data"}),
        ("forget_memory", {"namespace": namespace, "key": "seat"}),
    ]

    class ScriptedModel(Model):
        """An offline model: one scripted tool call per turn, then a final answer; it keeps
        every input it was given, so the test reads what the tools answered."""

        def __init__(self) -> None:
            self.inputs: list[Any] = []
            self.ids = count(1)

        async def get_response(
            self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, **kwargs
        ) -> ModelResponse:
            self.inputs.append(input)
            turn = len(self.inputs) - 1
            if turn < len(calls):
                name, arguments = calls[turn]
                assert name in {t.name for t in tools}
                item = ResponseFunctionToolCall(
                    type="function_call", call_id=f"call_{next(self.ids)}", name=name, arguments=json.dumps(arguments)
                )
            else:
                item = ResponseOutputMessage(
                    type="message",
                    id="msg_1",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text="done", annotations=[])],
                )
            return ModelResponse(output=[item], usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError("the scripted model answers whole turns; Runner.run never streams")

    model = ScriptedModel()

    async def scenario():
        async with AsyncMemoryClient(live.url(), world.member("agents").credential()) as memory:
            agent = Agent(
                name="assistant", instructions="Use your memory tools.", model=model, tools=memory_tools(memory)
            )
            return await Runner.run(agent, "Remember my seat, then tell me what you know.")

    result = anyio.run(scenario)
    assert result.final_output == "done"
    outputs = [
        item["output"]
        for item in model.inputs[-1]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    remembered, recalled, refused, forgotten = outputs
    assert remembered.startswith(UNTRUSTED_HEADER) and "Prefers aisle seats; tickets to [EMAIL]" in remembered
    assert 'trust="untrusted" evidence="false">Prefers aisle seats' in recalled and "Recalled 1 memories" in recalled
    assert refused.startswith("Error AGENT_MEMORY_PERSONAL_DATA (HTTP 400): ") and '"key"' in refused
    assert (
        forgotten.startswith("Forgot 1 memory version(s); deletion receipt ") and UNTRUSTED_HEADER not in forgotten
    )  # no memory, no header
    with MemoryClient(live.url(), world.member("agents").credential()) as memory:
        assert list(memory.list(namespace=namespace)) == []


def test_agents_sdk_tools_from_a_sync_client(live: LiveServer, world: World, namespace: str):
    from agents.tool_context import ToolContext

    from governed_memory.openai_agents import memory_tools

    with MemoryClient(live.url(), world.member("agents").credential(("memory:read",))) as memory:
        remember, recall, *_ = memory_tools(memory)
        context = ToolContext(context=None, tool_name=remember.name, tool_call_id="c1", tool_arguments="{}")

        async def scenario():
            return await remember.on_invoke_tool(
                context, json.dumps({"namespace": namespace, "text": "x"})
            ), await recall.on_invoke_tool(context, json.dumps({"query": "anything", "namespace": namespace}))

        refused, empty = anyio.run(scenario)
    assert refused.startswith("Error INSUFFICIENT_SCOPE (HTTP 403)") and "Recalled 0 memories" in empty


# --- pydantic-ai ------------------------------------------------------------------------------------
def test_a_pydantic_ai_run_with_a_scripted_function_model(live: LiveServer, world: World, namespace: str):
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from governed_memory.pydantic_ai import memory_tools

    script = [
        ("remember_memory", {"namespace": namespace, "key": "lang", "text": "Answers in Japanese first, then English"}),
        ("list_memories", {"namespace": namespace}),
        ("recall_memories", {"query": "which language", "namespace": namespace, "limit": 0}),
    ]

    def scripted(messages, info: AgentInfo) -> ModelResponse:
        assert {t.name for t in info.function_tools} == {
            "remember_memory",
            "recall_memories",
            "list_memories",
            "forget_memory",
        }
        turn = sum(1 for m in messages if isinstance(m, ModelResponse))
        if turn < len(script):
            name, arguments = script[turn]
            return ModelResponse(parts=[ToolCallPart(tool_name=name, args=arguments, tool_call_id=f"t{turn}")])
        return ModelResponse(parts=[TextPart("done")])

    async def scenario():
        async with AsyncMemoryClient(live.url(), world.member("pydantic").credential()) as memory:
            agent = Agent(FunctionModel(scripted), tools=memory_tools(memory))
            return await agent.run("Remember my language.")

    result = anyio.run(scenario)
    assert result.output == "done"
    returns = [p for m in result.all_messages() for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    assert [p.tool_name for p in returns] == ["remember_memory", "list_memories", "recall_memories"]
    assert "Remembered 1 memory" in returns[0].content and returns[0].outcome == "success"
    assert "<memory " in returns[1].content and 'trust="untrusted"' in returns[1].content
    assert (
        returns[2].outcome == "failed"
        and returns[2].content.startswith("Error VALIDATION_ERROR (HTTP 400): ")
        and '"limit"' in returns[2].content
    )


def test_pydantic_ai_test_model_calls_every_tool(live: LiveServer, world: World):
    from pydantic_ai import Agent
    from pydantic_ai.messages import ToolReturnPart
    from pydantic_ai.models.test import TestModel

    from governed_memory.pydantic_ai import memory_tools

    async def scenario():
        async with AsyncMemoryClient(live.url(), world.member("pydantic").credential()) as memory:
            agent = Agent(TestModel(call_tools="all"), tools=memory_tools(memory))
            return await agent.run("Use every tool once.")

    result = anyio.run(scenario)
    returns = {
        p.tool_name: p for m in result.all_messages() for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)
    }
    assert set(returns) == {"remember_memory", "recall_memories", "list_memories", "forget_memory"}
    for part in returns.values():
        # TestModel invents arguments from the schemas: each call is answered, or refused by the server with its code.
        assert (
            part.content.startswith(UNTRUSTED_HEADER)
            if part.outcome == "success"
            else part.content.startswith("Error ")
        )


@pytest.mark.parametrize(
    "module", ["governed_memory.langgraph", "governed_memory.openai_agents", "governed_memory.pydantic_ai"]
)
def test_an_adapter_without_its_framework_names_the_extra(module: str, tmp_path: Path):
    import subprocess

    framework = {
        "governed_memory.langgraph": "langgraph",
        "governed_memory.openai_agents": "agents",
        "governed_memory.pydantic_ai": "pydantic_ai",
    }[module]
    # A module of the framework's name that fails to import stands for the framework not being installed.
    (tmp_path / framework).mkdir()
    (tmp_path / framework / "__init__.py").write_text("raise ImportError('not installed')\n")
    completed = subprocess.run(
        [sys.executable, "-c", f"import {module}"], env={"PYTHONPATH": str(tmp_path)}, capture_output=True, text=True
    )
    extra = {
        "governed_memory.langgraph": "langgraph",
        "governed_memory.openai_agents": "openai-agents",
        "governed_memory.pydantic_ai": "pydantic-ai",
    }[module]
    # the hint names what can be installed: the client's directory with the extra, not an unpublished name
    assert completed.returncode == 1 and f"pip install './clients/python[{extra}]'" in completed.stderr
    import tomllib

    declared = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert extra in declared  # ... and the extra it names exists
