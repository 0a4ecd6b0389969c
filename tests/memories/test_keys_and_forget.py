"""Keys and forget (SPEC §4.3): the same key supersedes and chains, a keyless memory never does, forget by an old
version id removes the whole chain, and a forget that matches nothing is 404."""

from memoryapp.models import MemoryVersion
from tests.support import error_code


def test_same_key_supersedes_and_chains(agent):
    first = agent.remember(namespace="prefs", key="editor", text="Uses vim").json()
    second = agent.remember(namespace="prefs", key="editor", text="Uses emacs now").json()
    assert first["superseded"] == 0 and second["superseded"] == 1
    assert second["memory"]["version"] == 2
    old = MemoryVersion.objects.get(pk=first["memory"]["id"])
    new = MemoryVersion.objects.get(pk=second["memory"]["id"])
    assert old.valid_to == new.valid_from
    listed = agent.list().json()["memories"]
    assert [m["text"] for m in listed] == ["Uses emacs now"]


def test_keyless_memories_never_supersede(agent):
    agent.remember(namespace="n", text="one")
    second = agent.remember(namespace="n", text="two").json()
    assert second["superseded"] == 0
    assert len(agent.list().json()["memories"]) == 2


def test_forget_by_an_old_version_id_removes_the_whole_chain(agent):
    first = agent.remember(namespace="prefs", key="editor", text="Uses vim").json()["memory"]["id"]
    agent.remember(namespace="prefs", key="editor", text="Uses emacs")
    agent.remember(namespace="prefs", text="keyless stays")
    assert agent.forget(memoryId=first).json()["forgotten"] == 2
    assert [m["text"] for m in agent.list().json()["memories"]] == ["keyless stays"]


def test_forget_nothing_matched_is_404(agent):
    assert error_code(agent.forget(namespace="n", key="none")) == "MEMORY_NOT_FOUND"
    assert error_code(agent.forget(memoryId="424242")) == "MEMORY_NOT_FOUND"
