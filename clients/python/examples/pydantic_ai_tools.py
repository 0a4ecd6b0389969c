import asyncio
import os

from pydantic_ai import Agent

from governed_memory import AsyncMemoryClient
from governed_memory.pydantic_ai import memory_tools

from scripted_models import pydantic_ai_model  # offline: a FunctionModel that calls the tools as scripted, then answers


async def main() -> None:
    async with AsyncMemoryClient() as memory:  # GAM_URL (default http://127.0.0.1:8000) and GAM_TOKEN
        model = (
            "openai:gpt-5" if os.environ.get("OPENAI_API_KEY") else pydantic_ai_model()
        )  # or any pydantic-ai model name
        agent = Agent(
            model,
            instructions="Remember what the user asks you to; recall before answering.",
            tools=memory_tools(memory),
        )
        result = await agent.run(
            "Remember that I prefer an aisle seat; tickets go to ada@example.com. Then tell me which seat I like."
        )
        print(result.output)  # refusals reach the model as failed tool results carrying the REST code


asyncio.run(main())
