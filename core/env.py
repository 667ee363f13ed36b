"""Small typed helpers that read settings from the environment.

Every setting AgentLoom takes comes through here, so a bad value stops start-up with one
line that names the variable instead of a stack trace deep inside Django.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, overload
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from dj_database_url import DBConfig

__all__ = [
    "ConfigError",
    "env_bool",
    "env_float",
    "env_int",
    "env_list",
    "env_networks",
    "env_rate",
    "env_str",
    "database_from_url",
    "redis_url_checked",
]


class ConfigError(SystemExit):
    """A configuration problem found at start-up.

    It derives from ``SystemExit`` on purpose: Python prints the message alone (no
    traceback) and exits non-zero, whichever entry point loaded the settings
    (manage.py, uvicorn, celery).
    """

    def __init__(self, variable: str, problem: str) -> None:
        self.variable = variable
        super().__init__(f"AgentLoom configuration error: {variable} {problem}")


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@overload
def env_str(name: str, default: str) -> str: ...
@overload
def env_str(name: str, default: None = None) -> str | None: ...
def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip()


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(name, f"must be true or false, got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(name, f"must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum or maximum is not None and value > maximum:
        raise ConfigError(name, f"must be between {minimum} and {maximum}, got {value}")
    return value


def env_float(name: str, default: float, *, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigError(name, f"must be a number, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(name, f"must be at least {minimum}, got {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_networks(name: str) -> list[str]:
    """Comma-separated IP addresses or CIDR networks (``10.0.0.0/8,::1``), checked at start-up."""
    import ipaddress

    items = env_list(name, [])
    for item in items:
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise ConfigError(name, f"must list IP addresses or networks, got {item!r}") from None
    return items


_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def env_rate(name: str, default: str) -> tuple[int, int]:
    """A rate as DRF writes one (``10/min``, ``5/s``, ``100/hour``, ``1000/day``): (count, seconds)."""
    raw = os.environ.get(name)
    text = default if raw is None or raw.strip() == "" else raw.strip()
    count, _, period = text.partition("/")
    seconds = _PERIODS.get(period.strip()[:1].lower())
    if not count.strip().isascii() or not count.strip().isdigit() or int(count) < 1 or seconds is None:
        raise ConfigError(name, f"must be a rate such as 10/min (a count of at least 1 per s, min, hour or day), "
                                f"got {text!r}")
    return int(count), seconds


_DB_SCHEMES = {"sqlite", "postgres", "postgresql", "pgsql"}


def database_from_url(url: str, *, variable: str = "DATABASE_URL") -> DBConfig:
    """Turn ``DATABASE_URL`` into Django's DATABASES entry (SQLite or PostgreSQL only)."""
    import dj_database_url

    scheme = urlsplit(url).scheme.lower()
    if scheme not in _DB_SCHEMES:
        raise ConfigError(
            variable, f"has unsupported scheme {scheme or '(none)'!r}; use sqlite:/// or postgres://"
        )
    try:
        config = dj_database_url.parse(url, conn_max_age=0)
    except ValueError as exc:
        raise ConfigError(variable, f"cannot be parsed ({exc})") from None
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # IMMEDIATE takes the write lock at BEGIN, so concurrent appenders queue up
        # instead of failing with "database is locked" half-way through a transaction.
        config.setdefault("OPTIONS", {}).update({"transaction_mode": "IMMEDIATE", "timeout": 30})
    elif not config.get("NAME"):
        raise ConfigError(variable, "names no database")
    return config


def redis_url_checked(name: str = "REDIS_URL") -> str | None:
    url = env_str(name)
    if url is None:
        return None
    if urlsplit(url).scheme not in {"redis", "rediss", "unix"}:
        raise ConfigError(name, "must start with redis://, rediss:// or unix://")
    return url
