"""A write that passed the gates must not land after the member's removal (issue 22 review, hole C).

A remember admitted before the member was removed waited for the member lock the removal held,
then stored its version after the removal committed — past the cascade that marked the member's
memories unreachable, so a removed member kept a live memory (and, re-added, found it in their new
membership period). A conversation turn queued before the removal was consolidated after it, into
the next period. Now `store_version` re-checks the membership under the member lock (removal takes
the same lock), a turn records its membership period and is discarded when that period ends, and
removal purges the input of the member's waiting turns.

The races are run on PostgreSQL with real threads: one deterministic interleaving (the remember is
held between its gates and its write while the removal commits), then many free-running rounds.
"""

from __future__ import annotations

import random
import threading
import time
from decimal import Decimal

import pytest
from django.db import connection

from core.errors import ApiError
from credits.models import Consolidation, UsageRecord
from governance import actions as governance
from memoryapp import actions, gates
from memoryapp.consolidation import run_consolidation, submit_turn
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion
from memoryapp.system_models import ExtractedMemory
from tests.credits.support import StubModel, ai_agent, balance, grant, use_stub, user_says
from tests.support import postgres_threads

GUARD = 60  # seconds a thread or event may wait before the test fails as hung (not a timing assertion)


def live_versions_of(member) -> list[MemoryVersion]:
    """What a removed member must not have: a stored version the removal's cascade did not mark."""
    return list(MemoryVersion.objects.filter(member_id=member.pk, unreachable_at__isnull=True))


def token_for(member) -> str:
    return governance.create_credential(member, name="racer", scopes=["memory:read", "memory:write"])[1]


class HeldRemember(threading.Thread):
    """A remember admitted now, held between its gates and its write until released."""

    def __init__(self, token: str, monkeypatch):
        super().__init__(daemon=True)
        self.admission = gates.admit(
            token, "remember", {"namespace": "race", "key": "k", "text": "said before the removal"}
        )
        self.reached, self.release = threading.Event(), threading.Event()
        self.outcome: int | None = None
        original = actions.index_entry

        def held(version):
            if threading.current_thread() is self:
                self.reached.set()
                assert self.release.wait(GUARD)
            return original(version)

        monkeypatch.setattr(actions, "index_entry", held)

    def run(self) -> None:
        try:
            actions.remember(self.admission)
            self.outcome = 201
        except ApiError as exc:
            self.outcome = exc.status
        finally:
            connection.close()


@postgres_threads
@pytest.mark.parametrize("readd", [False, True], ids=["removed", "removed-and-re-added"])
def test_a_remember_admitted_before_the_removal_stores_nothing_after_it(world, monkeypatch, readd):
    remember = HeldRemember(token_for(world.editor), monkeypatch)
    remember.start()
    assert remember.reached.wait(GUARD)
    governance.remove_member(world.editor, actor=world.owner.user)
    if readd:
        governance.add_member(world.workspace, world.editor.user.email, role="editor")
    remember.release.set()
    remember.join(GUARD)
    assert remember.outcome == 401
    assert live_versions_of(world.editor) == [], "a version landed after the removal"


def remember_in_round(token: str, i: int, round_no: int, start: threading.Barrier, outcomes: list[int]) -> None:
    try:
        start.wait()
        try:
            actions.remember(
                gates.admit(
                    token, "remember", {"namespace": "race", "key": f"k{i % 2}", "text": f"round {round_no} note {i}"}
                )
            )
            outcomes.append(201)
        except ApiError as exc:
            outcomes.append(exc.status)
    finally:
        connection.close()


@postgres_threads
def test_remembers_racing_removals_leave_no_live_version_behind(world, monkeypatch, settings):
    rounds = 150
    settings.MEMORY_EMBEDDER = "hashing"
    settings.AGENT_REMEMBERS_PER_HOUR = 1_000_000
    original = actions.index_entry
    rng = random.Random(22)

    def jittered(version):
        time.sleep(rng.random() / 500)  # widens the window between the gates and the lock (0–2 ms)
        return original(version)

    monkeypatch.setattr(actions, "index_entry", jittered)
    member = world.editor
    for round_no in range(rounds):
        tokens = [token_for(member) for _ in range(3)]
        start = threading.Barrier(4, timeout=GUARD)
        outcomes: list[int] = []

        threads = [
            threading.Thread(target=remember_in_round, args=(token, i, round_no, start, outcomes), daemon=True)
            for i, token in enumerate(tokens)
        ]
        for thread in threads:
            thread.start()
        start.wait()
        time.sleep(rng.random() / 500)
        governance.remove_member(member, actor=world.owner.user)
        for thread in threads:
            thread.join(GUARD)
        assert set(outcomes) <= {201, 401}, outcomes
        assert live_versions_of(member) == [], f"round {round_no}: {outcomes}: a version landed after the removal"
        member = governance.add_member(world.workspace, member.user.email, role="editor")


