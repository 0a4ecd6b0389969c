import asyncio

from pydantic_ai import Agent

from governed_memory import AsyncMemoryClient
from governed_memory.pydantic_ai import memory_tools


async def main() -> None:
    async with AsyncMemoryClient() as memory:  # GAM_URL, GAM_TOKEN; the model needs its provider's key
        agent = Agent("openai:gpt-5", instructions="Remember what the user asks you to; recall before answering.", tools=memory_tools(memory))
        result = await agent.run("Remember that I prefer an aisle seat, then tell me which seat I like.")
        print(result.output)  # refusals reach the model as failed tool results carrying the REST code


asyncio.run(main())
