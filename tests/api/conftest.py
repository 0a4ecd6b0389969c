"""Fixtures of the API tests: `_keep_the_test_connection`, for the modules that call the WSGI
application directly (schemathesis) rather than through Django's test client. Not autouse: a
module asks for it with `pytestmark = pytest.mark.usefixtures("_keep_the_test_connection")`."""

from __future__ import annotations

import pytest


@pytest.fixture
def _keep_the_test_connection():
    """Like Django's test client: the WSGI handler must not close the test's connection."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
