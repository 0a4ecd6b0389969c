from pathlib import Path

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


# --- issue 22 row 9: nobody can lock the owner out -------------------------------------------------------
ATTACKER, OWNER_ADDRESS = "203.0.113.7", "198.51.100.2"


@pytest.fixture
def slept(monkeypatch) -> list[float]:
    """The delays the throttle imposes, recorded instead of slept (no wall clock in tests)."""
    from governance import login_throttle

    delays: list[float] = []

    async def record(delay: float) -> None:
        delays.append(delay)

    monkeypatch.setattr(login_throttle, "asleep", record)
    monkeypatch.setattr(login_throttle, "sleep", delays.append)
    return delays


def attempt(client, url: str, password: str, **meta):
    return client.post(url, {"username": "owner@acme.test", "password": password}, **meta)


def logged_in(response) -> bool:
    return response.status_code == 302 and "_auth_user_id" in response.wsgi_request.session


@pytest.mark.parametrize("url", ["/accounts/login/", "/admin/login/"])
def test_an_attacker_failing_from_one_address_never_stops_the_owner_from_another(client, world, url, slept):
    from django.test import Client

    if url.startswith("/admin/"):  # the console lets staff in only
        world.owner.user.is_staff = True
        world.owner.user.save(update_fields=["is_staff"])
    for _ in range(40):
        assert not logged_in(attempt(client, url, "wrong", REMOTE_ADDR=ATTACKER))
    assert (
        "Too many failed log-in attempts" in attempt(client, url, "pw-owner-123", REMOTE_ADDR=ATTACKER).content.decode()
    )  # the per-address limit holds
    assert logged_in(attempt(Client(), url, "pw-owner-123", REMOTE_ADDR=OWNER_ADDRESS))


def test_behind_a_proxy_the_owner_is_judged_by_their_own_address(world, settings, slept):
    """Behind a reverse proxy every request comes from the proxy's address: counted by it, 25
    failures of an attacker refused the owner's correct password. With TRUSTED_PROXY_HOPS the
    client's address is the one the proxy appended to X-Forwarded-For."""
    from django.test import Client

    settings.TRUSTED_PROXY_HOPS = 1
    attacker, owner = Client(), Client()
    for _ in range(25):
        attempt(
            attacker,
            "/accounts/login/",
            "wrong",
            REMOTE_ADDR="10.0.0.1",
            HTTP_X_FORWARDED_FOR=f"{OWNER_ADDRESS}, {ATTACKER}",
        )  # a spoofed first entry changes nothing
    assert (
        "Too many failed log-in attempts"
        in attempt(
            attacker, "/accounts/login/", "pw-owner-123", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=ATTACKER
        ).content.decode()
    )
    assert logged_in(
        attempt(owner, "/accounts/login/", "pw-owner-123", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=OWNER_ADDRESS)
    )


def test_an_attacker_rotating_addresses_is_slowed_by_a_growing_bounded_delay(world, slept):
    from django.test import Client

    from governance import login_throttle as throttle

    attacks = throttle.ACCOUNT_FREE_FAILURES + 12
    for i in range(attacks):  # a fresh address for every guess: the per-address limit never bites
        assert not logged_in(attempt(Client(), "/accounts/login/", f"guess-{i}", REMOTE_ADDR=f"192.0.2.{i + 1}"))
    assert len(slept) == attacks - throttle.ACCOUNT_FREE_FAILURES  # the first guesses are free, then every one waits
    assert slept == sorted(slept) and slept[0] > 0 and slept[-1] == throttle.ACCOUNT_MAX_DELAY  # grows, up to a bound
    assert (
        slept[:4] == [0.5, 1.0, 2.0, 4.0] and slept[4:] == [throttle.ACCOUNT_MAX_DELAY] * 8
    )  # then every guess costs the bound
    # The owner, from a fresh address, waits as long as the attacker's next guess would — the
    # delay cannot tell a right password from a wrong one — and is let in.
    before = len(slept)
    assert logged_in(attempt(Client(), "/accounts/login/", "pw-owner-123", REMOTE_ADDR=OWNER_ADDRESS))
    assert slept[before:] == [throttle.ACCOUNT_MAX_DELAY]
    # A success clears the account's slow-down.
    attempt(Client(), "/accounts/login/", "wrong", REMOTE_ADDR="192.0.2.250")
    assert len(slept) == before + 1


def test_the_delay_is_the_same_for_right_and_wrong_passwords(world, slept):
    from django.test import Client

    from governance import login_throttle as throttle

    for i in range(throttle.ACCOUNT_FREE_FAILURES + 2):
        attempt(Client(), "/accounts/login/", "wrong", REMOTE_ADDR=f"192.0.2.{i + 1}")
    wrong = slept[-1]
    attempt(Client(), "/accounts/login/", "wrong", REMOTE_ADDR="192.0.2.200")
    right_before = throttle.account_delay(throttle.account_failures("owner@acme.test"))  # what the next attempt waits
    attempt(Client(), "/accounts/login/", "pw-owner-123", REMOTE_ADDR="192.0.2.201")
    assert slept[-1] == right_before and wrong <= right_before <= throttle.ACCOUNT_MAX_DELAY


@pytest.mark.parametrize(
    ("failures", "delay"), [(0, 0.0), (9, 0.0), (10, 0.5), (11, 1.0), (12, 2.0), (13, 4.0), (14, 5.0), (1000, 5.0)]
)
def test_the_account_delay_doubles_after_the_free_failures_and_stops_at_its_bound(failures, delay):
    from governance import login_throttle as throttle

    assert throttle.account_delay(failures) == delay


def test_under_asgi_the_wait_is_awaited_before_django_and_holds_no_thread(world, slept):
    """A sleeping synchronous view (or an async-capable middleware Django runs in a thread) would
    hold one of the few threads the process runs every sync view on; a handful of slowed attempts
    would stall every page. Under ASGI the wait happens in `login_slowdown`, which wraps the ASGI
    application: awaited on the event loop before Django is called, the body handed on intact."""
    from asgiref.sync import async_to_sync

    from config import asgi
    from governance import login_throttle as throttle
    from memoryapp.middleware import login_slowdown

    body = b"username=owner%40acme.test&password=guess"
    chunks = [
        {"type": "http.request", "body": body[:10], "more_body": True},
        {"type": "http.request", "body": body[10:]},
    ]
    seen: list = []

    async def django(scope, receive, send):  # stands in for Django: what reached it, and when
        seen.append((list(slept), (await receive())["body"] + (await receive())["body"]))

    async def receive():
        return chunks.pop(0)

    for _ in range(throttle.ACCOUNT_FREE_FAILURES + 1):
        throttle._count_failure(throttle._account_key("owner@acme.test"))
    async_to_sync(login_slowdown(django))({"type": "http", "method": "POST", "path": "/accounts/login/"}, receive, None)
    assert seen == [([1.0], body)]  # waited first; Django then reads the body as it came
    assert "login_slowdown(" in Path(asgi.__file__).read_text()  # the served application is wrapped


def test_under_wsgi_and_the_test_client_the_wait_is_in_the_request_thread(client, world, slept):
    from governance import login_throttle as throttle

    for _ in range(throttle.ACCOUNT_FREE_FAILURES):
        throttle._count_failure(throttle._account_key("owner@acme.test"))
    assert logged_in(attempt(client, "/accounts/login/", "pw-owner-123", REMOTE_ADDR=OWNER_ADDRESS))
    assert slept == [0.5]
