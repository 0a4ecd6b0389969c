"""One way to choose a backend (core.backends): short names and dotted paths, built once, rebuilt
when a setting it is built from changes, and checked at start with the setting named."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.utils.module_loading import import_string

from core import backends
from core.env import env_backend
from memoryapp import ratelimit, system_models
from memoryapp.recall.embedders import HashingEmbedder, get_embedder

# The values operators set before the loader existed: each must keep naming its backend.
OPERATOR_VALUES = {
    "RATE_LIMIT_BACKEND": ("redis", "database"),
    "MEMORY_EMBEDDER": ("e5", "minilm", "use", "hashing"),
    "SYSTEM_MODEL": ("offline", "openai"),
    "KEK_BACKEND": ("file", "pkcs11"),
}


@pytest.mark.parametrize("setting", sorted(OPERATOR_VALUES))
def test_every_earlier_value_is_a_short_name_whose_path_imports_a_callable(setting, monkeypatch):
    assert set(OPERATOR_VALUES[setting]) <= set(backends.aliases(setting))
    for value in OPERATOR_VALUES[setting]:
        monkeypatch.setenv(setting, value)
        assert env_backend(setting, "unused", settings.BACKENDS) == value
        assert callable(import_string(backends.resolve(setting, value)))


def test_every_backend_setting_has_a_table():
    assert sorted(settings.BACKENDS) == sorted(OPERATOR_VALUES)


def test_the_environment_takes_a_dotted_path_and_refuses_anything_else(monkeypatch):
    monkeypatch.setenv("SYSTEM_MODEL", "memoryapp.system_models.OfflineRulesModel")
    assert env_backend("SYSTEM_MODEL", "offline", settings.BACKENDS) == "memoryapp.system_models.OfflineRulesModel"
    for bad in ("gpt", "memoryapp/system_models.py", "memoryapp.", ""):
        monkeypatch.setenv("SYSTEM_MODEL", bad)
        with pytest.raises(ImproperlyConfigured, match="SYSTEM_MODEL must be one of offline, openai or a dotted path"):
            env_backend("SYSTEM_MODEL", "offline", settings.BACKENDS)


def test_a_short_name_and_its_dotted_path_give_the_same_backend_built_once():
    with override_settings(SYSTEM_MODEL="offline"):
        first = system_models.get_system_model()
        assert isinstance(first, system_models.OfflineRulesModel)
        assert system_models.get_system_model() is first
    with override_settings(SYSTEM_MODEL="memoryapp.system_models.OfflineRulesModel"):
        assert system_models.get_system_model() is first
    assert get_embedder("hashing") is get_embedder("memoryapp.recall.embedders.hashing.HashingEmbedder")
    assert get_embedder("hashing-v1-256") is get_embedder("hashing")  # a stored vector's id


def test_a_setting_the_backend_is_built_from_rebuilds_it():
    with override_settings(SYSTEM_MODEL="openai", SYSTEM_MODEL_URL="http://127.0.0.1:8059/v1", SYSTEM_MODEL_NAME="one"):
        model = system_models.get_system_model()
        assert (model.url, model.name) == ("http://127.0.0.1:8059/v1/chat/completions", "one")
        with override_settings(SYSTEM_MODEL_NAME="two"):
            assert system_models.get_system_model().name == "two"
        assert system_models.get_system_model().name == "one"
    with override_settings(RATE_LIMIT_BACKEND="database"):
        limiter = ratelimit.get_limiter()
        assert isinstance(limiter, ratelimit.DatabaseRateLimiter)
        with override_settings(REDIS_URL="redis://127.0.0.1:1/0"):
            assert ratelimit.get_limiter() is not limiter  # REDIS_URL is one of the limiter's `reads`


def test_forget_stands_for_a_new_process():
    with override_settings(RATE_LIMIT_BACKEND="database"):
        limiter = ratelimit.get_limiter()
        backends.forget("RATE_LIMIT_BACKEND")
        assert ratelimit.get_limiter() is not limiter


def test_an_unknown_name_is_refused_with_the_setting_named():
    with pytest.raises(
        backends.UnknownBackend,
        match="RATE_LIMIT_BACKEND='memcached' is neither one of database, redis nor a dotted path",
    ):
        backends.resolve("RATE_LIMIT_BACKEND", "memcached")
    with pytest.raises(ValueError, match="unknown embedder 'word2vec'"):
        get_embedder("word2vec")


def test_the_check_passes_on_the_configured_backends():
    assert backends.check_backends() == []


@pytest.mark.parametrize(
    ("setting", "value", "problem"),
    [
        ("RATE_LIMIT_BACKEND", "memcached", "RATE_LIMIT_BACKEND='memcached' is neither one of"),
        ("SYSTEM_MODEL", "nowhere.Model", "SYSTEM_MODEL='nowhere.Model' does not import: No module named 'nowhere'"),
        (
            "KEK_BACKEND",
            "memoryapp.keyring.no_such_source",
            "KEK_BACKEND='memoryapp.keyring.no_such_source' does not import",
        ),
        (
            "MEMORY_EMBEDDER",
            "memoryapp.recall.embedders.E5_CASEFOLD",
            "MEMORY_EMBEDDER='memoryapp.recall.embedders.E5_CASEFOLD': memoryapp.recall.embedders.E5_CASEFOLD cannot "
            "be called",
        ),
    ],
)
def test_the_check_names_the_setting_that_fails(setting, value, problem):
    with override_settings(**{setting: value}):
        errors = backends.check_backends()
        assert [e.id for e in errors] == ["backends.E001"] and errors[0].msg.startswith(problem), errors
        with pytest.raises(ImproperlyConfigured, match=f"^{problem[:20]}.*Refusing to start"):
            backends.require_backends()


def test_a_dotted_path_outside_the_project_is_loaded(monkeypatch):
    with override_settings(MEMORY_EMBEDDER="tests.operations.test_backends.SmallHashing"):
        assert backends.check_backends() == []
        embedder = backends.load("MEMORY_EMBEDDER")
        assert isinstance(embedder, SmallHashing) and embedder.dim == 16


class SmallHashing(HashingEmbedder):
    def __init__(self):
        super().__init__(16)
