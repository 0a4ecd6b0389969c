def test_recall_ranks_exact_words_first(agent):
    agent.remember(namespace="prefs", text="The user prefers dark mode in every editor")
    agent.remember(namespace="prefs", text="Lunch meetings should be scheduled after noon")
    response = agent.recall(query="dark mode editor")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["memories"][0]["text"].startswith("The user prefers dark mode")
    assert body["memories"][0]["ranks"]["bm25"] == 1
    assert body["considered"] == 2 and body["hidden"] == 0 and body["degraded"] == []
