"""AgentLoom settings: the one settings module, fed from the environment.

Every variable is listed in the README. Nothing exists only in production: tests,
`make run` and docker-compose all load this module; `settings_test` only supplies
throw-away secrets before importing it.
"""
from __future__ import annotations

import os
from pathlib import Path

from agentloom.logging_config import logging_config
from core.db_pool import pool_options
from core.env import (
    ConfigError,
    database_from_url,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_rate,
    env_str,
    redis_url_checked,
)
from models_catalog.private_hosts import private_endpoints_from_env
from toolservers.config import ServersFileError, servers_read

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("AGENTLOOM_VAR_DIR", str(BASE_DIR / "var")))


def _load_local_env(path: Path) -> None:
    """Read `var/local.env` (written by `make run`) without overriding the environment."""
    if not path.is_file():
        return
    for line in path.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            os.environ.setdefault(key.strip(), value.strip())


_load_local_env(VAR_DIR / "local.env")

DEBUG = env_bool("DEBUG", False)

SECRET_KEY = env_str("SECRET_KEY", "")  # empty when unset: refused below unless DEBUG
ENCRYPTION_KEY = env_str("AGENTLOOM_ENCRYPTION_KEY", "")
if not DEBUG:
    # Production mode: both secrets are mandatory. The encryption library signs with
    # SECRET_KEY as well as encrypting with AGENTLOOM_ENCRYPTION_KEY, so losing or
    # changing either makes every stored record unreadable (see `rotate_keys`).
    if not SECRET_KEY:
        raise ConfigError("SECRET_KEY", "is required when DEBUG is off")
    if not ENCRYPTION_KEY:
        raise ConfigError("AGENTLOOM_ENCRYPTION_KEY", "is required when DEBUG is off")
else:
    SECRET_KEY = SECRET_KEY or "insecure-debug-only-secret-key"
    ENCRYPTION_KEY = ENCRYPTION_KEY or "insecure-debug-only-encryption-key"
if ENCRYPTION_KEY == SECRET_KEY:
    raise ConfigError("AGENTLOOM_ENCRYPTION_KEY", "must differ from SECRET_KEY")
CRYPTOGRAPHY_KEY = ENCRYPTION_KEY

PORT = env_int("PORT", 8000, minimum=1, maximum=65535)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
HTTPS = env_bool("AGENTLOOM_HTTPS", False)
# Reverse proxies whose X-Forwarded-For names the client (addresses or CIDR networks).
# Empty by default: the peer of the TCP connection is the client, so nobody can pick
# their own address — and their own rate-limit bucket — by sending the header.
AGENTLOOM_TRUSTED_PROXIES = env_networks("AGENTLOOM_TRUSTED_PROXIES")
# Failed logins allowed per client address and per username in a window, counted over the
# chat's /login/, the console's /admin/login/ and the API's token endpoint together
# (core/accounts/login_limit.py): (failures, seconds).
AGENTLOOM_LOGIN_LIMIT = env_rate("AGENTLOOM_LOGIN_RATE", "10/min")

