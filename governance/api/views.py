"""Workspace API: settings, members, credentials and the knowledge side (SPEC §5, §5.1)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from core.errors import not_found, validation_error
from core.params import DRY_RUN, body_dry_run
from core.timestamps import iso
from governance import actions
from governance.api import serializers as s
from governance.api.base import WorkspaceAPIView
from governance.models import Collection, ContextSet, Credential, Document, DocumentVersion, Entity, Member, Passage
from memoryapp import ratelimit
from retention import previews

PLAN_TOKEN = "planToken"


def _ids(values: Iterable[int]) -> list[str]:
    return [str(v) for v in values]


class SettingsView(WorkspaceAPIView):
    permissions = {"PUT": "ask_history:manage"}

    @extend_schema(responses={200: dict})
    def get(self, request, ws_id):
        return Response(actions.settings_json(self.workspace.ask_history))

    @extend_schema(request=s.SettingsPutBody, responses={200: dict})
    def put(self, request, ws_id):
        """Save; a changed retention applies at once (erases with receipts). `dryRun: true`
        answers {dryRun, settings, manifest} and saves and erases nothing."""
        body = request.data
        dry_run = body_dry_run(body)
        token = body.get(PLAN_TOKEN) if isinstance(body, dict) else None
        if token is not None and not isinstance(token, str):
            raise validation_error({PLAN_TOKEN: ["Must be the planToken of a dry run."]})
        if isinstance(body, dict):
            body = {k: v for k, v in body.items() if k not in (DRY_RUN, PLAN_TOKEN)}
        changes = self.body_of(body, s.SettingsBody)
        result = previews.save_settings_and_apply_retention(
            self.workspace, changes, actor=request.user, dry_run=dry_run, confirmed_plan=token
        )
        if dry_run:
            return Response(result)
        return Response(
            {**result["settings"], **({"retentionApplied": result["applied"]} if result["applied"] else {})}
        )


class CredentialsView(WorkspaceAPIView):
    @extend_schema(responses={200: dict})
    def get(self, request, ws_id):
        credentials = Credential.objects.restrict(self.member, "view")
        return Response({"credentials": [actions.credential_json(c) for c in credentials]})

    @extend_schema(request=s.CredentialBody, responses={201: dict})
    def post(self, request, ws_id):
        data = self.body(request, s.CredentialBody)
        credential, token = actions.create_credential(
            self.member,
            name=data["name"],
            scopes=data["scopes"],
            context_set_id=data.get("contextSetId"),
            expires_at=data.get("expiresAt"),
        )
        return Response({**actions.credential_json(credential), "token": token}, status=201)


class CredentialView(WorkspaceAPIView):
    def delete(self, request, ws_id, credential_id):
        credential = Credential.objects.restrict(self.member, "view").filter(pk=credential_id).first()
        if credential is None:
            raise not_found("credential")
        actions.revoke_credential(credential, actor=request.user)
        return Response(status=204)


class MembersView(WorkspaceAPIView):
    def get(self, request, ws_id):
        members = self.scoped(Member.objects.active().select_related("user"))
        return Response({"members": [actions.member_json(m) for m in members]})


class MemberView(WorkspaceAPIView):
    permissions = {"PATCH": "members:manage", "DELETE": "members:manage"}

    def _target(self, member_id: int) -> Member:
        return self.get_scoped(Member.objects.active().select_related("user", "workspace"), member_id, "member")

    @extend_schema(request=s.RoleBody, responses={200: dict})
    def patch(self, request, ws_id, member_id):
        target = self._target(member_id)
        data = self.body(request, s.RoleBody)
        return Response(actions.member_json(actions.change_role(target, data["role"], actor=request.user)))

    def delete(self, request, ws_id, member_id):
        actions.remove_member(self._target(member_id), actor=request.user)
        return Response(status=204)


class KnowledgeWriteView(WorkspaceAPIView):
    """A knowledge write (every method in `permissions`: collections, documents and their versions,
    entities) spends one unit of the member's KNOWLEDGE_WRITES_PER_HOUR budget, after the
    permission check; a write that fails hands it back. Over it: 429 `AGENT_MEMORY_RATE_LIMITED`
    with `details.operation` "knowledge" and the RateLimit-* headers (docs/limits.md)."""

    slot: ratelimit.Slot | None = None

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if request.method in self.permissions:
            self.slot = ratelimit.take_member_slot(self.member, settings.KNOWLEDGE_WRITES_PER_HOUR)

    def handle_exception(self, exc):
        if self.slot is not None:
            ratelimit.refund(self.slot)
            self.slot = None
        return super().handle_exception(exc)

    def finalize_response(self, request, response, *args, **kwargs):
        if self.slot is not None:
            for header, value in self.slot.headers().items():
                response[header] = value
        return super().finalize_response(request, response, *args, **kwargs)


class CollectionsView(KnowledgeWriteView):
    permissions = {"POST": "knowledge:write"}

    def get(self, request, ws_id):
        collections = Collection.objects.restrict(self.member, "view")
        return Response(
            {"collections": [{"id": str(c.pk), "name": c.name, "restricted": c.restricted} for c in collections]}
        )

    @extend_schema(request=s.CollectionBody, responses={201: dict})
    def post(self, request, ws_id):
        data = self.body(request, s.CollectionBody)
        collection = actions.create_collection(
            self.workspace,
            name=data["name"],
            restricted=data["restricted"],
            reader_ids=data["memberIds"],
            creator=self.member,
        )
        return Response({"id": str(collection.pk)}, status=201)


class CollectionView(KnowledgeWriteView):
    permissions = {"DELETE": "knowledge:write"}

    def delete(self, request, ws_id, collection_id):
        actions.delete_collection(collection_id=collection_id, by=self.member, actor=request.user)
        return Response(status=204)


def version_json(document: Document, version: DocumentVersion) -> dict[str, Any]:
    return {
        "id": str(document.pk),
        "versionId": str(version.pk),
        "passages": [{"id": str(p.pk), "text": p.text} for p in version.passages.order_by("position")],
        # "pending" until its passages' entity links are written (governance.linking)
        "entityLinks": "pending" if version.passages.filter(links_pending=True).exists() else "linked",
    }


class DocumentsView(KnowledgeWriteView):
    permissions = {"POST": "knowledge:write"}

    def get(self, request, ws_id):
        documents = Document.objects.restrict(self.member, "view").order_by("id")
        return Response(
            {
                "documents": [
                    {
                        "id": str(d.pk),
                        "title": d.title,
                        "collectionId": str(d.collection_id),
                        "versionId": str(d.current_version_id),
                        "expiresAt": iso(d.expires_at),
                    }
                    for d in documents
                ]
            }
        )

    @extend_schema(request=s.DocumentBody, responses={201: dict})
    def post(self, request, ws_id):
        data = self.body(request, s.DocumentBody)
        document = actions.create_document(
            collection_id=data["collectionId"],
            title=data["title"],
            text=data["text"],
            expires_at=data.get("expiresAt"),
            by=self.member,
        )
        return Response(version_json(document, document.current_version), status=201)


class DocumentView(KnowledgeWriteView):
    permissions = {"DELETE": "knowledge:write"}

    def _document(self, document_id: int) -> Document:
        document = Document.objects.restrict(self.member, "view").filter(pk=document_id).first()
        if document is None:
            raise not_found("document")
        return document

    def get(self, request, ws_id, document_id):
        document = self._document(document_id)
        return Response({"title": document.title, **version_json(document, document.current_version)})

    def delete(self, request, ws_id, document_id):
        actions.delete_document(self._document(document_id), actor=request.user)
        return Response(status=204)


class DocumentVersionsView(DocumentView):
    permissions = {"POST": "knowledge:write"}

    @extend_schema(request=s.DocumentVersionBody, responses={201: dict})
    def post(self, request, ws_id, document_id):
        document = self._document(document_id)
        data = self.body(request, s.DocumentVersionBody)
        version = actions.add_document_version(document, text=data["text"])
        return Response(version_json(document, version), status=201)


class PassageView(WorkspaceAPIView):
    def get(self, request, ws_id, passage_id):
        passage = Passage.objects.filter(
            pk=passage_id, document__in=Document.objects.restrict(self.member, "view")
        ).first()
        if passage is None:
            raise not_found("passage")
        entity_ids = _ids(passage.entities.values_list("pk", flat=True))
        return Response(
            {
                "id": str(passage.pk),
                "documentId": str(passage.document_id),
                "versionId": str(passage.version_id),
                "text": passage.text,
                "entityIds": entity_ids,
            }
        )


class EntitiesView(KnowledgeWriteView):
    permissions = {"POST": "knowledge:write"}

    def get(self, request, ws_id):
        return Response(
            {
                "entities": [
                    {"id": str(e.pk), "name": e.name, "aliases": e.aliases, "links": e.links_status}
                    for e in self.scoped(Entity.objects.all())
                ]
            }
        )

    @extend_schema(request=s.EntityBody, responses={201: dict})
    def post(self, request, ws_id):
        data = self.body(request, s.EntityBody)
        entity = actions.create_entity(self.workspace, name=data["name"], aliases=data["aliases"])
        return Response({"id": str(entity.pk), "links": entity.links_status}, status=201)


def context_set_json(context_set: ContextSet) -> dict[str, Any]:
    return {
        "id": str(context_set.pk),
        "name": context_set.name,
        "active": context_set.active,
        "collectionIds": _ids(context_set.collections.values_list("pk", flat=True)),
        "documentIds": _ids(context_set.documents.values_list("pk", flat=True)),
    }


class ContextSetsView(WorkspaceAPIView):
    permissions = {"POST": "context_sets:manage"}

    def get(self, request, ws_id):
        return Response({"contextSets": [context_set_json(c) for c in self.scoped(ContextSet.objects.live())]})

    @extend_schema(request=s.ContextSetBody, responses={201: dict})
    def post(self, request, ws_id):
        data = self.body(request, s.ContextSetBody)
        context_set = actions.create_context_set(
            self.workspace,
            name=data["name"],
            collection_ids=data["collectionIds"],
            document_ids=data["documentIds"],
            active=data["active"],
            by=self.member,
        )
        return Response({"id": str(context_set.pk)}, status=201)


class ContextSetView(WorkspaceAPIView):
    permissions = {"PATCH": "context_sets:manage", "DELETE": "context_sets:manage"}

    def _set(self, set_id: int) -> ContextSet:
        return self.get_scoped(ContextSet.objects.live(), set_id, "context set")

    @extend_schema(request=s.ContextSetPatchBody, responses={200: dict})
    def patch(self, request, ws_id, set_id):
        context_set = self._set(set_id)
        data = self.body(request, s.ContextSetPatchBody)
        return Response(
            context_set_json(actions.set_context_set_active(context_set, data["active"], actor=request.user))
        )

    def delete(self, request, ws_id, set_id):
        actions.delete_context_set(self._set(set_id), actor=request.user)
        return Response(status=204)
