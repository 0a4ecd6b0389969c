"""No unkeyed digest of memory content reaches anyone but the member (issue 22 row 2, SPEC §8.2
last sentence, §10).

The attack: an auditor exports `/admin/memoryapp/memoryversion/export.csv`, computes
`sha256(guess)` for a list of likely phrases, and every match confirms a member's memory
offline; equal hashes show which members stored the same text. So every admin page, every admin
CSV export and every GET route of the workspace API read by the owner is searched for every plain
digest (SHA-256, SHA-1, MD5, SHA-512, BLAKE2b, as full hex and as a 10-character prefix) of every
stored text, generated in six locales; and equal texts stored by two members of one workspace and
by a member of another workspace never show equal digests to an admin.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata

import pytest
from django.contrib import admin
from django.core import checks
from django.db import models
from django.test import Client, override_settings
from django.test.utils import isolate_apps
from faker import Faker
from hypothesis import given, settings
from hypothesis import strategies as st

from governance import content
from memoryapp.assistant import add_assistant_memory
from memoryapp.models import MemoryVersion
from memoryapp.system_models import OfflineRulesModel
from memoryapp.topics import VOCABULARY
from tests.admin.support import admin_url, body_of, browser, exported_digests
from tests.support import client_for, fill, make_agent, routes

pytestmark = pytest.mark.django_db

LOCALES = ("en_US", "ja_JP", "he_IL", "fr_FR", "de_DE", "pt_BR")
ALGORITHMS = ("sha256", "sha1", "md5", "sha512", "blake2b", "sha3_256")


def generated_texts(count: int, seed: int) -> list[str]:
    fake = Faker(list(LOCALES))
    fake.seed_instance(seed)
    texts = []
    while len(texts) < count:
        locale = LOCALES[len(texts) % len(LOCALES)]
        sentence = fake[locale].sentence(nb_words=9)
        if sentence not in texts:
            texts.append(sentence[:300])
    return texts


def plain_digests(text: str) -> set[str]:
    """Every unkeyed digest someone with a guess could compute: a few algorithms over the text
    and its obvious normalisations, as full hex and as the kind of prefix a list column shows."""
    forms = {text, text.strip(), text.lower(), unicodedata.normalize("NFKC", text)}
    found = set()
    for form in forms:
        for algorithm in ALGORITHMS:
            hexdigest = hashlib.new(algorithm, form.encode("utf-8")).hexdigest()
            found.add(hexdigest)
            found.add(hexdigest[:10])
    return found


@pytest.fixture
def stored(world):
    """The same generated texts stored by the editor and the viewer of one workspace and by the
    owner of another: (texts, versions by member)."""
    texts = generated_texts(12, seed=22)
    members = (world.editor, world.viewer, world.outsider)
    for member in (world.editor, world.outsider):
        agent = make_agent(member, scopes=("memory:write",))
        for n, text in enumerate(texts):
            response = agent.remember(namespace="notes", key=f"note-{n}", text=text)
            assert response.status_code == 201, response.content
    for n, text in enumerate(texts):  # a viewer cannot write over the API: the AI memory page's path
        add_assistant_memory(world.viewer, kind="fact", topic=f"note_{n}", summary=text)
    versions = {m.pk: list(MemoryVersion.objects.filter(member=m).order_by("id")) for m in members}
    return texts, versions


def stored_texts(versions) -> list[str]:
    return [v.text for rows in versions.values() for v in rows]


def test_no_admin_page_or_export_shows_a_plain_digest_of_any_stored_text(stored, staff):
    _, versions = stored
    digests = set().union(*(plain_digests(text) for text in stored_texts(versions)))
    for role, user in staff.all():
        client = browser(user)
        pages = [client.get("/admin/")]
        for model, model_admin in admin.site._registry.items():
            pages.append(client.get(admin_url(model, "changelist")))
            if getattr(model_admin, "csv_columns", ()):
                pages.append(client.get(admin_url(model, "export_csv")))
            for obj in model._default_manager.all()[:40]:
                pages.append(client.get(admin_url(model, "change", obj.pk)))
        for response in pages:
            body = body_of(response)
            leaked = [d for d in digests if d in body]
            assert leaked == [], f"{role}: {response.wsgi_request.path} shows an unkeyed digest of memory text"


def test_the_owner_reads_no_plain_digest_of_a_members_text_on_any_workspace_route(stored, world):
    _, versions = stored
    digests = set().union(*(plain_digests(v.text) for v in versions[world.editor.pk] + versions[world.viewer.pk]))
    owner = Client()
    owner.force_login(world.owner.user)
    values = {
        "ws_id": str(world.workspace.pk),
        "memory_id": str(versions[world.editor.pk][0].pk),
        "member_id": str(world.editor.pk),
    }
    for route, names in routes():
        if not route.startswith(("api/w/", "w/")) or any(name not in values for name in names):
            continue
        path = fill(route, values)
        body = body_of(owner.get(path))
        assert [d for d in digests if d in body] == [], path


def test_equal_texts_of_two_members_and_two_workspaces_never_show_equal_digests(stored, staff, world):
    texts, versions = stored
    shown = exported_digests(browser(staff.auditor))
    by_text: dict[str, set[str]] = {}
    for rows in versions.values():
        for version in rows:
            by_text.setdefault(version.text, set()).add(shown[version.pk])
            assert (
                len(shown[version.pk]) == 64 and shown[version.pk] != hashlib.sha256(version.text.encode()).hexdigest()
            )
    equal_texts = [text for text in by_text if sum(v.text == text for rows in versions.values() for v in rows) == 3]
    assert len(equal_texts) >= 10  # the generated texts survive masking unchanged, stored by all three
    for text in equal_texts:
        assert len(by_text[text]) == 3, "two members' equal texts show equal digests"
    assert len(set(shown.values())) == len(shown)


@settings(max_examples=40, deadline=None)
@given(
    text=st.text(min_size=1, max_size=200),
    ws=st.integers(1, 10**6),
    members=st.lists(st.integers(1, 10**6), min_size=2, max_size=2, unique=True),
)
def test_a_keyed_digest_differs_by_member_and_workspace_and_is_no_plain_hash(text, ws, members):
    first, second = (content.member_digest(text, workspace_id=ws, member_id=m) for m in members)
    assert first != second
    assert content.member_digest(text, workspace_id=ws + 1, member_id=members[0]) != first
    assert first == content.member_digest(
        text, workspace_id=ws, member_id=members[0]
    )  # stable: the member's own duplicates match
    assert first not in plain_digests(text)


def test_a_keyed_digest_changes_with_the_server_key(world):
    text = "Prefers the window seat"
    before = content.member_digest(text, workspace_id=1, member_id=2)
    with override_settings(CONTENT_DIGEST_KEY="A" * 43 + "="):
        assert content.member_digest(text, workspace_id=1, member_id=2) != before


def test_the_member_export_keeps_the_plain_sha256_of_their_own_text(stored, world):
    _, versions = stored
    response = client_for(world.editor).get(f"/api/w/{world.workspace.pk}/me/export")
    document = json.loads(b"".join(response.streaming_content))
    plain = {m["id"]: m["textSha256"] for m in document["agentMemories"]}
    for version in versions[world.editor.pk]:
        assert plain[str(version.pk)] == hashlib.sha256(version.text.encode()).hexdigest()


def test_the_change_page_and_list_show_the_keyed_digest(stored, staff, world):
    version = stored[1][world.editor.pk][0]
    client = browser(staff.auditor)
    page = body_of(client.get(admin_url(MemoryVersion, "change", version.pk)))
    assert version.text_hmac in page
    listing = body_of(client.get(admin_url(MemoryVersion, "changelist")))
    assert version.text_hmac[:12] in listing


def test_a_lookup_on_the_keyed_digest_is_refused_like_any_content_derived_field(stored, staff, world):
    version = stored[1][world.editor.pk][0]
    response = browser(staff.superuser).get(admin_url(MemoryVersion, "changelist") + f"?text_hmac={version.text_hmac}")
    assert response.status_code in (400, 302)


def test_an_offline_topic_is_a_vocabulary_name_never_a_hash_of_its_subject():
    model = OfflineRulesModel(name="offline")
    for subject in generated_texts(18, seed=7):
        for memory in model.extract([{"role": "user", "content": f"Remember that {subject}"}]).memories:
            assert memory.topic in VOCABULARY, memory
            assert not any(d[:8] in memory.topic for d in plain_digests(subject)), memory.topic


@isolate_apps("governance")
def test_the_system_check_refuses_an_unkeyed_hash_declared_as_a_shown_digest():
    class Leaky(models.Model):
        content_fields = frozenset({"text"})
        content_digests = frozenset({"text_sha256", "text_length"})
        keyed_digests: frozenset[str] = frozenset()
        metadata_fields = frozenset({"id"})

        text = models.TextField()
        text_sha256 = models.CharField(max_length=64)
        text_length = models.PositiveIntegerField()

        class Meta:
            app_label = "governance"

        def __str__(self) -> str:
            return str(self.pk)

    class Keyed(models.Model):
        content_fields = frozenset({"text"})
        content_digests = frozenset({"text_length"})
        keyed_digests = frozenset({"text_hmac"})
        metadata_fields = frozenset({"id"})

        text = models.TextField()
        text_hmac = models.CharField(max_length=64)
        text_length = models.PositiveIntegerField()

        class Meta:
            app_label = "governance"

        def __str__(self) -> str:
            return str(self.pk)

    errors = content.declaration_errors(Leaky)
    assert [e.id for e in errors] == ["governance.E003"] and "text_sha256" in errors[0].msg
    assert all(isinstance(e, checks.Error) for e in errors)
    assert content.declaration_errors(Keyed) == []
    assert content.is_content_derived(Keyed, "text_hmac")  # shown, never looked up
    assert not content.path_shows_content(Keyed, "text_hmac")
