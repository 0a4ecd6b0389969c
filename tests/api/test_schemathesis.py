"""Schemathesis against the OpenAPI schema, authenticated: the agent API with a credential, the
workspace API with a personal token. Bounded examples here (CI); `bench/fuzz_api.sh` runs many more.
Checks: never a 5xx, and every response conforms to the schema."""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from governance import actions

# Django's application without config.wsgi's start-up check (a served process's, which reads the key
# store at import: here the test database does not exist yet).
application = get_wsgi_application()

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "15"))

# Called through the WSGI application, not the test client: it must not close the test's connection.
pytestmark = pytest.mark.usefixtures("_keep_the_test_connection")


@pytest.fixture
def tokens(world):
    _, agent_token = actions.create_credential(world.editor, name="fuzz", scopes=["memory:read", "memory:write"])
    return {
        "agent": agent_token,
        "personal": actions.issue_personal_token(world.owner.user),
        "ws": str(world.workspace.pk),
    }


@schema.include(path_regex="^/api/agent/").parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@pytest.mark.django_db
def test_agent_api_never_answers_5xx(case, tokens):
    case.headers = {**(case.headers or {}), "Authorization": f"Bearer {tokens['agent']}"}
    response = case.call()
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])


@schema.include(path_regex="^/api/w/").parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@pytest.mark.django_db
def test_workspace_api_never_answers_5xx(case, tokens):
    if case.path_parameters and "ws_id" in case.path_parameters:
        case.path_parameters["ws_id"] = tokens["ws"]
    case.headers = {**(case.headers or {}), "Authorization": f"Token {tokens['personal']}"}
    response = case.call()
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
