"""A provider's usage report in four figures, and what they cost at a price per million.

Every model call stores the provider's own ``usage`` (CTX-25). Providers split the input
differently: OpenAI reports the whole prompt (``prompt_tokens``) and the part read from
its cache (``prompt_tokens_details.cached_tokens``); DeepSeek names the cached part
``prompt_cache_hit_tokens``; Anthropic reports the uncached input (``input_tokens``), the
input read from the cache (``cache_read_input_tokens``) and the input written to it
(``cache_creation_input_tokens``) — the client adds the OpenAI-style totals beside them.
:func:`usage_figures` reads all of them the same way:

- **cache read**: ``prompt_tokens_details.cached_tokens``, else ``cache_read_input_tokens``,
  else ``prompt_cache_hit_tokens``, else 0;
- **cache written**: ``cache_creation_input_tokens``, else 0;
- **prompt**: ``prompt_tokens``, else ``input_tokens`` + cache read + cache written;
- **uncached input**: prompt − cache read − cache written (never below 0);
- **output**: ``completion_tokens``, else ``output_tokens``, else 0.

A figure counts only when it is a whole number from 0 to ``MAX_COUNT``; anything else is
treated as absent. The usage page aggregates the same rules in SQL
(``sessions.selectors.usage``), and its tests hold the two to the same totals.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

MAX_COUNT = 10**18 - 1  # 18 digits: what a bigint holds with room to add
PER = Decimal(1_000_000)


def usage_count(value: Any) -> int | None:
    """A token figure, when it is one."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return None


def _first(*values: Any) -> int | None:
    for value in values:
        count = usage_count(value)
        if count is not None:
            return count
    return None


@dataclass(frozen=True)
class UsageFigures:
    """One call's (or many calls') input and output tokens as the provider billed them."""

    input_uncached: int = 0
    cache_read: int = 0
    cache_written: int = 0
    output: int = 0
    reported: bool = False

    @property
    def input_total(self) -> int:
        return self.input_uncached + self.cache_read + self.cache_written

    @property
    def cache_read_share(self) -> float | None:
        """The share of the input read from the provider's prompt cache."""
        return self.cache_read / self.input_total if self.input_total else None

    def __add__(self, other: UsageFigures) -> UsageFigures:
        return UsageFigures(input_uncached=self.input_uncached + other.input_uncached,
                            cache_read=self.cache_read + other.cache_read,
                            cache_written=self.cache_written + other.cache_written,
                            output=self.output + other.output, reported=self.reported or other.reported)

    def as_dict(self) -> dict[str, Any]:
        return {"input_uncached": self.input_uncached, "cache_read": self.cache_read,
                "cache_written": self.cache_written, "output": self.output, "reported": self.reported}


def usage_figures(usage: Any) -> UsageFigures:
    """The four figures of a stored ``usage`` (see the module docstring for the rules)."""
    if not isinstance(usage, Mapping):
        return UsageFigures()
    details = usage.get("prompt_tokens_details")
    read = _first(details.get("cached_tokens") if isinstance(details, Mapping) else None,
                  usage.get("cache_read_input_tokens"), usage.get("prompt_cache_hit_tokens")) or 0
    written = usage_count(usage.get("cache_creation_input_tokens")) or 0
    prompt = usage_count(usage.get("prompt_tokens"))
    if prompt is None:
        uncached = usage_count(usage.get("input_tokens"))
        prompt = None if uncached is None else uncached + read + written
    output = _first(usage.get("completion_tokens"), usage.get("output_tokens"))
    return UsageFigures(input_uncached=max(prompt - read - written, 0) if prompt is not None else 0,
                        cache_read=read, cache_written=written, output=output or 0,
                        reported=prompt is not None or output is not None)


@dataclass(frozen=True)
class TokenPrices:
    """Prices per million tokens. Cached input and cache writes cost what input costs
    unless a price of their own is set."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None
    cache_write: Decimal | None = None


def usage_cost(figures: UsageFigures, prices: TokenPrices) -> Decimal:
    """What ``figures`` cost, exactly (no rounding: round where it is shown)."""
    cached = prices.input if prices.cached_input is None else prices.cached_input
    write = prices.input if prices.cache_write is None else prices.cache_write
    total = (figures.input_uncached * prices.input + figures.cache_read * cached
             + figures.cache_written * write + figures.output * prices.output)
    return total / PER
