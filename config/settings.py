"""Settings come from environment variables only (see docs/configuration.md).

`DATABASE_URL`, `REDIS_URL` and `CELERY_BROKER_URL` decide embedded vs production: with none of
them set the product runs on a SQLite file and a SQLite-backed Celery broker, needing no server.

Over ~400 lines on purpose: Django's one settings module, every setting with the comment that
says why its default is what it is.
"""

from __future__ import annotations

import base64
import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

from core.env import env_backend, env_bool, env_choice, env_float, env_int, env_list, env_str
from core.private_files import create_private
from memoryapp.crypto import decode_kek

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)
(VAR_DIR / "static").mkdir(exist_ok=True)

DEBUG = env_bool("DEBUG", False)


def _kept_in_var(name: str, make) -> str:
    """A value generated once and kept in var/<name> (mode 600). Processes starting together
    (web, worker, beat on a fresh var/) agree on one: the value is written to a private temp
    file and hard-linked into place, so the first link wins and nobody reads a half-written
    file."""
    key_file = VAR_DIR / name
    if not key_file.exists():
        tmp = VAR_DIR / f".{name}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(make())
        try:
            os.link(tmp, key_file)
        except FileExistsError:
            pass  # another process was first: use its value
        finally:
            tmp.unlink()
    return key_file.read_text().strip()


def _secret_key() -> str:
    configured = env_str("SECRET_KEY")
    if configured:
        if len(configured) < 50:
            raise ImproperlyConfigured("SECRET_KEY must be at least 50 characters long")
        return configured
    # Embedded default: one random key per checkout, kept outside git, so sessions survive restarts.
    return _kept_in_var("secret_key", lambda: secrets.token_urlsafe(64))


SECRET_KEY = _secret_key()


def _receipt_signing_key() -> str:
    """The Ed25519 key that signs deletion receipts (docs/receipts.md): base64 of the raw 32-byte
    private key, or a PKCS#8 PEM. Embedded default: generated once per checkout and kept in var/
    (outside git) like the secret key, so receipts signed before a restart still verify."""
    configured = env_str("RECEIPT_SIGNING_KEY")
    if configured:
        return configured
    return _kept_in_var("receipt_signing_key", lambda: base64.b64encode(secrets.token_bytes(32)).decode())


RECEIPT_SIGNING_KEY = _receipt_signing_key()


def _content_digest_key() -> str:
    """The server key under which digests of memory content are computed for everyone but the
    member (SPEC §8.2: keyed, never a plain hash; governance/content.py derives one key per
    workspace and member from it): base64 of at least 32 random bytes. Embedded default:
    generated once and kept in var/ like the receipt signing key. Changing it changes the digests
    of memories written afterwards; nothing else depends on it."""
    configured = env_str("CONTENT_DIGEST_KEY")
    if configured:
        try:
            raw = base64.b64decode(configured, validate=True)
        except ValueError:
            raise ImproperlyConfigured(
                "CONTENT_DIGEST_KEY must be base64 (for example: openssl rand -base64 32)"
            ) from None
        if len(raw) < 32:
            raise ImproperlyConfigured("CONTENT_DIGEST_KEY must decode to at least 32 bytes")
        return configured
    return _kept_in_var("content_digest_key", lambda: base64.b64encode(secrets.token_bytes(32)).decode())


CONTENT_DIGEST_KEY = _content_digest_key()
# Retired public keys (base64 raw 32 bytes or PEM, comma-separated) still accepted when receipts
# signed before a key rotation are verified.
RECEIPT_VERIFY_KEYS = env_list("RECEIPT_VERIFY_KEYS", [])
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "governance",
    "memoryapp",
    "retention",
    "credits",
]

