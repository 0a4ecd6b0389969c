from tests.support import error_code


def test_remember_then_list_returns_the_masked_memory(agent):
    response = agent.remember(namespace="prefs", key="contact", text="Write to me at jane.doe@example.com please")
    assert response.status_code == 201, response.json()
    memory = response.json()["memory"]
    assert memory["text"] == "Write to me at [EMAIL] please"
    assert memory["masked"] == ["EMAIL"]
    assert memory["type"] == "memory" and memory["evidence"] is False and memory["trust"] == "untrusted"
    listed = agent.list()
    assert listed.status_code == 200
    assert [m["id"] for m in listed.json()["memories"]] == [memory["id"]]


def test_unknown_token_is_unauthenticated(client, world):
    response = client.post(
        "/api/agent/v1/memories/list",
        {},
        content_type="application/json",
        HTTP_AUTHORIZATION="Bearer gam_000000000000_nope",
    )
    assert response.status_code == 401
    assert error_code(response) == "UNAUTHENTICATED"
