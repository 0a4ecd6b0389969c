import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from memoryapp.keyring import require_keks_or_exit  # noqa: E402  (needs the app registry)

require_keks_or_exit()  # refuses to serve when stored data keys would not open (docs/encryption.md "The KEK")
