"""Shared helpers for the consolidation and credits tests (no tests here)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal

from credits import charging
from credits.models import ModelPrice
from governance.models import Agent, Member
from memoryapp.consolidation import create_agent
from memoryapp.system_models import ExtractedMemory, Extraction, SystemModelError

STUB_MODEL = "stub-model"
# 1,000 input tokens at 1 credit and 1,000 output tokens at 2 credits: 3 credits a consolidation.
STUB_COST = Decimal("3.000000")


@dataclass
class StubModel:
    """A system model with fixed token counts; records what it was sent."""

    memories: list[ExtractedMemory] = field(default_factory=list)
    fail: bool = False
    name: str = STUB_MODEL
    received: list[list[dict[str, str]]] = field(default_factory=list)

    def extract(self, messages):
        self.received.append([dict(m) for m in messages])
        if self.fail:
            raise SystemModelError("HTTP 503")
        return Extraction(model_name=self.name, input_tokens=1000, output_tokens=1000, memories=list(self.memories))


def price_stub_model() -> None:
    ModelPrice.objects.update_or_create(
        model_name=STUB_MODEL, defaults={"input_per_1k": Decimal("1"), "output_per_1k": Decimal("2")}
    )


def use_stub(monkeypatch, model: StubModel) -> StubModel:
    price_stub_model()
    monkeypatch.setattr("memoryapp.consolidation.get_system_model", lambda: model)
    return model


def grant(workspace, amount: str = "100") -> None:
    charging.grant_credits(workspace, Decimal(amount))


def ai_agent(world, *, vector_memory: bool = True) -> Agent:
    return create_agent(world.workspace, name="Helper", vector_memory=vector_memory, actor=world.owner.user)


def post_turn(
    agent_client,
    agent: Agent | int,
    messages,
    *,
    anonymous: bool | None = None,
    conversation_id: str = "conv-1",
    capture=None,
):
    body = {"agentId": str(getattr(agent, "pk", agent)), "conversationId": conversation_id, "messages": messages}
    if anonymous is not None:
        body["anonymous"] = anonymous

    def send():
        return agent_client.client.generic(
            "POST",
            "/api/agent/v1/conversations/turns",
            json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {agent_client.token}",
        )

    if capture is None:
        return send()
    with capture(execute=True):
        return send()


def user_says(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]


def balance(workspace) -> Decimal:
    return charging.balance_of(workspace)


def member_in(world, email: str, role: str) -> Member:
    from governance import actions

    return actions.add_member(world.workspace, email, role=role)