DATABASES = {
    "default": database_from_url(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'agentloom.sqlite3'}")
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Bounded connections on PostgreSQL (core/db_pool.py, docs/operations.md): each web
# process borrows from a pool of at most AGENTLOOM_DB_POOL_MAX, each worker from one of
# two per thread (or AGENTLOOM_WORKER_DB_POOL_MAX). A request that waits longer than
# AGENTLOOM_DB_POOL_TIMEOUT for one is answered 503 with Retry-After; a worker waits longer.
AGENTLOOM_DB_POOL = env_bool("AGENTLOOM_DB_POOL", True)
AGENTLOOM_DB_POOL_MAX = env_int("AGENTLOOM_DB_POOL_MAX", 20, minimum=1, maximum=1000)
AGENTLOOM_DB_POOL_MIN = env_int("AGENTLOOM_DB_POOL_MIN", 8, minimum=1, maximum=1000)  # kept open, opened at start
AGENTLOOM_DB_POOL_TIMEOUT = env_float("AGENTLOOM_DB_POOL_TIMEOUT", 5.0, minimum=0.05)
AGENTLOOM_WORKER_DB_POOL_MAX = env_int("AGENTLOOM_WORKER_DB_POOL_MAX", 0, minimum=0, maximum=1000)  # 0: by threads
AGENTLOOM_WORKER_DB_POOL_TIMEOUT = env_float("AGENTLOOM_WORKER_DB_POOL_TIMEOUT", 60.0, minimum=0.05)
# Requests one web process lets wait for their answer at once; the next is refused at
# once with 503 and Retry-After (agentloom/admission.py). 0: no bound.
AGENTLOOM_WEB_MAX_PENDING = env_int("AGENTLOOM_WEB_MAX_PENDING", 64, minimum=0, maximum=100_000)
# Slow and greedy clients (issue #44, docs/operations.md "Slow and greedy clients"): a
# request's headers must be complete this long after its first byte (agentloom/http_protocol.py);
# its body may pause this long between two pieces and take this long in all
# (agentloom/request_body.py); one client address holds at most this many connections, and
# requests at the door (agentloom/admission.py). 0: no per-client bound.
AGENTLOOM_WEB_HEADER_TIMEOUT = env_float("AGENTLOOM_WEB_HEADER_TIMEOUT", 10.0, minimum=0.1)
AGENTLOOM_WEB_BODY_IDLE_TIMEOUT = env_float("AGENTLOOM_WEB_BODY_IDLE_TIMEOUT", 20.0, minimum=0.1)
AGENTLOOM_WEB_BODY_TIMEOUT = env_float("AGENTLOOM_WEB_BODY_TIMEOUT", 300.0, minimum=0.1)
AGENTLOOM_WEB_MAX_CONNECTIONS_PER_CLIENT = env_int("AGENTLOOM_WEB_MAX_CONNECTIONS_PER_CLIENT", 32, minimum=0,
                                                   maximum=100_000)
# PgBouncer in transaction mode hands each transaction any server connection: a named
# (server-side) cursor would not survive its transaction there (docs/operations.md).
AGENTLOOM_DB_TRANSACTION_POOLER = env_bool("AGENTLOOM_DB_TRANSACTION_POOLER", False)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Named, so pg_stat_activity tells web from worker connections (a worker renames its own).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("application_name", "agentloom-web")
    if AGENTLOOM_DB_POOL:
        DATABASES["default"]["OPTIONS"]["pool"] = pool_options(
            max_size=AGENTLOOM_DB_POOL_MAX, min_size=AGENTLOOM_DB_POOL_MIN, timeout=AGENTLOOM_DB_POOL_TIMEOUT,
            name="web")
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = AGENTLOOM_DB_TRANSACTION_POOLER
    # Parameters travel apart from the SQL (the extended protocol) instead of being quoted
    # into it in Python: an encrypted record or event is bytes, and hex-quoting it cost the
    # worker a tenth of its CPU, and PostgreSQL the parsing of it (issue #29). A statement
    # run a few times on one connection is then prepared, planned once, but not through a
    # transaction pooler, which would hand the next transaction a server without it.
    DATABASES["default"]["OPTIONS"].setdefault("server_side_binding", True)
    DATABASES["default"]["OPTIONS"].setdefault("prepare_threshold", None if AGENTLOOM_DB_TRANSACTION_POOLER else 5)
    # Django's backend with its batches kept under server-side binding's 65,535 parameters.
    DATABASES["default"]["ENGINE"] = "core.db.postgresql"

REDIS_URL = redis_url_checked("REDIS_URL")

ALLOW_PRIVATE_MODEL_ENDPOINTS = private_endpoints_from_env()

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework", "drf_spectacular", "drf_spectacular_sidecar",
    "agentloom",
    "core.accounts",
    "core.spaces",
    "agents",
    "toolservers",
    "models_catalog",
    "sessions.apps.SessionsConfig",
    "memory",
    "runloop",
    "web",
]

MIDDLEWARE = [
    "core.db_pool.GiveBackMiddleware",  # first in, last out: after the session is saved
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "web.security.ConsoleMiddleware",  # the console's CSP and id-bounded list filters
    "web.security.NulRefusedMiddleware",  # a NUL in a query string or console form: 400
]

ROOT_URLCONF = "agentloom.urls"
WSGI_APPLICATION = "agentloom.wsgi.application"
ASGI_APPLICATION = "agentloom.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "/admin/login/"

