"""Isolation between members (SPEC §4.3, §5): another member's memory is indistinguishable from a missing one."""

from memoryapp.models import MemoryVersion
from tests.support import client_for, make_agent


def test_another_members_memory_is_indistinguishable_from_a_missing_one(world, agent):
    theirs = make_agent(world.owner).remember(namespace="n", text="owner's private note").json()["memory"]["id"]
    mine_missing = agent.forget(memoryId="999999")
    not_mine = agent.forget(memoryId=theirs)
    assert not_mine.status_code == mine_missing.status_code == 404
    assert not_mine.json() == mine_missing.json()
    assert MemoryVersion.objects.filter(pk=theirs).exists()


def test_isolation_between_members_and_workspaces(world):
    owner, editor, outsider = make_agent(world.owner), make_agent(world.editor), make_agent(world.outsider)
    editor.remember(namespace="n", text="editor secret about apricots")
    for other in (owner, outsider):
        assert other.list().json()["memories"] == []
        assert other.recall(query="apricots").json()["memories"] == []
        assert other.forget(namespace="n", key="k").status_code == 404
    assert (
        "apricots"
        not in client_for(world.owner).get(f"/api/w/{world.workspace.pk}/ask-history/agent-memories").content.decode()
    )
