"""Swappable backends, chosen by settings (Sentry's service wrappers): the rate limiter, the
embedder, the system model and the KEK store.

Each backend setting holds a short name from its table in `settings.BACKENDS` (``redis``, ``e5``,
``pkcs11`` ...) or the dotted path of a callable that takes no argument and returns the backend.
`load(setting)` answers the configured one, built once per process; `get(setting, value)` the one
a value names (a stored embedder's, say). A change of the setting, of a setting its backends are
built from (the table's ``reads``) or of BACKENDS itself forgets what was built, so
`override_settings` works; `forget()` stands for a new process in tests. `check_backends` (system
check ``backends.E001``) imports every configured path and names the setting that fails; the app
runs it at start (memoryapp.apps).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

DOTTED_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")

_built: dict[tuple[str, str], Any] = {}
_lock = threading.RLock()


class UnknownBackend(ImproperlyConfigured):
    """A value that is neither a name of the setting's table nor a dotted path."""


def aliases(setting: str) -> dict[str, str]:
    """The setting's short names and the dotted paths they stand for."""
    return dict(settings.BACKENDS[setting]["aliases"])


def resolve(setting: str, value: str) -> str:
    """The dotted path `value` names for `setting`."""
    table = aliases(setting)
    if value in table:
        return table[value]
    if DOTTED_PATH.match(value):
        return value
    raise UnknownBackend(f"{setting}={value!r} is neither one of {', '.join(sorted(table))} nor a dotted path")


def get(setting: str, value: str) -> Any:
    """The backend `value` names for `setting`, built on first use and kept."""
    key = (setting, resolve(setting, value))
    found = _built.get(key)
    if found is not None:
        return found
    with _lock:
        found = _built.get(key)
        if found is None:
            found = import_string(key[1])()
            _built[key] = found
    return found


def load(setting: str) -> Any:
    """The backend the setting configures."""
    return get(setting, getattr(settings, setting))


def forget(setting: str | None = None) -> None:
    """Drop what was built (for one setting, or all): the next `load` builds again."""
    with _lock:
        for key in [k for k in _built if setting in (None, k[0])]:
            del _built[key]


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "BACKENDS":
        forget()
        return
    for kind, table in settings.BACKENDS.items():
        if setting in table.get("reads", ()):
            forget(kind)


setting_changed.connect(_on_setting_changed, dispatch_uid="core.backends")


def check_backends(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """backends.E001: a backend setting whose value names nothing that imports and can be called."""
    errors = []
    for setting in settings.BACKENDS:
        value = getattr(settings, setting)
        try:
            path = resolve(setting, value)
            target = import_string(path)
        except ImproperlyConfigured as exc:
            problem = str(exc)
        except ImportError as exc:
            problem = f"{setting}={value!r} does not import: {exc}"
        else:
            if callable(target):
                continue
            problem = f"{setting}={value!r}: {path} cannot be called"
        hint = "a name of the setting's table or the dotted path of a callable (docs/configuration.md)"
        errors.append(checks.Error(problem, hint=hint, id="backends.E001"))
    return errors


def require_backends() -> None:
    """`check_backends` at a process's start: ImproperlyConfigured naming every setting that fails."""
    errors = check_backends()
    if errors:
        raise ImproperlyConfigured(
            "; ".join(error.msg for error in errors) + '. Refusing to start (docs/configuration.md, "Backends").'
        )