# Bounded request sizes (SPEC §11): a question or a tool result pasted by a user is
# text; 2 MB is generous for text and small enough to refuse abuse early.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("AGENTLOOM_MAX_REQUEST_BYTES", 2 * 1024 * 1024, minimum=1024)
# Attachments (RUN-13). Only the upload endpoint takes a file past the request bound above
# (core/api/uploads.py); every other multipart body counts its file parts against it.
AGENTLOOM_FILE_MAX_BYTES = env_int("AGENTLOOM_FILE_MAX_BYTES", 10 * 1024 * 1024, minimum=1024)
AGENTLOOM_SESSION_FILES_MAX_BYTES = env_int("AGENTLOOM_SESSION_FILES_MAX_BYTES", 50 * 1024 * 1024, minimum=1024)
# What one person may hold and start (sessions/services/people.py): their files across every
# session (413 user_files_full past it), the sessions they start in 24 hours — chat, API and
# imports alike (429 sessions_per_day with Retry-After).
AGENTLOOM_USER_FILES_MAX_BYTES = env_int("AGENTLOOM_USER_FILES_MAX_BYTES", 1024 * 1024 * 1024, minimum=1024)
AGENTLOOM_SESSIONS_PER_DAY = env_int("AGENTLOOM_SESSIONS_PER_DAY", 500, minimum=1, maximum=1_000_000)
# Anthropic's 5 MB per image bounds the base64 text sent, 4/3 of the bytes: 3,750,000 bytes
# are 5,000,000 characters, under that bound (OpenAI's is larger).
AGENTLOOM_IMAGE_MAX_BYTES = env_int("AGENTLOOM_IMAGE_MAX_BYTES", 3_750_000, minimum=1024)
# An image's size once decoded (width × height × bytes a pixel), read from its header and
# refused past this before anything is decoded (core/images.py): 413 image_too_large.
AGENTLOOM_IMAGE_MAX_DECODED_BYTES = env_int("AGENTLOOM_IMAGE_MAX_DECODED_BYTES", 128 * 1024 * 1024,
                                            minimum=1024 * 1024, maximum=8000 * 6000 * 4)
