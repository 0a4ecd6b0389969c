import asyncio
import os

from pydantic_ai import Agent

from governed_memory import AsyncMemoryClient
from governed_memory.pydantic_ai import memory_tools

from scripted_models import pydantic_ai_model  # offline: a FunctionModel that calls the tools as scripted, then answers

RULES = "Remember what the user asks you to; recall before answering."
ASK = "Remember that I prefer an aisle seat; tickets go to ada@example.com. Then tell me which seat I like."


async def main() -> None:
    async with AsyncMemoryClient() as memory:  # GAM_URL (default http://127.0.0.1:8000) and GAM_TOKEN
        model = "openai:gpt-5" if os.environ.get("OPENAI_API_KEY") else pydantic_ai_model()  # any pydantic-ai model
        agent = Agent(model, instructions=RULES, tools=memory_tools(memory))
        result = await agent.run(ASK)
        print(result.output)  # refusals reach the model as failed tool results carrying the REST code


asyncio.run(main())
