"""A QuerySet compiled once per process and database, then run with new values.

Django compiles a QuerySet's SQL on every evaluation. For the lookup every agent request makes (its
bearer token's credential, four tables joined and a subquery) compiling cost more than running the
query (docs/benchmarks.md "Where a request's time goes"). `Prepared(build, *placeholders)` calls
`build(*placeholders)` once per database, compiles it, finds each placeholder among the SQL's
parameters, and `first(*values)` runs the cached SQL with the values in their places, turning the
row into model instances with Django's own populators (select_related and annotations included).

A placeholder must reach the SQL as parameters equal to itself (or to the database's form of a
datetime); a build whose SQL shape depends on the values (None, lists) cannot be prepared, and one
whose placeholder is lost raises at the first call."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import connections, models
from django.db.models.query import get_related_populators


class Prepared:
    def __init__(self, build: Callable[..., models.QuerySet], *placeholders: Any):
        self.build = build
        self.placeholders = placeholders
        self._compiled: dict[str, _Compiled] = {}
        self._lock = threading.Lock()

    def first(self, *values: Any, using: str = "default") -> models.Model | None:
        """The first row `build(*values)[:1]` would give, as a model instance, or None."""
        compiled = self._compiled.get(using) or self._compile(using)
        return compiled.first(values)

    def _compile(self, using: str) -> _Compiled:
        with self._lock:
            if using not in self._compiled:
                self._compiled[using] = _Compiled(self.build(*self.placeholders)[:1], self.placeholders, using)
            return self._compiled[using]


class _Compiled:
    def __init__(self, queryset: models.QuerySet, placeholders: tuple[Any, ...], using: str):
        connection = connections[using]
        compiler = queryset.query.get_compiler(using)
        self.sql, params = compiler.as_sql()
        self.using, self.compiler = using, compiler
        # where each parameter comes from: ("fixed", value) or ("value", index, adapt)
        self.slots: list[tuple] = []
        found = [0] * len(placeholders)
        for param in params:
            slot: tuple = ("fixed", param)
            for index, placeholder in enumerate(placeholders):
                for adapt in _forms(placeholder, connection):
                    if _same(param, adapt(placeholder)):
                        slot = ("value", index, adapt)
                        found[index] += 1
                        break
                if slot[0] == "value":
                    break
            self.slots.append(slot)
        if not all(found):
            lost = [repr(p) for p, n in zip(placeholders, found) if not n]
            raise ValueError(f"placeholders not among the query's parameters: {', '.join(lost)}")
        klass_info, select = compiler.klass_info, compiler.select
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        self.model, self.start, self.end = klass_info["model"], start, end
        self.init_list = [column[0].target.attname for column in select[start:end]]
        self.populators = get_related_populators(klass_info, select, using)
        self.annotations = dict(compiler.annotation_col_map or {})

    def first(self, values: tuple[Any, ...]) -> models.Model | None:
        params = [slot[1] if slot[0] == "fixed" else slot[2](values[slot[1]]) for slot in self.slots]
        with connections[self.using].cursor() as cursor:
            cursor.execute(self.sql, params)
            rows = cursor.fetchmany(1)
        for row in self.compiler.results_iter([rows]):
            obj = self.model.from_db(self.using, self.init_list, row[self.start : self.end])
            for populator in self.populators:
                populator.populate(row, obj)
            for name, position in self.annotations.items():
                setattr(obj, name, row[position])
            return obj
        return None


def _forms(placeholder: Any, connection) -> list[Callable[[Any], Any]]:
    """How a value of the placeholder's type may reach the parameters: as itself, or (a datetime)
    as the database's own form of a datetime field's value."""
    forms: list[Callable[[Any], Any]] = [_identity]
    if isinstance(placeholder, datetime):
        forms.append(connection.ops.adapt_datetimefield_value)
    return forms


def _identity(value: Any) -> Any:
    return value


def _same(param: Any, form: Any) -> bool:
    return type(param) is type(form) and param == form