MIDDLEWARE = [
    # Outermost: the log-in slow-down under WSGI (under ASGI config.asgi waits before Django,
    # on the event loop; governance/login_throttle.py); the request line's latency starts after it.
    "memoryapp.middleware.LoginSlowdownMiddleware",
    # Then: its latency and its line cover everything below, the 413s and static files included.
    "memoryapp.middleware.RequestLogMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "memoryapp.middleware.BodySizeLimitMiddleware",
    "memoryapp.middleware.SecurityHeadersMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

# --- Database -------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'memory.sqlite3'}")
# PostgreSQL: a bounded pool per process and database (Django's psycopg pool), so connections can
# never pile up: under ASGI every request's sync view runs in a thread of its own, and persistent
# connections (CONN_MAX_AGE) stayed open per thread until max_connections refused new ones. A
# request takes a connection at its first query and gives it back when it ends; one that waits
# longer than DB_POOL_TIMEOUT seconds answers 503 SERVICE_UNAVAILABLE (core.unavailable). Sizing:
# web processes x 2 databases x DB_POOL_MAX_SIZE + Celery must fit max_connections
# (docs/operations.md, "Database connections"). DB_POOL_MAX_SIZE=0: no pool (an external pooler
# such as PgBouncer in transaction mode), then DB_CONN_MAX_AGE applies.
DB_POOL_MAX_SIZE = env_int("DB_POOL_MAX_SIZE", 8, minimum=0, maximum=1000)
DB_POOL_MIN_SIZE = min(env_int("DB_POOL_MIN_SIZE", 1, minimum=0, maximum=1000), DB_POOL_MAX_SIZE)
DB_POOL_TIMEOUT = env_float("DB_POOL_TIMEOUT", 10.0)
# A pooled connection idle this long is closed (down to DB_POOL_MIN_SIZE): a burst leaves no
# connections behind for long.
DB_POOL_MAX_IDLE = env_float("DB_POOL_MAX_IDLE", 60.0)
DB_CONN_MAX_AGE = env_int("DB_CONN_MAX_AGE", 0, minimum=0)
if not 0 < DB_POOL_TIMEOUT <= 600 or DB_POOL_MAX_IDLE < 1:
    raise ImproperlyConfigured(
        "DB_POOL_TIMEOUT must be between 0 and 600 seconds and DB_POOL_MAX_IDLE at least 1 second"
    )
if DB_POOL_MAX_SIZE and DB_CONN_MAX_AGE:
    raise ImproperlyConfigured(
        "DB_CONN_MAX_AGE keeps connections per thread and cannot be combined with the pool: set DB_POOL_MAX_SIZE=0 to "
        "use it"
    )


def _postgres(db: dict, alias: str) -> dict:
    """A PostgreSQL database's settings: health-checked connections, from the pool unless it is off."""
    db["CONN_HEALTH_CHECKS"] = True  # with the pool: psycopg_pool checks a connection before lending it
    if DB_POOL_MAX_SIZE:
        db["CONN_MAX_AGE"] = 0  # Django's pool requires it: a request gives its connection back
        pool = {
            "min_size": DB_POOL_MIN_SIZE,
            "max_size": DB_POOL_MAX_SIZE,
            "timeout": DB_POOL_TIMEOUT,
            "max_idle": DB_POOL_MAX_IDLE,
            "name": alias,
        }
        db["OPTIONS"] = {**db.get("OPTIONS", {}), "pool": pool}
    return db


try:
    _db = dj_database_url.parse(DATABASE_URL, conn_max_age=DB_CONN_MAX_AGE)
except Exception as exc:  # dj-database-url raises several types for a bad URL
    raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from exc
if _db["ENGINE"] == "django.db.backends.sqlite3":
    _db["CONN_MAX_AGE"] = 0
    # IMMEDIATE: every transaction takes the write lock up front, so read-then-write actions
    # (supersession, the 5,000 cap, the rate limit) are serialised across processes on SQLite.
    _db["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        # secure_delete: erased rows are overwritten with zeros, whatever the host's SQLite was
        # compiled with (retention.erasure also checkpoints the WAL after every erase).
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000; PRAGMA "
        "secure_delete=ON;",
    }
    _db.setdefault("TEST", {})["NAME"] = str(VAR_DIR / "test_memory.sqlite3")
elif _db["ENGINE"] == "django.db.backends.postgresql":
    _postgres(_db, "default")
else:
    raise ImproperlyConfigured("DATABASE_URL must point to PostgreSQL or SQLite")
IS_POSTGRES = _db["ENGINE"] == "django.db.backends.postgresql"


# --- Key store (SPEC §8.2, docs/encryption.md) -------------------------------------------------
# Memory content is stored only encrypted, under one data key per memory version; the data keys
# live wrapped by the key-encryption key in a database of their own (alias `keyring`, the one model
# `memoryapp.DataKey`, memoryapp.routers), whose backups are separate and short-lived. Embedded
# default: a second SQLite file next to the data's. PostgreSQL: KEYRING_DATABASE_URL, or by default a
# database `<name>_keyring` on the same server (`migrate` creates it) — production should give it
# a server (cluster) of its own, so that no physical backup of the data holds the keys.
KEYRING_DATABASE_URL = env_str("KEYRING_DATABASE_URL", "")


def _keyring_database() -> dict:
    if KEYRING_DATABASE_URL:
        try:
            keyring = dj_database_url.parse(KEYRING_DATABASE_URL, conn_max_age=DB_CONN_MAX_AGE)
        except Exception as exc:
            raise ImproperlyConfigured(f"KEYRING_DATABASE_URL is not a valid database URL: {exc}") from exc
    elif IS_POSTGRES:
        keyring = {
            **_db,
            "NAME": f"{_db['NAME']}_keyring",
            "TEST": {},
            "OPTIONS": {k: v for k, v in _db.get("OPTIONS", {}).items() if k != "pool"},
        }
    else:
        keyring = dj_database_url.parse(f"sqlite:///{VAR_DIR / 'keyring.sqlite3'}")
    if keyring["ENGINE"] == "django.db.backends.sqlite3":
        keyring["CONN_MAX_AGE"] = 0
        # secure_delete: a destroyed key is overwritten with zeros in the file; its WAL is truncated
        # after every deletion (memoryapp.keyring). synchronous=FULL: a key is on disk before the
        # data row that needs it commits, even across a power cut.
        keyring["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=30000; PRAGMA "
            "secure_delete=ON;",
        }
        keyring.setdefault("TEST", {})["NAME"] = str(VAR_DIR / "test_keyring.sqlite3")
    elif keyring["ENGINE"] == "django.db.backends.postgresql":
        _postgres(keyring, "keyring")
    else:
        raise ImproperlyConfigured("KEYRING_DATABASE_URL must point to PostgreSQL or SQLite")
    same = (keyring["ENGINE"], keyring.get("HOST"), keyring.get("PORT"), keyring["NAME"]) == (
        _db["ENGINE"],
        _db.get("HOST"),
        _db.get("PORT"),
        _db["NAME"],
    )
    if same:
        raise ImproperlyConfigured(
            "KEYRING_DATABASE_URL must name another database than DATABASE_URL: the keys must not be in the data's "
            "backups"
        )
    return keyring


DATABASES = {"default": _db, "keyring": _keyring_database()}
# The SQLite files (the embedded default: var/memory.sqlite3, var/keyring.sqlite3) are created mode
# 600 like the key files next to them, before any connection; SQLite gives their -wal and -shm the
# same mode, and every connection re-checks them (core.private_files, memoryapp.apps).
for _sqlite in (db for db in DATABASES.values() if db["ENGINE"] == "django.db.backends.sqlite3"):
    if Path(_sqlite["NAME"]).parent.is_dir():
        create_private(_sqlite["NAME"])
DATABASE_ROUTERS = ["memoryapp.routers.KeyringRouter"]


def _kek(name: str, value: str) -> str:
    try:
        decode_kek(value, name=name)
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None
    return value


# --- Swappable backends (core.backends, docs/configuration.md "Backends") -------------------------
# Each backend setting takes a short name of its table here or the dotted path of a callable that
# takes no argument and returns the backend. `reads`: the settings a backend is built from (a
# change of one rebuilds it).
BACKENDS = {
    "RATE_LIMIT_BACKEND": {
        "aliases": {
            "redis": "memoryapp.ratelimit.RedisRateLimiter",
            "database": "memoryapp.ratelimit.DatabaseRateLimiter",
        },
        "reads": ("REDIS_URL",),
    },
    "MEMORY_EMBEDDER": {
        "aliases": {
            "e5": "memoryapp.recall.embedders.e5.E5Embedder",
            "minilm": "memoryapp.recall.embedders.minilm.MiniLMEmbedder",
            "use": "memoryapp.recall.embedders.use.USEEmbedder",
            "hashing": "memoryapp.recall.embedders.hashing.HashingEmbedder",
        },
    },
    "SYSTEM_MODEL": {
        "aliases": {
            "offline": "memoryapp.system_models.OfflineRulesModel",
            "openai": "memoryapp.system_models.OpenAICompatibleModel",
        },
        "reads": ("SYSTEM_MODEL_URL", "SYSTEM_MODEL_NAME", "SYSTEM_MODEL_API_KEY", "SYSTEM_MODEL_TIMEOUT_SECONDS"),
    },
    "KEK_BACKEND": {
        "aliases": {"file": "memoryapp.keyring.file_keks", "pkcs11": "memoryapp.keyring.pkcs11_keks"},
        "reads": (
            "MEMORY_KEK",
            "RETIRED_KEKS",
            "MEMORY_KEK_FILE",
            "PKCS11_MODULE",
            "PKCS11_TOKEN_LABEL",
            "PKCS11_PIN",
            "PKCS11_PIN_FILE",
            "PKCS11_KEY_LABEL",
        ),
    },
}


def _names(setting: str, alias: str, value: str) -> bool:
    """Whether a backend setting's value (a short name or a dotted path) is that short name's backend."""
    table = BACKENDS[setting]["aliases"]
    return table.get(value, value) == table[alias]


# The key-encryption key (docs/encryption.md "The KEK"): base64 of 32 random bytes, from the
# environment in production. Unset (the embedded default): the file var/memory_kek (mode 600),
# made on first use only while the key store holds no data key, and rewritten by `rotate_kek`
# (memoryapp.kek). A missing KEK is never replaced while keys are stored: every process refuses to
# start and names the KEK ids the stored keys need (memoryapp.keyring.require_keks).
# RETIRED_KEKS: earlier KEKs that still unwrap, the one explicit fallback (rotation with
# MEMORY_KEK: the new key here, the old in RETIRED_KEKS, restart, `rotate_kek`, then drop it).
MEMORY_KEK = _kek("MEMORY_KEK", env_str("MEMORY_KEK")) if env_str("MEMORY_KEK") else ""
MEMORY_KEK_FILE = VAR_DIR / "memory_kek"
RETIRED_KEKS = [_kek("RETIRED_KEKS", value) for value in env_list("RETIRED_KEKS", [])]
# Where the KEK lives (memoryapp.kek_backends, docs/encryption.md "KEK backends"): `file` (the key
# file or MEMORY_KEK above, wrapping in this process) or `pkcs11` (key objects in a PKCS#11 token, an
# HSM or a cloud HSM: generated there, never extractable, wrap/unwrap inside it). pkcs11 needs the
# module (the vendor's .so), the token's label and its user PIN (PKCS11_PIN, or PKCS11_PIN_FILE: a
# file holding it). RETIRED_KEKS still unwrap beside the token (a migration from the key file).
KEK_BACKEND = env_backend("KEK_BACKEND", "file", BACKENDS)
PKCS11_MODULE = env_str("PKCS11_MODULE", "")
PKCS11_TOKEN_LABEL = env_str("PKCS11_TOKEN_LABEL", "")
PKCS11_PIN = env_str("PKCS11_PIN", "")
PKCS11_PIN_FILE = env_str("PKCS11_PIN_FILE", "")
PKCS11_KEY_LABEL = env_str("PKCS11_KEY_LABEL", "gam-kek")
if _names("KEK_BACKEND", "pkcs11", KEK_BACKEND):
    _unset = [
        name
        for name, value in (("PKCS11_MODULE", PKCS11_MODULE), ("PKCS11_TOKEN_LABEL", PKCS11_TOKEN_LABEL))
        if not value
    ]
    if _unset:
        raise ImproperlyConfigured(
            f'KEK_BACKEND=pkcs11 needs {" and ".join(_unset)} (docs/encryption.md, "KEK backends")'
        )
    if bool(PKCS11_PIN) == bool(PKCS11_PIN_FILE):
        raise ImproperlyConfigured(
            "KEK_BACKEND=pkcs11 needs the token's user PIN in exactly one of PKCS11_PIN and PKCS11_PIN_FILE"
        )
    if MEMORY_KEK:
        raise ImproperlyConfigured(
            "MEMORY_KEK is set but KEK_BACKEND=pkcs11 keeps the KEK in the token: to migrate, move the key to "
            "RETIRED_KEKS and run rotate_kek"
        )
    if not PKCS11_KEY_LABEL or ":" in PKCS11_KEY_LABEL:
        raise ImproperlyConfigured("PKCS11_KEY_LABEL must be a non-empty label without ':'")
# How often the key-encryption key is rotated (docs/encryption.md "Scheduled rotation"):
# a beat job checks every 10 minutes and, once the current KEK is this many hours old, makes a new
# one, re-wraps every data key under it and destroys the old one. That destruction is what closes
# an erase's residual window (`residualUntil` on every receipt): a wrapped key left behind in a dead
# row, a WAL segment, a replica or a key-store backup opens with no KEK that still exists.
# 0: off (receipts then name no instant). Only the key file rotates by itself; MEMORY_KEK and
# RETIRED_KEKS are rotated by the operator.
KEK_ROTATION_HOURS = env_int("KEK_ROTATION_HOURS", 24, minimum=0)
# PostgreSQL: VACUUM the key table after every erase that destroyed keys (retention.erasure), so the
# destroyed keys' dead tuples leave its files sooner. It shortens the window; the KEK's destruction
# (KEK_ROTATION_HOURS) bounds it. Off only to measure the difference (bench/kek_rotation.py).
KEYRING_VACUUM_AFTER_ERASE = env_bool("KEYRING_VACUUM_AFTER_ERASE", True)
# How long backups of the key store are kept (the operator's one rule, docs/operations.md "Production deployment"): a
# data key
# destroyed by an erase survives in them that long, and with it the erased memory's content in
# every database backup. 0: the keyring is not backed up (or only the moment a backup is taken).
KEYRING_BACKUP_RETENTION_DAYS = env_int("KEYRING_BACKUP_RETENTION_DAYS", 0, minimum=0)
# New rows' data keys are created and committed this many at a time (memoryapp.keyring.SpareKeys):
# one key-store commit per batch instead of one per remember. 1: one key per commit, as before.
KEYRING_SPARE_KEYS = env_int("KEYRING_SPARE_KEYS", 32, minimum=1)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis, cache, broker -------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Rate limits must be exact across processes: Redis in production, the database otherwise.
RATE_LIMIT_BACKEND = env_backend("RATE_LIMIT_BACKEND", "redis" if REDIS_URL else "database", BACKENDS)
if _names("RATE_LIMIT_BACKEND", "redis", RATE_LIMIT_BACKEND) and not REDIS_URL:
    raise ImproperlyConfigured("RATE_LIMIT_BACKEND=redis needs REDIS_URL")

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL or f"sqla+sqlite:///{VAR_DIR / 'celery-broker.sqlite3'}")
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# visibility_timeout is a Redis transport option; the SQLAlchemy transport refuses unknown options.
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {"visibility_timeout": 3600} if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else {}
)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_TIMEZONE = "UTC"
# Every periodic entry expires so that missed runs do not pile up behind a stopped worker.
CELERY_BEAT_SCHEDULE = {
    "expiry-sweep": {
        "task": "retention.tasks.expiry_sweep",
        "schedule": timedelta(minutes=5),
        "options": {"expires": 240},
    },
    "cascade-sweep": {
        "task": "retention.tasks.cascade_sweep",
        "schedule": timedelta(minutes=15),
        "options": {"expires": 600},
    },
    "grace-purge": {
        "task": "retention.tasks.grace_purge",
        "schedule": timedelta(minutes=15),
        "options": {"expires": 600},
    },
    "settle-usage": {
        "task": "credits.tasks.settle_usage",
        "schedule": timedelta(minutes=5),
        "options": {"expires": 240},
    },
    "daily-rollup": {
        "task": "credits.tasks.daily_rollup",
        "schedule": crontab(minute=10, hour="*"),
        "options": {"expires": 1800},
    },
    "quota-reset": {
        "task": "credits.tasks.quota_reset",
        "schedule": crontab(minute=0, hour="*"),
        "options": {"expires": 1800},
    },
    "reconcile-credits": {
        "task": "credits.tasks.reconcile_credits",
        "schedule": crontab(minute=30, hour="*/6"),
        "options": {"expires": 3600},
    },
    "consolidation-sweep": {
        "task": "retention.tasks.consolidation_sweep",
        "schedule": timedelta(minutes=30),
        "options": {"expires": 1500},
    },
    "access-log-sweep": {
        "task": "retention.tasks.access_log_sweep",
        "schedule": timedelta(minutes=60),
        "options": {"expires": 3000},
    },
    "receipt-chain-check": {
        "task": "retention.tasks.receipt_chain_check",
        "schedule": crontab(minute=40, hour=3),
        "options": {"expires": 3600 * 6},
    },
    "link-sweep": {"task": "retention.tasks.link_sweep", "schedule": timedelta(minutes=5), "options": {"expires": 240}},
    "wal-sweep": {"task": "retention.tasks.wal_sweep", "schedule": timedelta(minutes=5), "options": {"expires": 240}},
    "keyring-sweep": {
        "task": "retention.tasks.keyring_sweep",
        "schedule": timedelta(minutes=60),
        "options": {"expires": 3000},
    },
    # rotates only when the KEK is KEK_ROTATION_HOURS old (memoryapp.encryption.ROTATION_CHECK)
    "kek-rotation": {
        "task": "retention.tasks.kek_rotation",
        "schedule": timedelta(minutes=10),
        "options": {"expires": 540},
    },
}

