"""How the web process and the workers log: one plain console format, Django's and
uvicorn's own formats for their lines, and the secrets filter (LOOP-8) on every handler.
``settings.LOGGING`` is what ``logging_config`` returns; a Celery worker puts the same
filter on the handlers it makes itself (agentloom/celery.py).
"""
from __future__ import annotations

from typing import Any


def logging_config(*, level: str | None) -> dict[str, Any]:
    """The ``logging.config.dictConfig`` of this installation, the root logger at ``level``."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
                       "django.server": {"()": "django.utils.log.ServerFormatter",
                                         "format": "[{server_time}] {message}", "style": "{"},
                       "uvicorn": {"()": "uvicorn.logging.DefaultFormatter", "fmt": "%(levelprefix)s %(message)s",
                                   "use_colors": None}},
        # LOOP-8: a record's message, arguments and traceback lose the secrets of the runs this
        # process executes, on every handler (a Celery worker's own handlers get it too:
        # agentloom/celery.py).
        "filters": {"secrets": {"()": "core.log_redaction.SecretsFilter"},
                    "require_debug_false": {"()": "django.utils.log.RequireDebugFalse"}},
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["secrets"]},
            # Django's own two and uvicorn's (the web server's, set up before it loads Django),
            # which would otherwise stay without the filter.
            "mail_admins": {"level": "ERROR", "class": "django.utils.log.AdminEmailHandler",
                            "filters": ["require_debug_false", "secrets"]},
            "django.server": {"class": "logging.StreamHandler", "formatter": "django.server", "filters": ["secrets"]},
            "uvicorn": {"class": "logging.StreamHandler", "formatter": "uvicorn", "stream": "ext://sys.stderr",
                        "filters": ["secrets"]},
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # Django's and uvicorn's loggers get their handlers as above; "django" has no console
            # of its own (its records reach the filtered one above, where Django's own wrote each
            # line a second time, unfiltered, with DEBUG on).
            "django": {"handlers": ["mail_admins"], "level": "INFO"},
            "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
            "uvicorn": {"handlers": ["uvicorn"], "level": "INFO", "propagate": False},
            # Its access lines go to the same handler: uvicorn's own access formatter reads the
            # record's arguments, which the filter replaces with the redacted message.
            "uvicorn.access": {"level": "INFO", "propagate": True},
            "django.db.backends": {"level": "WARNING"},
            # httpx (discovery, the chat client, http_fetch) and the MCP SDK's HTTP client log every
            # request's URL at INFO: noise here, and a URL may carry what an admin typed into it
            # (`https://host/v1?key=sk-…`). httpcore's DEBUG lines (LOG_LEVEL=DEBUG) name no URL.
            # Whatever still logs a URL loses its user name, password and query values to the
            # secrets filter (log_redaction.url_credentials_scrub).
            "httpx": {"level": "WARNING"},
            "httpx2": {"level": "WARNING"}, "httpcore2": {"level": "WARNING"}, "mcp": {"level": "WARNING"},
        },
    }