# --- conversation turns (both backends) --------------------------------------------------------
LANGUAGE = ExtractedMemory("preference", "preferred_language", "Prefers answers in Japanese")


@pytest.fixture
def turn(world, monkeypatch):
    grant(world.workspace, "100")
    agent = ai_agent(world)
    stub = use_stub(monkeypatch, StubModel(memories=[LANGUAGE]))

    def submit(member):
        return submit_turn(
            workspace=world.workspace,
            member=member,
            agent=agent,
            credential_id=None,
            conversation_id="c",
            anonymous=False,
            messages=user_says("answer in Japanese"),
        ).consolidation

    return submit, stub


def nothing_consolidated(world) -> None:
    assert not MemoryVersion.objects.filter(namespace=ASSISTANT_NAMESPACE).exists()
    assert UsageRecord.objects.count() == 0 and balance(world.workspace) == Decimal("100")


@pytest.mark.django_db
def test_removal_discards_the_waiting_turns_and_purges_their_input(world, turn):
    submit, stub = turn
    queued = submit(world.editor)
    assert queued.status == "queued" and queued.messages and queued.member_period == 1
    governance.remove_member(world.editor, actor=world.owner.user)
    queued.refresh_from_db()
    assert (queued.status, queued.reason, queued.messages) == ("skipped", "member_left", None)
    assert queued.input_purged_at is not None
    governance.add_member(world.workspace, world.editor.user.email, role="editor")
    assert run_consolidation(queued.pk)["status"] == "not_queued"
    assert stub.received == []
    nothing_consolidated(world)


@pytest.mark.django_db
def test_a_turn_of_an_earlier_membership_period_is_not_consolidated_into_the_next(world, turn):
    """A turn submitted as the member was removed (committed after the removal's purge, with the
    period it was admitted in) and run after a re-add: skipped, nothing stored or charged."""
    submit, stub = turn
    stale = world.editor  # admitted in period 1
    governance.remove_member(world.editor, actor=world.owner.user)
    readded = governance.add_member(world.workspace, world.editor.user.email, role="editor")
    assert readded.period == 2
    late = submit(stale)
    assert late.member_period == 1
    result = run_consolidation(late.pk)
    assert (result["status"], result["reason"]) == ("skipped", "member_left")
    assert stub.received == []
    nothing_consolidated(world)


@pytest.mark.django_db
def test_a_member_removed_while_the_model_works_gets_nothing_stored_nor_charged(world, turn):
    submit, stub = turn
    queued = submit(world.editor)
    original = stub.extract

    def removing_meanwhile(messages):
        governance.remove_member(world.editor, actor=world.owner.user)
        governance.add_member(world.workspace, world.editor.user.email, role="editor")
        return original(messages)

    stub.extract = removing_meanwhile
    result = run_consolidation(queued.pk)
    assert (result["status"], result["reason"]) == ("skipped", "member_left")
    queued.refresh_from_db()
    assert queued.messages is None and queued.usage_record_id is None
    nothing_consolidated(world)


@pytest.mark.django_db
def test_a_member_page_write_after_removal_is_refused_under_the_lock(world):
    """store_version re-checks whoever calls it: here the member's own AI-memory add, with the
    member object it was admitted with, after the removal committed."""
    from memoryapp.assistant import add_assistant_memory

    admitted = world.editor
    governance.remove_member(world.editor, actor=world.owner.user)
    with pytest.raises(ApiError) as refused:
        add_assistant_memory(admitted, kind="fact", topic="job_role", summary="Works as an engineer")
    assert refused.value.status == 401
    assert live_versions_of(world.editor) == []
    assert Consolidation.objects.count() == 0
