"""Conversation turns and reply usage (agent API), and agents (workspace API) — SPEC §9.

Agent endpoints authenticate like the memory endpoints (rows 1–4 of the gate, SPEC §2); the
memory switches are then skip reasons, answered in the body, not refusals:

- `POST /api/agent/v1/conversations/turns` (scope memory:write — a turn leads to memory writes)
  `{agentId, conversationId, anonymous?, messages: [{role, content}]}` →
  202 `{"consolidation": {"id", "status": "queued", "reason": null}}` or
  200 `{"consolidation": {"id", "status": "skipped", "reason", "message"[, "personalData"]}}`;
  404 `AGENT_NOT_FOUND` for an agent not in the credential's workspace. At most
  MAX_MASKED_CHARS characters of messages per turn (VALIDATION_ERROR), and at most
  AGENT_TURNS_PER_HOUR turns per credential per rolling hour (429 `AGENT_MEMORY_RATE_LIMITED`
  with `Retry-After`; every answer carries the `RateLimit-*` headers).
- `POST /api/agent/v1/usage/replies` (scope memory:read — the reply's input held recalled memories)
  `{conversationId, model, inputTokens, outputTokens, memoryTokens?}` → 201 `{"usage": U}`;
  400 `UNKNOWN_MODEL` when the model has no price.
- `GET, POST /api/w/:wsId/agents`, `GET, PATCH /api/w/:wsId/agents/:id` (writes need `agents:manage`).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import validation_error
from core.fields import IdField, PlainText, StrictSerializer
from credits import charging, usage
from governance.api.base import WorkspaceAPIView
from governance.models import Agent
from memoryapp import gates
from memoryapp.api.responses import AGENT_ERRORS, TurnResponse
from memoryapp.api.views import agent_request
from memoryapp.consolidation import agent_json, create_agent, submit_agent_turn, update_agent
from memoryapp.masking import MAX_MASKED_CHARS
from memoryapp.schemas import ScreenedText

MAX_TOKENS = 10**9


class MessageBody(StrictSerializer):
    role = serializers.ChoiceField(choices=["user", "assistant", "system"])
    content = PlainText(min_length=1, max_length=8000, trim_whitespace=False)


class TurnBody(StrictSerializer):
    agentId = IdField()
    conversationId = ScreenedText(min_length=1, max_length=120)
    anonymous = serializers.BooleanField(required=False, default=False)
    messages = serializers.ListField(child=MessageBody(), min_length=1, max_length=50)

    def validate(self, attrs):
        # Every message is screened for personal data, so the total bounds the time a turn costs.
        total = sum(len(m["content"]) for m in attrs["messages"])
        if total > MAX_MASKED_CHARS:
            raise serializers.ValidationError(
                {"messages": [f"At most {MAX_MASKED_CHARS} characters of messages per turn (this turn has {total})."]}
            )
        return attrs


class ReplyUsageBody(StrictSerializer):
    conversationId = ScreenedText(min_length=1, max_length=120)
    model = ScreenedText(min_length=1, max_length=120)
    inputTokens = serializers.IntegerField(min_value=0, max_value=MAX_TOKENS)
    outputTokens = serializers.IntegerField(min_value=0, max_value=MAX_TOKENS)
    memoryTokens = serializers.IntegerField(min_value=0, max_value=MAX_TOKENS, required=False, default=0)

    def validate(self, attrs):
        if attrs["memoryTokens"] > attrs["inputTokens"]:
            raise serializers.ValidationError(
                {"memoryTokens": ["AI-memory tokens are part of the input, so at most inputTokens."]}
            )
        return attrs


def _context_and_body(request, operation: str, serializer_class) -> tuple[gates.AgentContext, dict[str, Any]]:
    ctx, body = agent_request(request, operation, switches=False)  # rows 1–4 before the body is judged
    if not isinstance(body, dict):
        raise validation_error({"non_field_errors": ["The body must be a JSON object."]})
    serializer = serializer_class(data=body)
    serializer.is_valid(raise_exception=True)  # rendered as VALIDATION_ERROR with per-field details
    return ctx, dict(serializer.validated_data)


class TurnsView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        request=TurnBody,
        responses={200: TurnResponse, 202: TurnResponse, **AGENT_ERRORS},
        summary="Submit a conversation turn for consolidation into AI memories",
    )
    def post(self, request):
        ctx, data = _context_and_body(request, "remember", TurnBody)
        submitted, slot = submit_agent_turn(
            ctx,
            agent_id=data["agentId"],
            conversation_id=data["conversationId"],
            anonymous=data["anonymous"],
            messages=[dict(m) for m in data["messages"]],
        )
        queued = submitted.consolidation.status == "queued"
        return Response(submitted.json(), status=202 if queued else 200, headers=slot.headers())


class ReplyUsageView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        request=ReplyUsageBody,
        responses={201: OpenApiTypes.OBJECT},
        summary="Report a reply's token usage (AI-memory tokens included in input)",
    )
    def post(self, request):
        ctx, data = _context_and_body(request, "recall", ReplyUsageBody)
        record = charging.record_reply_usage(
            ctx.member,
            conversation_id=data["conversationId"],
            model_name=data["model"],
            input_tokens=data["inputTokens"],
            output_tokens=data["outputTokens"],
            memory_tokens=data["memoryTokens"],
        )
        return Response({"usage": usage.usage_json(record)}, status=201)


# --- agents (workspace API) ---------------------------------------------------------------------------
class AgentBody(StrictSerializer):
    name = ScreenedText(min_length=1, max_length=120)
    vectorMemory = serializers.BooleanField(required=False, default=False)


class AgentPatchBody(StrictSerializer):
    name = ScreenedText(min_length=1, max_length=120, required=False)
    vectorMemory = serializers.BooleanField(required=False)


class AgentsView(WorkspaceAPIView):
    permissions = {"POST": "agents:manage"}

    def get(self, request, ws_id):
        return Response({"agents": [agent_json(a) for a in self.scoped(Agent.objects.all())]})

    @extend_schema(request=AgentBody, responses={201: OpenApiTypes.OBJECT})
    def post(self, request, ws_id):
        data = self.body(request, AgentBody)
        agent = create_agent(self.workspace, name=data["name"], vector_memory=data["vectorMemory"], actor=request.user)
        return Response(agent_json(agent), status=201)


class AgentView(WorkspaceAPIView):
    permissions = {"PATCH": "agents:manage"}

    def get(self, request, ws_id, agent_id):
        return Response(agent_json(self.get_scoped(Agent.objects.all(), agent_id, "agent")))

    @extend_schema(request=AgentPatchBody, responses={200: OpenApiTypes.OBJECT})
    def patch(self, request, ws_id, agent_id):
        agent = self.get_scoped(Agent.objects.all(), agent_id, "agent")
        data = self.body(request, AgentPatchBody, partial=True)
        agent = update_agent(agent, actor=request.user, name=data.get("name"), vector_memory=data.get("vectorMemory"))
        return Response(agent_json(agent))
