import asyncio

from agents import Agent, Runner

from governed_memory import AsyncMemoryClient
from governed_memory.openai_agents import memory_tools


async def main() -> None:
    async with AsyncMemoryClient() as memory:  # GAM_URL, GAM_TOKEN; the model needs OPENAI_API_KEY
        agent = Agent(name="assistant", instructions="Remember what the user asks you to; recall before answering.", tools=memory_tools(memory))
        result = await Runner.run(agent, "Remember that I prefer an aisle seat, then tell me which seat I like.")
        print(result.final_output)  # refusals reach the model as "Error <CODE> (HTTP <status>): …"


asyncio.run(main())
