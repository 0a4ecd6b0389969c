"""JSON parsing that cannot be crashed by its input."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from core.jsontext import unpaired_surrogates


class NotText(ParseError):
    """A body whose strings are not Unicode text: refused as VALIDATION_ERROR naming the fields."""

    def __init__(self, fields: dict[str, list[str]]):
        super().__init__("The body holds strings that are not valid Unicode text.")
        self.fields = fields


class SafeJSONParser(JSONParser):
    """Deeply nested JSON exhausts Python's recursion limit inside the decoder; that is the
    client's malformed body (400), not a server error. So is a string that no database or
    response could encode (a lone surrogate): every JSON body is judged here, once."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON nested too deeply.") from None
        not_text = unpaired_surrogates(data)
        if not_text:
            raise NotText(not_text)
        return data