AGENTLOOM_PDF_MAX_PAGES = env_int("AGENTLOOM_PDF_MAX_PAGES", 200, minimum=1, maximum=100_000)
AGENTLOOM_PDF_MAX_SECONDS = env_int("AGENTLOOM_PDF_MAX_SECONDS", 20, minimum=1, maximum=600)
# Slow work inside a request (core/slow_work.py): a file read in a child process, a
# remote server probed, an import. At most *_MAX of a kind at once in one web process (503
# busy past it) and *_PER_PERSON of one person's (429 too_many_at_once past it), each with
# Retry-After; none holds a database connection while it waits.
AGENTLOOM_EXTRACTIONS_MAX = env_int("AGENTLOOM_EXTRACTIONS_MAX", 4, minimum=1, maximum=1000)
AGENTLOOM_EXTRACTIONS_PER_PERSON = env_int("AGENTLOOM_EXTRACTIONS_PER_PERSON", 2, minimum=1, maximum=1000)
AGENTLOOM_PROBES_MAX = env_int("AGENTLOOM_PROBES_MAX", 8, minimum=1, maximum=1000)
AGENTLOOM_PROBES_PER_PERSON = env_int("AGENTLOOM_PROBES_PER_PERSON", 2, minimum=1, maximum=1000)
AGENTLOOM_IMPORTS_MAX = env_int("AGENTLOOM_IMPORTS_MAX", 2, minimum=1, maximum=1000)
AGENTLOOM_IMPORTS_PER_PERSON = env_int("AGENTLOOM_IMPORTS_PER_PERSON", 1, minimum=1, maximum=1000)
FILE_UPLOAD_HANDLERS = [
    "core.api.uploads.BoundedUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]

SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SESSION_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
if HTTPS:
    # Behind TLS (usually a reverse proxy): redirect plain HTTP, except the health probe
    # that orchestrators send inside the network; HSTS for a year. `manage.py check
    # --deploy` is clean in this mode (a test checks it).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SECURE_HSTS_SECONDS = 31_536_000
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("AGENTLOOM_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("AGENTLOOM_HSTS_PRELOAD", True)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "core.accounts.authentication.ApiTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "core.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.api.errors.exception_handler",
    # Throttles key on core.api.clients.client_address; any DRF throttle that still
    # calls its own get_ident uses the peer address, never the header.
    "NUM_PROXIES": 0,
    "DEFAULT_THROTTLE_RATES": {
        "ask": env_str("AGENTLOOM_ASK_RATE", "30/min"),
        "supplement": env_str("AGENTLOOM_SUPPLEMENT_RATE", "20/min"),
        "upload": env_str("AGENTLOOM_UPLOAD_RATE", "30/min"),
        "import": env_str("AGENTLOOM_IMPORT_RATE", "60/hour"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "AgentLoom API",
    "DESCRIPTION": "Agents over long, interrupted, tool-heavy conversations.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from our own static files, never a CDN: the docs page runs under the
    # app's Content-Security-Policy (script-src 'self').
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Two "kind" fields with choices (a tool server's, a record's): name each enum.
    "ENUM_NAME_OVERRIDES": {"ToolServerKindEnum": "toolservers.models.ToolServer.Kind"},
}

# Celery: Redis when REDIS_URL is set; otherwise kombu's filesystem transport, so the
# embedded default still runs a real worker process with no server to install.
BROKER_DIR = VAR_DIR / "broker"
# A running run without a heartbeat for this long is taken for orphaned: the reaper marks
# it interrupted (resumable). Runs and workers beat four times per interval (at most every
# 5 s) and the reaper looks as often, so a crash is recovered within this plus one beat
# (docs/operations.md). Tests use a few seconds.
AGENTLOOM_HEARTBEAT_STALE_SECONDS = env_int("AGENTLOOM_HEARTBEAT_STALE_SECONDS", 120, minimum=2)
AGENTLOOM_MEMORY_MAX_CHARS = env_int("AGENTLOOM_MEMORY_MAX_CHARS", 8000, minimum=500)  # MEM-1, per person and agent
# TOOL-8: a call that waits for a person's approval is denied ("expired") after this many
# hours; the run then goes on without it. The workers' sweep looks on every beat.
AGENTLOOM_APPROVAL_HOURS = env_int("AGENTLOOM_APPROVAL_HOURS", 24, minimum=1)
# For this long after a web process starts, a /healthz 503 because no worker has written a
# heartbeat yet is expected (workers start beside it) and logged at INFO, not ERROR.
AGENTLOOM_WARMUP_SECONDS = env_float("AGENTLOOM_WARMUP_SECONDS", 120.0, minimum=0.0)
# TOOL-10: how long a tool call waits for the person's answer when its server asks during
# the call (MCP elicitation); past it the server is answered "cancel". The run's worker
# thread waits with the call (docs/tool-servers.md says why), so this is bounded.
AGENTLOOM_INPUT_WAIT_SECONDS = env_int("AGENTLOOM_INPUT_WAIT_SECONDS", 900, minimum=1)
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    # kombu's Redis transport keeping one client per channel (core/broker.py, issue #29).
    CELERY_BROKER_TRANSPORT = "core.broker:Transport"
    if REDIS_URL.startswith("rediss://"):
        # Named by the URL's scheme, kombu would turn TLS on itself, without checking the
        # server's certificate; named by class, it is told: checked, as every other Redis
        # client of the platform (redis-py's default for rediss://) checks it.
        import ssl

        CELERY_BROKER_USE_SSL = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    # With acks_late, a task whose worker died before acknowledging it is delivered again
    # once it has been unacknowledged this long; the sweep that does it runs every beat.
    # A second delivery only claims a run that is still queued, so delivering a working or
    # reaped run's task again does nothing (RUN-6: no finished tool runs twice).
    CELERY_BROKER_TRANSPORT_OPTIONS: dict = {
        "visibility_timeout": 2 * AGENTLOOM_HEARTBEAT_STALE_SECONDS,
        "unacked_restore_interval": min(5.0, AGENTLOOM_HEARTBEAT_STALE_SECONDS / 4),  # the beat period
        "unacked_restore_throttle": 1,
    }
else:
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("AGENTLOOM_TASKS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

LOGGING = logging_config(level=env_str("LOG_LEVEL", "INFO"))

# Tool servers (SPEC §7a). The operator's local MCP servers, started by the workers over
# stdio, come from the JSON file this names (TOOL-2, docs/tool-servers.md); read once here
# so a bad file stops start-up with one line.
AGENTLOOM_MCP_SERVERS = env_str("AGENTLOOM_MCP_SERVERS")
try:
    MCP_OPERATOR_SERVERS = servers_read(AGENTLOOM_MCP_SERVERS)
except ServersFileError as exc:
    raise ConfigError("AGENTLOOM_MCP_SERVERS", f"({AGENTLOOM_MCP_SERVERS}) {exc}") from None

# The run loop (SPEC §7).
AGENTLOOM_PROVIDER_ATTEMPTS = env_int("AGENTLOOM_PROVIDER_ATTEMPTS", 4, minimum=1, maximum=10)
AGENTLOOM_RETRY_BASE_DELAY = env_float("AGENTLOOM_RETRY_BASE_DELAY", 1.0)
# LOOP-3: the longest ``Retry-After`` waited out in place, holding a worker thread; a longer
# one, up to MAX_WAIT, sends the run back to the queue until then (``Run.not_before``).
AGENTLOOM_PROVIDER_RETRY_MAX_DELAY = env_float("AGENTLOOM_PROVIDER_RETRY_MAX_DELAY", 30.0)
AGENTLOOM_PROVIDER_MAX_WAIT = env_float("AGENTLOOM_PROVIDER_MAX_WAIT", 600.0)
# Longest silence between two bytes of a model answer before the call counts as timed out
# (then retried, LOOP-3). A stream may pause while the model thinks; tests shorten it.
AGENTLOOM_PROVIDER_READ_TIMEOUT = env_float("AGENTLOOM_PROVIDER_READ_TIMEOUT", 120.0, minimum=0.1)
# Seconds between two words of the offline demo model's answers: a person can press Stop
# while it streams (about four seconds for a usual answer). Tests set 0.
AGENTLOOM_DEMO_WORD_SECONDS_DEFAULT = 0.08
AGENTLOOM_DEMO_WORD_SECONDS = env_float("AGENTLOOM_DEMO_WORD_SECONDS", AGENTLOOM_DEMO_WORD_SECONDS_DEFAULT)
# CTX-45: a summary being prepared in the background whose worker has not been heard of
# for this long (it renews the lease before each summary call) went away with its worker:
# the next request for one, or the trigger, ends it and goes on without it.
AGENTLOOM_PREPARATION_LEASE_SECONDS = env_float("AGENTLOOM_PREPARATION_LEASE_SECONDS",
                                                AGENTLOOM_PROVIDER_READ_TIMEOUT * 2 + 60, minimum=0.1)

# `make run`'s supervisor: a worker that dies is started again after this many seconds,
# doubling after each fast crash (at most 30 s); it gives up after five in a row.
AGENTLOOM_WORKER_RESTART_DELAY = env_float("AGENTLOOM_WORKER_RESTART_DELAY", 1.0, minimum=0.05)
# For fault tests only: a worker that exits with status 3 as soon as it starts, so the
# supervisor's back-off and give-up can be exercised. Never set it anywhere else.
AGENTLOOM_FAULT_WORKER_EXIT_AT_START = env_bool("AGENTLOOM_FAULT_WORKER_EXIT_AT_START", False)
# API tokens expire this many days after they are issued (a new login issues a new one).
AGENTLOOM_TOKEN_DAYS = env_int("AGENTLOOM_TOKEN_DAYS", 30, minimum=1, maximum=3650)
# Event streams (SSE) one person may have open at once in one web process; 429 beyond.
# A chat tab holds one while a run works; the cap bounds what one account can pin open.
AGENTLOOM_MAX_STREAMS_PER_USER = env_int("AGENTLOOM_MAX_STREAMS_PER_USER", 8, minimum=1, maximum=1000)
# Finished runs' chat HTML kept in each web process's memory (web/rendered_runs.py):
# a page of them is not rendered from the records again. 0 keeps none.
AGENTLOOM_RUN_HTML_CACHE_BYTES = env_int("AGENTLOOM_RUN_HTML_CACHE_BYTES", 64 * 1024 * 1024, minimum=0)
# Chat pages and run fragments one person may have rendering at once in one web process
# (core/slow_work.py): 429 beyond, with Retry-After; the chat's script tries again.
AGENTLOOM_RENDERS_PER_PERSON = env_int("AGENTLOOM_RENDERS_PER_PERSON", 4, minimum=1, maximum=1000)
# Runs one person may have running at once, across every worker and machine: a further
# question (in another session) is accepted and waits queued, saying so in the chat, until
# one of them ends, so no account holds every worker thread (issue #44). 0: no bound.
AGENTLOOM_MAX_RUNNING_RUNS_PER_USER = env_int("AGENTLOOM_MAX_RUNNING_RUNS_PER_USER", 3, minimum=0, maximum=100_000)
# The same for all the people of one space together (0, the default: no bound): for
# deployments whose spaces are tenants that must not take each other's threads.
AGENTLOOM_MAX_RUNNING_RUNS_PER_SPACE = env_int("AGENTLOOM_MAX_RUNNING_RUNS_PER_SPACE", 0, minimum=0, maximum=100_000)
