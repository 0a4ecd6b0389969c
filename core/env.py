"""Typed environment helpers: every setting comes from the environment, and a bad value fails loudly."""

from __future__ import annotations

import os
import re

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return default if value is None else value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no, on/off), got {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        parsed = int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from exc
    if minimum is not None and parsed < minimum or maximum is not None and parsed > maximum:
        raise ImproperlyConfigured(f"{name} must be between {minimum} and {maximum}, got {parsed}")
    return parsed


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return float(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {value!r}") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def env_backend(name: str, default: str, backends: dict[str, dict]) -> str:
    """A backend setting (core.backends): a short name of its table in `backends`, or a dotted path."""
    value = os.environ.get(name, default)
    names = backends[name]["aliases"]
    if value not in names and not re.match(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$", value):
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(names)} or a dotted path, got {value!r}")
    return value
