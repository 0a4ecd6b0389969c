"""Request bodies of the agent operations (SPEC §3). Shared by REST, MCP and the OpenAPI schema."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.fields import CONTROL_CHARACTERS, IdField, InstantField, PlainText, StrictSerializer
from core.timestamps import InvalidInstant, parse_instant
from memoryapp import masking
from memoryapp.models import AGENT_API_SOURCES, ASSISTANT_NAMESPACE, MEMORY_KINDS

MAX_DETAIL_LINES = 20


class ScreenedText(PlainText):
    """Free text that is stored or logged as sent (conversation ids, names): it is never masked,
    so it is refused when the masking detector finds personal data in it (SPEC §4.1), with its
    UUIDs and ULIDs cut out (a UUID conversation id is an identifier, not a number).
    The refusal never repeats the value."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if masking.kinds_outside_identifiers(value):
            raise serializers.ValidationError("Must not contain personal data: it is stored as sent.")
        return value


@extend_schema_field(
    {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string", "maxLength": 500}, "maxItems": 20}]}
)
class DetailsField(serializers.Field):
    """`details`: a list of short strings, or one string with one item per line."""

    def to_internal_value(self, data):
        if isinstance(data, str):
            lines = data.splitlines()
        elif isinstance(data, list) and all(isinstance(item, str) for item in data):
            lines = data
        else:
            raise serializers.ValidationError("Must be a string or a list of strings.")
        lines = [line.strip() for line in lines if line.strip()]
        if len(lines) > MAX_DETAIL_LINES:
            raise serializers.ValidationError(f"At most {MAX_DETAIL_LINES} lines.")
        if any(len(line) > 500 for line in lines) or any(CONTROL_CHARACTERS.search(line) for line in lines):
            raise serializers.ValidationError("Each line must be at most 500 characters, without control characters.")
        return lines

    def to_representation(self, value):
        return value


class KindField(serializers.ChoiceField):
    """`kind`: one of MEMORY_KINDS. The refusal never repeats the value (it may be personal data,
    and error details are logged and shown)."""

    def __init__(self, **kwargs):
        kinds = ", ".join(MEMORY_KINDS)
        kwargs.setdefault(
            "error_messages", {"invalid_choice": f"Must be one of {kinds}.", "invalid": f"Must be one of {kinds}."}
        )
        super().__init__(choices=list(MEMORY_KINDS), **kwargs)


class AsOfField(InstantField):
    """`asOf` (SPEC §3): an offset is required, and the instant must not be in the future."""

    default_error_messages = {"future": "Must not be in the future."}

    def to_internal_value(self, value: Any) -> datetime:
        try:
            parsed = parse_instant(value)
        except InvalidInstant as exc:
            raise serializers.ValidationError(str(exc)) from None
        if parsed > timezone.now():
            self.fail("future")
        return parsed


class RememberBody(StrictSerializer):
    namespace = PlainText(min_length=1, max_length=64, trim_whitespace=False)
    text = PlainText(min_length=1, max_length=1000, trim_whitespace=False)
    key = PlainText(max_length=120, required=False, allow_null=True, min_length=1, trim_whitespace=False)
    collectionId = IdField(required=False, allow_null=True)
    citations = serializers.ListField(child=IdField(), required=False, max_length=20)
    source = serializers.ChoiceField(choices=[s.value for s in AGENT_API_SOURCES], required=False, default="agent")
    kind = KindField(required=False, allow_null=True)
    details = DetailsField(required=False)

    def validate(self, attrs):
        source = attrs.get("source", "agent")
        namespace = attrs["namespace"]
        if source != "agent":
            if namespace != ASSISTANT_NAMESPACE or not attrs.get("key"):
                raise serializers.ValidationError(
                    {
                        "namespace": [
                            f"A memory with source {source!r} belongs in namespace {ASSISTANT_NAMESPACE!r} with a key "
                            "(its topic)."
                        ]
                    }
                )
        elif namespace == ASSISTANT_NAMESPACE:
            raise serializers.ValidationError(
                {
                    "namespace": [
                        f"{ASSISTANT_NAMESPACE!r} is reserved for assistant memories (source user_request or "
                        "assistant_initiated)."
                    ]
                }
            )
        if len(set(attrs.get("citations", []))) != len(attrs.get("citations", [])):
            raise serializers.ValidationError({"citations": ["Each passage may be cited once."]})
        return attrs


class RecallBody(StrictSerializer):
    query = PlainText(min_length=1, max_length=1000, trim_whitespace=False)
    namespace = PlainText(min_length=1, max_length=64, required=False, trim_whitespace=False)
    collectionId = IdField(required=False, allow_null=True)
    asOf = AsOfField(required=False)
    limit = serializers.IntegerField(min_value=1, max_value=50, required=False, default=10)


class ListBody(StrictSerializer):
    namespace = PlainText(min_length=1, max_length=64, required=False, trim_whitespace=False)
    key = PlainText(min_length=1, max_length=120, required=False, trim_whitespace=False)
    collectionId = IdField(required=False, allow_null=True)
    asOf = AsOfField(required=False)
    limit = serializers.IntegerField(min_value=1, max_value=100, required=False, default=20)
    cursor = serializers.CharField(max_length=200, required=False)


class ForgetBody(StrictSerializer):
    memoryId = IdField(required=False)
    namespace = PlainText(min_length=1, max_length=64, required=False, trim_whitespace=False)
    key = PlainText(min_length=1, max_length=120, required=False, trim_whitespace=False)

    def validate(self, attrs):
        by_id = "memoryId" in attrs
        by_key = "namespace" in attrs or "key" in attrs
        if by_id == by_key or (by_key and not ("namespace" in attrs and "key" in attrs)):
            raise serializers.ValidationError({"non_field_errors": ["Give either memoryId, or namespace and key."]})
        return attrs


BODIES: dict[str, type[StrictSerializer]] = {
    "remember": RememberBody,
    "recall": RecallBody,
    "list": ListBody,
    "forget": ForgetBody,
}