# --- Auth, i18n, static ---------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("ja", _("Japanese"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = True

# --- Security -------------------------------------------------------------------------------
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG and bool(env_str("SECRET_KEY")))
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", SESSION_COOKIE_SECURE)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", SECURE_HSTS_SECONDS > 0)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", SECURE_HSTS_SECONDS >= 31536000)
if env_bool("BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# How many reverse proxies stand in front of the app: the login throttle then counts the address
# the nearest one appended to X-Forwarded-For, not the proxy's own (governance/login_throttle.py).
# Set it only when the app cannot be reached without them (otherwise the header is anyone's).
TRUSTED_PROXY_HOPS = env_int("TRUSTED_PROXY_HOPS", 0, minimum=0, maximum=5)
# Bodies over 64 KiB answer 413 (SPEC §2); Django's own limit is kept in step.
MAX_REQUEST_BODY_BYTES = 64 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BODY_BYTES

# --- REST framework -------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "governance.auth.PersonalTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["memoryapp.api.parsers.SafeJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "memoryapp.api.schema.ProductAutoSchema",
    "EXCEPTION_HANDLER": "memoryapp.api.exceptions.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Governed agent memory API",
    "DESCRIPTION": "Agent API (bearer credential) and workspace API (session or personal token).",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # A memory's `source` (every source) and a remember's (the three an agent may send) are two enums.
    "ENUM_NAME_OVERRIDES": {"MemorySourceEnum": "memoryapp.models.Source"},
}

