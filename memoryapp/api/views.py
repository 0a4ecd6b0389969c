"""Agent REST endpoints (SPEC §3) and the member/owner memory endpoints (SPEC §5).

Views only translate HTTP: the gate order lives in `memoryapp.gates`, the rules in actions."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions as drf
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.fields import PlainText, StrictSerializer
from core.params import DRY_RUN, parse_id, query_dry_run, query_int
from governance.actions import set_remember_me
from governance.api.base import WorkspaceAPIView
from governance.auth import AgentBearerAuthentication, bearer_token
from memoryapp import actions, assistant, gates, reads
from memoryapp.api.exceptions import body_error
from memoryapp.api.responses import AGENT_ERRORS, ForgetResponse, ListResponse, RecallResponse, RememberResponse
from memoryapp.models import AccessSurface, MemoryVersion
from memoryapp.schemas import DetailsField, ForgetBody, KindField, ListBody, RecallBody, RememberBody


def agent_request(request: Request, operation: str, *, switches: bool = True) -> tuple[gates.AgentContext, Any]:
    """Gate rows 1–5 (or 1–4 without the memory switches), then the body: a body that cannot be
    read is refused at row 6, after the credential checks."""
    token = bearer_token(request.META.get("HTTP_AUTHORIZATION"))
    try:
        body = request.data
    except (drf.UnsupportedMediaType, drf.ParseError) as exc:
        body = exc
    ctx = gates.admit_agent(token, operation, switches=switches)
    if isinstance(body, (drf.UnsupportedMediaType, drf.ParseError)):
        raise body_error(body)
    return ctx, body


class AgentOperationView(APIView):
    authentication_classes = [AgentBearerAuthentication]
    permission_classes = [AllowAny]
    operation = ""

    def admission(self, request: Request) -> gates.Admission:
        ctx, body = agent_request(request, self.operation)
        return gates.admit_with(ctx, self.operation, body)


class RememberView(AgentOperationView):
    operation = "remember"

    @extend_schema(
        request=RememberBody,
        responses={201: RememberResponse, **AGENT_ERRORS},
        summary="Remember a note about the credential's member",
    )
    def post(self, request):
        result = actions.remember(self.admission(request))
        return Response(
            {"memory": result.json, "superseded": result.superseded},
            status=201,
            headers=result.slot.headers() if result.slot else None,
        )


class RecallView(AgentOperationView):
    operation = "recall"

    @extend_schema(
        request=RecallBody,
        responses={200: RecallResponse, **AGENT_ERRORS},
        summary="Recall the memories that best match a query",
    )
    def post(self, request):
        read = reads.recall_memories(self.admission(request), surface=AccessSurface.REST)
        return Response(read.body, headers=read.headers)


class ListView(AgentOperationView):
    operation = "list"

    @extend_schema(
        request=ListBody, responses={200: ListResponse, **AGENT_ERRORS}, summary="List memories, newest first"
    )
    def post(self, request):
        read = reads.list_memories(self.admission(request), surface=AccessSurface.REST)
        return Response(read.body, headers=read.headers)


class ForgetView(AgentOperationView):
    operation = "forget"

    @extend_schema(
        request=ForgetBody,
        responses={200: ForgetResponse, **AGENT_ERRORS},
        summary="Forget a memory (every version of its key)",
    )
    def post(self, request):
        return Response(actions.forget(self.admission(request)))


# --- member and owner endpoints ----------------------------------------------------------------
DRY_RUN_PARAMETER = OpenApiParameter(
    DRY_RUN,
    str,
    required=False,
    enum=["1", "true", "0", "false"],
    description="1 or true: answer {dryRun, manifest, planToken} and erase nothing",
)
PLAN_TOKEN_PARAMETER = OpenApiParameter(
    "planToken",
    str,
    required=False,
    description="planToken of a dry run: erase only if exactly what it previewed is still what would be erased, else "
    "409 PREVIEW_OUTDATED (with the new manifest and token) and nothing erased",
)


class AgentMemoriesView(WorkspaceAPIView):
    """The member's own agent memories (never anyone else's, whatever the role)."""

    @extend_schema(
        parameters=[
            OpenApiParameter(n, str, required=False) for n in ("namespace", "key", "collectionId", "cursor", "limit")
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, ws_id):
        ask_history = self.workspace.ask_history
        params = request.query_params
        collection_id = parse_id(params["collectionId"]) if params.get("collectionId") else None
        queryset = (
            MemoryVersion.objects.restrict(self.member, "view", ask_history=ask_history)
            .agent()
            .matching(namespace=params.get("namespace"), key=params.get("key"), collection_id=collection_id)
        )
        if params.get("collectionId") and collection_id is None:
            queryset = queryset.none()  # a malformed id names no collection
        limit = query_int(params, "limit", default=20, minimum=1, maximum=100)
        return Response(actions.paginate(queryset, self.member, ask_history, limit=limit, cursor=params.get("cursor")))

    @extend_schema(
        parameters=[DRY_RUN_PARAMETER, PLAN_TOKEN_PARAMETER],
        responses={200: OpenApiTypes.OBJECT},
        summary="Delete all your agent memories (?dryRun=1: the manifest, nothing erased)",
    )
    def delete(self, request, ws_id):
        params = request.query_params
        return Response(
            actions.delete_all_own_agent_memories(
                self.member, dry_run=query_dry_run(params), confirmed=params.get("planToken")
            )
        )


class AgentMemoryView(WorkspaceAPIView):
    def delete(self, request, ws_id, memory_id):
        return Response(actions.delete_own_memory(self.member, memory_id, agent_only=True))


class BulkDeleteAgentMemoriesView(WorkspaceAPIView):
    permissions = {"DELETE": "ask_history:manage"}

    @extend_schema(
        parameters=[DRY_RUN_PARAMETER, PLAN_TOKEN_PARAMETER],
        responses={200: OpenApiTypes.OBJECT},
        summary="Delete every agent memory of the workspace (?dryRun=1: the manifest, counts only, nothing erased)",
    )
    def delete(self, request, ws_id):
        params = request.query_params
        return Response(
            actions.delete_all_agent_memories(
                self.workspace, actor=request.user, dry_run=query_dry_run(params), confirmed=params.get("planToken")
            )
        )


# --- AI memory (assistant memories) ------------------------------------------------------------
class PreferenceBody(StrictSerializer):
    rememberMe = serializers.BooleanField()


class AssistantMemoryBody(StrictSerializer):
    kind = KindField()
    topic = PlainText(min_length=1, max_length=120)
    summary = PlainText(min_length=1, max_length=1000, trim_whitespace=False)
    details = DetailsField(required=False)


class AssistantMemoryPatchBody(StrictSerializer):
    kind = KindField(required=False)
    topic = PlainText(min_length=1, max_length=120, required=False)
    summary = PlainText(min_length=1, max_length=1000, required=False, trim_whitespace=False)
    details = DetailsField(required=False)


class PreferenceView(WorkspaceAPIView):
    def get(self, request, ws_id):
        return Response({"rememberMe": self.member.remember_me, "available": self.workspace.ai_memory_available})

    @extend_schema(request=PreferenceBody, responses={200: OpenApiTypes.OBJECT})
    def put(self, request, ws_id):
        data = self.body(request, PreferenceBody)
        member = set_remember_me(self.member, data["rememberMe"])
        return Response({"rememberMe": member.remember_me, "available": True})


class AssistantMemoriesView(WorkspaceAPIView):
    def get(self, request, ws_id):
        return Response(assistant.list_assistant_memories(self.member))

    @extend_schema(request=AssistantMemoryBody, responses={201: OpenApiTypes.OBJECT})
    def post(self, request, ws_id):
        data = self.body(request, AssistantMemoryBody)
        version, superseded = assistant.add_assistant_memory(
            self.member,
            kind=data["kind"],
            topic=data["topic"],
            summary=data["summary"],
            details=data.get("details", []),
        )
        return Response(
            {"memory": assistant.assistant_json(version, self.member, expired=False), "superseded": superseded},
            status=201,
        )


class AssistantMemoryView(WorkspaceAPIView):
    @extend_schema(request=AssistantMemoryPatchBody, responses={200: OpenApiTypes.OBJECT})
    def patch(self, request, ws_id, memory_id):
        data = self.body(request, AssistantMemoryPatchBody)
        version = assistant.edit_assistant_memory(
            self.member,
            memory_id,
            kind=data.get("kind"),
            summary=data.get("summary"),
            details=data.get("details"),
            topic=data.get("topic"),
        )
        return Response({"memory": assistant.assistant_json(version, self.member, expired=False)})

    def delete(self, request, ws_id, memory_id):
        return Response(actions.delete_own_memory(self.member, memory_id, agent_only=False))


class AssistantMemoryReactivateView(WorkspaceAPIView):
    def post(self, request, ws_id, memory_id):
        version = assistant.reactivate_assistant_memory(self.member, memory_id)
        return Response({"memory": assistant.assistant_json(version, self.member, expired=False)})
