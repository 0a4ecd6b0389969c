"""The request-body fields every API shares (DRF): unknown fields refused, ids as digit strings,
text without control characters, instants in the range every store holds. No app's rule is here:
the agent API's own fields (screened text, details, kinds, asOf) are in memoryapp.schemas."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.params import parse_id
from core.timestamps import RANGE_MESSAGE, InvalidInstant, check_range

CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class StrictSerializer(serializers.Serializer):
    """Unknown fields are refused: a typo in a field name must not silently do something else."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


@extend_schema_field({"type": "string", "pattern": "^[0-9]{1,18}$", "description": "An id (digits)."})
class IdField(serializers.Field):
    """Ids are strings of digits in JSON; integers are accepted too."""

    default_error_messages = {"invalid": "Must be an id (a string of digits)."}

    def to_internal_value(self, data: Any) -> int:
        parsed = parse_id(data)
        if parsed is None:
            self.fail("invalid")
        return parsed

    def to_representation(self, value):
        return str(value)


class PlainText(serializers.CharField):
    """Text without control characters (NUL included)."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        value = super().to_internal_value(data)
        if CONTROL_CHARACTERS.search(value):
            raise serializers.ValidationError("Control characters are not allowed.")
        return value


class InstantField(serializers.DateTimeField):
    """Every instant in a request body (`expiresAt`, …): DRF's ISO-8601 forms (without an offset
    it is UTC), in the range every store and zone conversion can hold (`core.timestamps`)."""

    default_error_messages = {"overflow": RANGE_MESSAGE}

    def to_internal_value(self, value: Any) -> datetime:
        parsed = super().to_internal_value(value)
        try:
            return check_range(parsed)
        except InvalidInstant as exc:
            raise serializers.ValidationError(str(exc)) from None