# --- Product settings -----------------------------------------------------------------------
MEMORY_EMBEDDER = env_backend("MEMORY_EMBEDDER", "e5", BACKENDS)  # docs/decisions.md "Default embedder"
SEMANTIC_BUDGET_SECONDS = env_float("SEMANTIC_BUDGET_SECONDS", 0.8)
# OpenMP threads of one memory's e5 embedding; queries take one (memoryapp.recall.embedders, "the e5 engine's threads"):
# 2, or 1 on
# a one-core machine; 1 trades single-request latency for throughput when more busy processes
# than cores share the machine (docs/operations.md).
MEMORY_EMBEDDER_THREADS = env_int(
    "MEMORY_EMBEDDER_THREADS", min(2, len(os.sched_getaffinity(0))), minimum=1, maximum=64
)
# Query embeddings one process runs or queues at once; over it a recall answers without its
# semantic ranking (degraded "semantic") instead of queueing. 4 x a capped query's worst cost stays
# inside SEMANTIC_BUDGET_SECONDS (docs/limits.md; docs/benchmarks.md "Figures behind code choices").
MEMORY_QUERIES_IN_FLIGHT = env_int("MEMORY_QUERIES_IN_FLIGHT", 4, minimum=1, maximum=64)
BACKUP_RETENTION_DAYS = env_int("BACKUP_RETENTION_DAYS", 0, minimum=0)
# PostgreSQL WAL archiving (archive_command / a backup tool's WAL stream): how long archived WAL
# segments are kept. They hold the erased rows' bytes as long as they exist; 0 = no archiving.
WAL_ARCHIVE_RETENTION_DAYS = env_int("WAL_ARCHIVE_RETENTION_DAYS", 0, minimum=0)
ADMIN_MAY_VIEW_MEMORY_CONTENT = env_bool("ADMIN_MAY_VIEW_MEMORY_CONTENT", False)
# SPEC §4.7: 120 remembers per credential per rolling hour. Both numbers can be lowered for tests and
# demos (the client suite's rate-limit instance waits out a window of a few seconds for real);
# production keeps the SPEC's values.
AGENT_REMEMBERS_PER_HOUR = env_int("AGENT_REMEMBERS_PER_HOUR", 120, minimum=1)
RATE_LIMIT_WINDOW_SECONDS = env_int("RATE_LIMIT_WINDOW_SECONDS", 3600, minimum=1, maximum=86400)
# SPEC §4.7: reads (recall and list, REST and MCP) per credential per rolling hour, a budget of
# their own: generous (one every 3 s, sustained for an hour) so that no honest agent meets it.
MEMORY_READS_PER_HOUR = env_int("MEMORY_READS_PER_HOUR", 1200, minimum=1)
# Conversation turns per credential per rolling hour (a budget of its own; docs/limits.md).
AGENT_TURNS_PER_HOUR = env_int("AGENT_TURNS_PER_HOUR", 60, minimum=1)
MAX_VERSIONS_PER_MEMBER = env_int("MAX_VERSIONS_PER_MEMBER", 5000, minimum=1)
# Knowledge writes (collections, documents and their versions, entities; creating and deleting)
# per member per rolling window (429 AGENT_MEMORY_RATE_LIMITED, details.operation "knowledge").
KNOWLEDGE_WRITES_PER_HOUR = env_int("KNOWLEDGE_WRITES_PER_HOUR", 600, minimum=1)
# A workspace's passages in all, in characters after NFKC (U+FDFA is 18): what every new entity
# scans and every document's linking matches (409 PASSAGE_VOLUME_LIMIT_REACHED past it).
MAX_PASSAGE_CHARS_PER_WORKSPACE = env_int("MAX_PASSAGE_CHARS_PER_WORKSPACE", 5_000_000, minimum=1)
# Entity links computed in the request after the write commits, in normalised characters to
# scan; above it the linking is a Celery task ("pending" until it has run; docs/limits.md).
ENTITY_LINK_INLINE_CHARS = env_int("ENTITY_LINK_INLINE_CHARS", 200_000, minimum=0)
# Knowledge entities per workspace and their names plus aliases in all (409 ENTITY_LIMIT_REACHED
# past either), and the surface forms each process keeps in its cached entity matchers (docs/limits.md,
# bench/entity_recall.py).
MAX_ENTITIES_PER_WORKSPACE = env_int("MAX_ENTITIES_PER_WORKSPACE", 2000, minimum=1, maximum=100_000)
MAX_ENTITY_FORMS_PER_WORKSPACE = env_int("MAX_ENTITY_FORMS_PER_WORKSPACE", 20_000, minimum=1, maximum=1_000_000)
ENTITY_MATCHER_CACHE_FORMS = env_int("ENTITY_MATCHER_CACHE_FORMS", 500_000, minimum=1)
# Usable (unrevoked, unexpired) agent credentials per member: each has its own remember and read
# budgets, so an unbounded number would multiply them (409 CREDENTIAL_LIMIT_REACHED past it).
MAX_CREDENTIALS_PER_MEMBER = env_int("MAX_CREDENTIALS_PER_MEMBER", 50, minimum=1, maximum=10_000)
# SPEC §8.1: how long an access entry (which agent read which memory ids) is kept.
ACCESS_LOG_RETENTION_DAYS = env_int("ACCESS_LOG_RETENTION_DAYS", 90, minimum=1, maximum=3650)
MCP_ALLOWED_HOSTS = env_list("MCP_ALLOWED_HOSTS", ["127.0.0.1:*", "localhost:*", "[::1]:*"])
SYSTEM_MODEL = env_backend("SYSTEM_MODEL", "offline", BACKENDS)
SYSTEM_MODEL_URL = env_str("SYSTEM_MODEL_URL", "")
SYSTEM_MODEL_NAME = env_str("SYSTEM_MODEL_NAME", "offline-rules-v1")
SYSTEM_MODEL_API_KEY = env_str("SYSTEM_MODEL_API_KEY", "")
SYSTEM_MODEL_TIMEOUT_SECONDS = env_float("SYSTEM_MODEL_TIMEOUT_SECONDS", 20.0)

