"""The bearer token's credential is looked up by a query compiled once per process
(`core.prepared.Prepared`): it must give what the ORM gives for the same values — the row, its
member, user, workspace and ask-history settings, and the count of the member's usable
credentials at the instant asked — for every state a credential can be in, and nothing more."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase

from core.prepared import Prepared
from governance import actions
from governance.auth import _CREDENTIAL, _credential_by_prefix, find_credential
from governance.models import Credential, Member


def _fields(obj) -> dict:
    return {k: v for k, v in obj.__dict__.items() if not k.startswith("_")}


def _same(prepared: Credential | None, orm: Credential | None) -> None:
    assert (prepared is None) == (orm is None)
    if orm is None:
        return
    assert _fields(prepared) == _fields(orm)
    assert prepared.usable_siblings == orm.usable_siblings
    for path in ("member", "member.user", "workspace", "workspace.ask_history"):
        a, b = prepared, orm
        for part in path.split("."):
            a, b = getattr(a, part), getattr(b, part)
        assert _fields(a) == _fields(b), path


class CredentialStates(TestCase):
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        expiries=st.lists(st.one_of(st.none(), st.integers(-3, 3)), min_size=1, max_size=4),
        revoked=st.lists(st.booleans(), min_size=4, max_size=4),
        asked=st.integers(-4, 4),
        member_left=st.booleans(),
    )
    def test_the_prepared_lookup_gives_what_the_orm_gives(self, expiries, revoked, asked, member_left):
        workspace, owner = actions.create_workspace("Acme", owner_email="owner@acme.test", password="pw-owner-123")
        now = timezone.now()
        credentials = []
        for i, days in enumerate(expiries):
            expires = None if days is None else now + timedelta(days=days, seconds=1)
            credential, _ = actions.create_credential(owner, name=f"c{i}", scopes=["memory:read"])
            Credential.objects.filter(pk=credential.pk).update(
                expires_at=expires, revoked_at=now if revoked[i] else None
            )
            credentials.append(credential)
        if member_left:
            Member.objects.filter(pk=owner.pk).update(left_at=now)
        at = now + timedelta(days=asked)
        for credential in credentials:
            _same(_CREDENTIAL.first(credential.prefix, at), _credential_by_prefix(credential.prefix, at).first())
        assert _CREDENTIAL.first("nosuchprefix", at) is None


def test_the_instant_is_a_value_not_compiled_in(world):
    # a sibling that expires tomorrow counts today and not the day after
    _, token = actions.create_credential(world.owner, name="a", scopes=["memory:read"])
    actions.create_credential(
        world.owner, name="b", scopes=["memory:read"], expires_at=timezone.now() + timedelta(days=1)
    )
    prefix = find_credential(token).prefix
    assert _CREDENTIAL.first(prefix, timezone.now()).usable_siblings == 2
    assert _CREDENTIAL.first(prefix, timezone.now() + timedelta(days=2)).usable_siblings == 1
    assert _CREDENTIAL.first(prefix, timezone.now()).usable_siblings == 2


def test_one_query_and_the_related_rows_come_along(world):
    _, token = actions.create_credential(world.editor, name="a", scopes=["memory:read"])
    with CaptureQueriesContext(connection) as queries:
        credential = find_credential(token)
        seen = (credential.member.user.is_active, credential.workspace.ask_history.pk, credential.member.role)
    assert len(queries.captured_queries) == 1 and seen[2] == "editor"


def test_a_wrong_token_with_a_known_prefix_finds_nothing(world):
    _, token = actions.create_credential(world.editor, name="a", scopes=["memory:read"])
    assert find_credential(token) is not None
    assert find_credential(token[:-2] + ("aa" if not token.endswith("aa") else "bb")) is None


def test_a_placeholder_that_does_not_reach_the_sql_is_refused(db):
    lost = Prepared(lambda prefix, at: Credential.objects.filter(name="x"), "\x00p", datetime(2000, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="placeholders not among"):
        lost.first("a", timezone.now())
