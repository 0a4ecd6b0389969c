"""What the agent endpoints answer, described for the OpenAPI schema (`/api/schema/`).

These serializers are never used to build a response (`memoryapp.representation` is the one
shape of the memory object `M`); they only state it, so a client can type its results from the
schema and the schemathesis run checks every real answer against it."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema_field
from rest_framework import serializers

from memoryapp.models import MEMORY_KINDS, Source

_NULLABLE_STRING = {"required": True, "allow_null": True}


@extend_schema_field({"type": "string", "enum": ["memory"]})
class _MemoryType(serializers.Field):
    """Always "memory". (Only its schema is used: it describes answers, never parses input.)"""


@extend_schema_field(
    {
        "type": "boolean",
        "enum": [False],
        "description": "Always false: a memory is an untrusted note, never evidence (SPEC §4.6).",
    }
)
class _NotEvidence(serializers.Field):
    """Always false. (Only its schema is used: it describes answers, never parses input.)"""


@extend_schema_field({"type": "string", "enum": ["untrusted"], "description": "Always untrusted (SPEC §4.6)."})
class _Untrusted(serializers.Field):
    """Always "untrusted". (Only its schema is used: it describes answers, never parses input.)"""


@extend_schema_field({"type": "string", "pattern": "^[0-9]{1,18}$", "description": "An id (digits)."})
class _Id(serializers.Field):
    """An id, as digits. (Only its schema is used: it describes answers, never parses input.)"""


@extend_schema_field({"type": "string", "format": "date-time"})
class _Instant(serializers.Field):
    """An ISO-8601 instant. (Only its schema is used: it describes answers, never parses input.)"""


@extend_schema_field({"type": "string", "format": "date-time", "nullable": True})
class _NullableInstant(serializers.Field):
    """An ISO-8601 instant, or null. (Only its schema is used: it describes answers, never parses input.)"""


class CitationObject(serializers.Serializer):
    passageId = _Id()
    documentId = _Id()
    sha256 = serializers.CharField(help_text="SHA-256 of the passage text when the memory was remembered.")
    sourceState = serializers.ChoiceField(choices=["current", "changed"])


class MemoryObject(serializers.Serializer):
    """The memory object `M` (SPEC §3)."""

    id = _Id()
    type = _MemoryType()
    evidence = _NotEvidence()
    trust = _Untrusted()
    namespace = serializers.CharField()
    key = serializers.CharField(**_NULLABLE_STRING)
    text = serializers.CharField(
        help_text="The masked text: personal data is replaced by placeholders such as [EMAIL]."
    )
    kind = serializers.ChoiceField(choices=list(MEMORY_KINDS), **_NULLABLE_STRING)
    details = serializers.ListField(child=serializers.CharField())
    source = serializers.ChoiceField(choices=Source.choices)
    collectionId = _Id(**_NULLABLE_STRING)
    citations = CitationObject(many=True)
    sourceState = serializers.ChoiceField(choices=["current", "changed"], **_NULLABLE_STRING)
    version = serializers.IntegerField(min_value=1)
    validFrom = _Instant()
    validTo = _NullableInstant()
    createdAt = _Instant()
    expiresAt = _NullableInstant()
    masked = serializers.ListField(
        child=serializers.CharField(), help_text="The kinds of personal data that were replaced (EMAIL, PHONE, …)."
    )


class RankObject(serializers.Serializer):
    bm25 = serializers.IntegerField(min_value=1, **_NULLABLE_STRING)
    semantic = serializers.IntegerField(min_value=1, **_NULLABLE_STRING)
    entity = serializers.IntegerField(min_value=1, **_NULLABLE_STRING)


class RecalledMemoryObject(MemoryObject):
    score = serializers.FloatField(
        help_text="Reciprocal rank fusion: the sum of 1 / (60 + rank) over the rankings that hold the memory."
    )
    ranks = RankObject()


class RememberResponse(serializers.Serializer):
    memory = MemoryObject()
    superseded = serializers.IntegerField(min_value=0, max_value=1)


class RecallResponse(serializers.Serializer):
    memories = RecalledMemoryObject(many=True)
    hidden = serializers.IntegerField(min_value=0)
    considered = serializers.IntegerField(min_value=0)
    degraded = serializers.ListField(child=serializers.CharField())


class ListResponse(serializers.Serializer):
    memories = MemoryObject(many=True)
    hidden = serializers.IntegerField(min_value=0)
    nextCursor = serializers.CharField(**_NULLABLE_STRING)


class ForgetResponse(serializers.Serializer):
    forgotten = serializers.IntegerField(min_value=1)
    receiptId = _Id()


class PersonalDataReport(serializers.Serializer):
    index = serializers.IntegerField(min_value=0)
    role = serializers.CharField()
    kinds = serializers.ListField(child=serializers.CharField())


class ConsolidationObject(serializers.Serializer):
    id = _Id()
    status = serializers.ChoiceField(choices=["queued", "skipped"])
    reason = serializers.CharField(**_NULLABLE_STRING)
    message = serializers.CharField(required=False)
    personalData = PersonalDataReport(many=True, required=False)


class TurnResponse(serializers.Serializer):
    consolidation = ConsolidationObject()


class ErrorObject(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField()


class ErrorResponse(serializers.Serializer):
    error = ErrorObject()


ERROR = OpenApiResponse(
    ErrorResponse, description='{"error": {"code", "message", "details"}} with the codes of SPEC §2'
)
#: The answers every agent operation may give besides its success.
AGENT_ERRORS = {400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR, 413: ERROR, 429: ERROR, 503: ERROR}