# --- Operations (SPEC §11, docs/operations.md) -------------------------------------------------
# /metrics answers only with `Authorization: Bearer <METRICS_TOKEN>`; unset, it answers 404.
METRICS_TOKEN = env_str("METRICS_TOKEN", "") or ""
if METRICS_TOKEN and len(METRICS_TOKEN) < 16:
    raise ImproperlyConfigured("METRICS_TOKEN must be at least 16 characters long")
# Multiprocess metrics: every process writes its samples under this directory, which the run
# command (or the deployment) wipes once before starting them. prometheus_client reads the
# variable itself when it is imported, so it is taken from the environment, never set here.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", "") or ""
if PROMETHEUS_MULTIPROC_DIR:
    Path(PROMETHEUS_MULTIPROC_DIR).mkdir(parents=True, exist_ok=True)

LOG_LEVEL = env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
# json (default): one JSON object per line (core.logs); plain: the same records as text.
LOG_FORMAT = env_choice("LOG_FORMAT", "json", ("json", "plain"))
# Celery workers and beat use this configuration too (config.celery's setup_logging receiver).
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_context": {"()": "core.logs.RequestContextFilter"}},
    "formatters": {
        "json": {
            "()": "core.logs.JsonFormatter",
            "format": "%(levelname)s %(name)s %(message)s",
            "rename_fields": {"levelname": "level", "name": "logger"},
            "timestamp": True,
        },
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["request_context"]}
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # Request bodies may hold personal data before masking: never log them. 4xx warnings
        # name the raw path; the request line says the same by route name.
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
        # SQL parameters are memory text: never logged, whatever LOG_LEVEL and DEBUG say.
        "django.db.backends": {"level": "INFO"},
        # Celery's trace lines quote task return values and exception messages: the task line
        # (memoryapp.task) reports every run by name, id, duration and outcome instead.
        "celery.app.trace": {"level": "CRITICAL"},
        # uvicorn's access log names raw paths and query strings: the request line replaces it.
        "uvicorn": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False},
        "uvicorn.access": {"handlers": [], "level": "CRITICAL", "propagate": False},
    },
}
