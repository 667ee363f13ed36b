"""What a question offers the offline demo model as tool arguments: the URLs, e-mail
addresses, time zones (an IANA name, or a city of one), dates, times, paths, numbers and
quoted strings it holds, by kind (``Question``). Pure: no Django, no I/O.
"""
from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import Any

_URL = re.compile(r"https?://[^\s<>\"'`)\]]+")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_DATETIME = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:\d{2})?")
_TIME = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])")
_ZONE = re.compile(r"\b(?:[A-Z][A-Za-z_+-]*/)+[A-Za-z_+-][A-Za-z0-9_+-]*\b|\b(?:UTC|GMT)\b")
_QUOTED = re.compile(r"(?:^|(?<=[\s(:]))[\"“‘'`]([^\"”’'`\n]{1,200})[\"”’'`]")
_PATH = re.compile(r"(?:^|(?<=\s))(?:~|\.{1,2})?/?[\w.-]+(?:/[\w.-]+)+/?|(?:^|(?<=\s))[\w-]+\.[A-Za-z0-9]{1,5}\b")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


# --- the question's values ---------------------------------------------------------------

@lru_cache(maxsize=1)
def _zones() -> tuple[frozenset[str], dict[str, str], re.Pattern[str]]:
    """Every IANA zone, the zone of each city name, and one pattern finding those names."""
    names = zoneinfo.available_timezones()
    cities: dict[str, str] = {}
    # Continent/City first, so "Paris" is Europe/Paris and not a legacy alias.
    for name in sorted(names, key=lambda n: (n.count("/") != 1, n.startswith(("Etc/", "US/", "SystemV/")), n)):
        if "/" in name:
            city = name.rsplit("/", 1)[1].replace("_", " ").lower()
            cities.setdefault(city, name)
    longest_first = sorted(cities, key=lambda city: (-len(city), city))
    return frozenset(names), cities, re.compile(r"\b(?:" + "|".join(map(re.escape, longest_first)) + r")\b")


def _zones_in(text: str) -> list[str]:
    """The time zones ``text`` names (``Europe/Paris``, ``UTC``, or a city: ``Tokyo``), in order."""
    known, cities, city_names = _zones()
    found: list[tuple[int, str]] = [(m.start(), m.group()) for m in _ZONE.finditer(text) if m.group() in known]
    taken = [range(start, start + len(zone)) for start, zone in found]
    for match in city_names.finditer(text.lower()):
        if not any(match.start() in span for span in taken):
            found.append((match.start(), cities[match.group()]))
    return [zone for _, zone in sorted(found)]


def _numbers_in(text: str) -> list[float | int]:
    for pattern in (_URL, _DATETIME, _DATE, _TIME):
        text = pattern.sub(" ", text)
    values: list[float | int] = []
    for match in _NUMBER.finditer(text):
        raw = match.group()
        values.append(float(raw) if "." in raw else int(raw))
    return values


@dataclass
class Question:
    """What a question offers as argument values, by kind, each taken once in order."""

    text: str
    today: date
    found: dict[str, list[Any]] = field(default_factory=dict)

    @classmethod
    def read(cls, text: str, today: date | None = None) -> Question:
        text = " ".join((text or "").split())
        urls = [url.rstrip(".,;:!?") for url in _URL.findall(text)]
        without_urls = _URL.sub(" ", text)
        paths = [p for p in _PATH.findall(without_urls)
                 if not _DATE.fullmatch(p) and p not in set(_zones_in(p)) and not re.fullmatch(r"[\d.]+", p)]
        found = {
            "url": urls,
            "email": _EMAIL.findall(text),
            "zone": _zones_in(without_urls),
            "datetime": _DATETIME.findall(text),
            "date": _DATE.findall(text),
            "time": [f"{int(h):02d}:{m}" for h, m in _TIME.findall(without_urls)],
            "path": paths,
            "number": _numbers_in(text),
            "quoted": [q.strip() for q in _QUOTED.findall(text) if q.strip()],
        }
        return cls(text=text, today=today or datetime.now(UTC).date(), found=found)

    def has(self, kind: str) -> bool:
        return bool(self.found.get(kind))

    def take(self, kind: str) -> list[Any]:
        """The question's values of ``kind``, the next one first (then the others)."""
        values = self.found.get(kind) or []
        if values:
            values.append(values.pop(0))  # the next property of this kind takes the next value
            return [values[-1], *values[:-1]]
        return []
