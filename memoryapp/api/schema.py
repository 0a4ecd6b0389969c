"""OpenAPI for plain APIViews: every endpoint appears in the schema with its error shape.

Views that declare bodies with `extend_schema` keep them; the rest are described as JSON
objects instead of being dropped from the schema."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse

ERROR = OpenApiResponse(OpenApiTypes.OBJECT, description='{"error": {"code", "message", "details"}}')


class ProductAutoSchema(AutoSchema):
    def get_request_serializer(self):
        if self.method in ("GET", "DELETE", "HEAD"):
            return None
        return OpenApiTypes.OBJECT

    def get_operation_id(self):
        # method + path is unique by construction; the default (list/retrieve guesses) collides
        parts = [p.strip("{}").replace("-", "_") for p in self.path.strip("/").split("/") if p not in ("api",)]
        return f"{self.method.lower()}_{'_'.join(parts)}"

    def get_response_serializers(self):
        status = "201" if self.method == "POST" and getattr(self.view, "created_status", False) else "200"
        responses = {status: OpenApiTypes.OBJECT, "400": ERROR, "401": ERROR, "403": ERROR, "404": ERROR}
        if self.method == "DELETE":
            responses["204"] = OpenApiResponse(description="Deleted.")
        return responses


from drf_spectacular.extensions import OpenApiAuthenticationExtension  # noqa: E402


class PersonalTokenScheme(OpenApiAuthenticationExtension):
    target_class = "governance.auth.PersonalTokenAuthentication"
    name = "personalToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <personal token>` from `manage.py issue_api_token`.",
        }


class AgentBearerScheme(OpenApiAuthenticationExtension):
    target_class = "governance.auth.AgentBearerAuthentication"
    name = "agentCredential"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An agent credential token (Settings → Agent access).",
        }
