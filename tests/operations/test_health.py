def test_healthz_reports_each_dependency(client, db):
    response = client.get("/healthz")
    body = response.json()
    assert set(body["checks"]) == {"database", "redis", "broker"}
    assert body["checks"]["database"]["ok"] is True
    assert response.status_code in (200, 503)


def test_readyz_is_ready_when_migrated(client, db):
    response = client.get("/readyz")
    assert response.status_code == 200 and response.json()["status"] == "ready"
