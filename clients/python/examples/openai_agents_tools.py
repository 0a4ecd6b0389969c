import asyncio
import os

from agents import Agent, Runner

from governed_memory import AsyncMemoryClient
from governed_memory.openai_agents import memory_tools

from scripted_models import agents_model  # offline: a model that calls the tools as scripted, then answers

RULES = "Remember what the user asks you to; recall before answering."
ASK = "Remember that I prefer an aisle seat; tickets go to ada@example.com. Then tell me which seat I like."


async def main() -> None:
    async with AsyncMemoryClient() as memory:  # GAM_URL (default http://127.0.0.1:8000) and GAM_TOKEN
        model = None if os.environ.get("OPENAI_API_KEY") else agents_model()  # None: the SDK's default OpenAI model
        agent = Agent(name="assistant", model=model, instructions=RULES, tools=memory_tools(memory))
        result = await Runner.run(agent, ASK)
        print(result.final_output)  # refusals reach the model as "Error <CODE> (HTTP <status>): …"


asyncio.run(main())
