"""Settings of the example host project. Every value can come from the environment."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from memory_engine.api.schema import SCHEMA_SETTINGS

from .database import default_database
from .secret_key import checkout_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).lower() in ("1", "true", "yes", "on")


DEBUG = env_bool("DJANGO_DEBUG", True)
# Signed converter/download URLs and the key sealing stored PDF passwords derive from it.
# With DEBUG off it must come from the environment (memory_engine.E006 also refuses known
# defaults); `make run` (DEBUG on) uses a key generated for this checkout.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("Set DJANGO_SECRET_KEY to a long random value (DEBUG is off).")
    SECRET_KEY = checkout_secret_key(BASE_DIR / ".secret_key")
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's assets, served as static files (no CDN)
    "django_q",
    "memory_engine",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Under /api/: 413 for oversized bodies before anything reads them, JSON bodies for
    # Django's own error pages (docs/security.md).
    "memory_engine.api.limits.ApiGuardMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"
WSGI_APPLICATION = "example_project.wsgi.application"

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

DATABASES = {"default": default_database(BASE_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
# Timestamps read "2026-12-06 03:48" in the admin (example_project/formats/en/formats.py).
FORMAT_MODULE_PATH = ["example_project.formats"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
MEDIA_URL = "media/"
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", BASE_DIR / "media"))

# Requests larger than this are refused before parsing (uploads stream to disk).
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("DATA_UPLOAD_MAX_MEMORY_SIZE", 10 * 1024 * 1024))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "memory_engine.api.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["memory_engine.api.permissions.ProjectAccess"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "memory_engine.api.pagination.PageNumberPagination",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "EXCEPTION_HANDLER": "memory_engine.api.exceptions.exception_handler",
    "PAGE_SIZE": 50,
    "DEFAULT_THROTTLE_CLASSES": [
        "memory_engine.api.throttling.ProjectRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {"project": os.environ.get("MEMORY_ENGINE_RATE", "6000/min")},
}

# The served /api/schema/ uses the app's own settings whatever this says; reusing them here
# makes `manage.py spectacular` (make check) print the same schema.
SPECTACULAR_SETTINGS = {
    **SCHEMA_SETTINGS,
    "SERVE_INCLUDE_SCHEMA": False,
    # /api/docs/ loads Swagger UI from this server's static files: it works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

Q_CLUSTER = {
    "name": "memory_engine",
    "orm": "default",
    "workers": int(os.environ.get("Q_WORKERS", "2")),
    "timeout": 600,
    "retry": 900,
    "max_attempts": 1,
    "catch_up": False,
    "ack_failures": True,
    "poll": 0.2,
    "save_limit": 1000,
}

MEMORY_ENGINE: dict[str, Any] = {
    # Reverse proxies in front of the app that append to X-Forwarded-For (0: none; the header
    # is then ignored and the failed-auth throttle counts REMOTE_ADDR).
    "NUM_PROXIES": int(os.environ.get("MEMORY_ENGINE_NUM_PROXIES", "0")),
    "EMBEDDING": {
        "PROVIDER": os.environ.get("MEMORY_ENGINE_EMBEDDING_PROVIDER", "onnx") or None,
        "MODEL": os.environ.get("MEMORY_ENGINE_EMBEDDING_MODEL", "all-MiniLM-L6-v2"),
        # Unset: the model's default (384); memory_engine.conf reads the string as an integer.
        "DIMENSIONS": os.environ.get("MEMORY_ENGINE_EMBEDDING_DIMENSIONS") or None,
        # Unset: halfvec. The vector columns' type on a new installation (docs/embeddings.md).
        "STORAGE": os.environ.get("MEMORY_ENGINE_EMBEDDING_STORAGE") or None,
        "OPTIONS": {"BASE_URL": os.environ.get("MEMORY_ENGINE_EMBEDDING_BASE_URL", "")},
    },
    "LLM": (
        {
            "BASE_URL": os.environ["MEMORY_ENGINE_LLM_BASE_URL"],
            "API_KEY": os.environ.get("MEMORY_ENGINE_LLM_API_KEY", ""),
            "MODEL": os.environ.get("MEMORY_ENGINE_LLM_MODEL", ""),
        }
        if os.environ.get("MEMORY_ENGINE_LLM_BASE_URL")
        else None
    ),
}
# Private hosts or networks that rule handlers and converters may call (comma-separated, e.g.
# "converter.internal,10.0.0.0/8"); public addresses need no entry (docs/security.md).
MEMORY_ENGINE["OUTBOUND_ALLOW"] = [
    entry.strip() for entry in os.environ.get("MEMORY_ENGINE_OUTBOUND_ALLOW", "").split(",") if entry.strip()
]
if os.environ.get("MEMORY_ENGINE_EMBEDDING_PROVIDER", "onnx") == "none":
    MEMORY_ENGINE["EMBEDDING"]["PROVIDER"] = None

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "memory_engine": {"handlers": ["console"], "level": os.environ.get("MEMORY_ENGINE_LOG_LEVEL", "INFO")},
    },
}
