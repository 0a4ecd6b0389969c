import pytest
from django.core.cache import cache


@pytest.fixture(autouse=True)
def _clear_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.mark.parametrize("url", ["/accounts/login/", "/admin/login/"])
def test_five_failures_lock_the_username_for_this_address(client, world, url):
    for _ in range(5):
        response = client.post(url, {"username": "owner@acme.test", "password": "wrong"})
        assert response.status_code == 200 and not response.wsgi_request.user.is_authenticated
    response = client.post(url, {"username": "owner@acme.test", "password": "pw-owner-123"})
    assert "Too many failed log-in attempts" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_success_resets_the_count(client, world):
    for _ in range(4):
        client.post("/accounts/login/", {"username": "editor@acme.test", "password": "wrong"})
    response = client.post("/accounts/login/", {"username": "editor@acme.test", "password": "pw-editor-123"})
    assert response.status_code == 302
