"""The one base view of the workspace API.

It resolves the workspace and the caller's active membership before any handler runs, and only
hands out querysets already scoped to that workspace (and, for owned objects, to that member).
A workspace the caller does not belong to answers 404, exactly like one that does not exist.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Model, QuerySet
from rest_framework.request import Request
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from core.errors import ApiError, not_found, validation_error
from governance.auth import MembershipRestarted, active_membership
from governance.models import Member, Workspace


class WorkspaceAPIView(APIView):
    #: permission needed per HTTP method; a method missing here needs only membership
    permissions: dict[str, str] = {}

    workspace: Workspace
    member: Member

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "get_queryset" in cls.__dict__:
            raise TypeError(f"{cls.__name__} must use scoped() or a model's restrict(), not override get_queryset")

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # authentication first: anonymous → 401
        try:
            member = active_membership(request, kwargs["ws_id"])  # an int: the URLconf's id converter
        except MembershipRestarted:
            raise ApiError(
                401,
                "UNAUTHENTICATED",
                "This token or session was issued before your current membership of the workspace began: log in again "
                "or issue a new personal token.",
                {"reason": "membership_restarted"},
            ) from None
        if member is None:
            raise not_found("workspace")
        self.member = member
        self.workspace = member.workspace
        needed = self.permissions.get(request.method)
        if needed and not member.has_perm(needed):
            raise ApiError(403, "FORBIDDEN", f"This needs the {needed} permission.", {"permission": needed})

    def scoped(self, queryset: QuerySet) -> QuerySet:
        return queryset.filter(workspace=self.workspace)

    def get_scoped(self, queryset: QuerySet, pk: int, what: str) -> Model:
        obj = self.scoped(queryset).filter(pk=pk).first()
        if obj is None:
            raise not_found(what)
        return obj

    @classmethod
    def body(cls, request: Request, serializer_class: type[Serializer], *, partial: bool = False) -> dict[str, Any]:
        return cls.body_of(request.data, serializer_class, partial=partial)

    @staticmethod
    def body_of(data: Any, serializer_class: type[Serializer], *, partial: bool = False) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise validation_error({"non_field_errors": ["The body must be a JSON object."]})
        serializer = serializer_class(data=data, partial=partial)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)
