"""The ASGI application: Django for pages and APIs, the MCP streamable HTTP transport at `/mcp`.

Serve it with `uvicorn config.asgi:application` (lifespan on, uvicorn's default): the lifespan
starts the MCP session manager; Django itself does not take part in the lifespan.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_asgi_application()

# needs the app registry that get_asgi_application set up
from memoryapp.keyring import require_keks_or_exit  # noqa: E402
from memoryapp.mcp import with_mcp  # noqa: E402
from memoryapp.middleware import login_slowdown  # noqa: E402

require_keks_or_exit()  # refuses to serve when stored data keys would not open (docs/encryption.md "The KEK")

application = with_mcp(login_slowdown(django_application))
