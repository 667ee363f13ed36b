"""CTX-24: the per-message estimate cache. A step of a run estimates only what is new in its
request: each message is compared with the one at its position in the previous request
of the same track, else looked up by its content, and estimated with the wrapped
estimator (``context.estimators``) only when neither knows it.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from context.estimators import Estimator
from context.kept import same_until

_DICT = object()
_LIST = object()


def _freeze(value: Any) -> Any:
    # A hashable mirror of a message. Strings are kept as they are: Python caches a
    # string's hash on the object, so a message whose strings are shared with the previous
    # step is keyed in time proportional to its number of fields, not its length. Tags
    # keep values that compare equal but serialise differently apart ({} vs [], 1 vs
    # True vs 1.0).
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, Mapping):
        return (_DICT, *((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return (_LIST, *(_freeze(v) for v in value))
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, float):
        return ("float", value)
    if isinstance(value, int):
        return value
    return ("repr", repr(value))


class EstimateCache:
    """Per-message estimates keyed by content, so a step estimates only what is new.

    Two layers, both keyed by content, never by object identity (a caller may mutate or
    rebuild its dicts freely; a changed message is never served a stale figure):

    1. Position: each message is compared (``==``) with a private snapshot of the message
       at the same position in the previous request. A tool loop only appends, so nearly
       every message matches, and the comparison is C-level and short-circuits on strings
       shared with the records -- far cheaper than estimating or hashing.
    2. Content: otherwise a hashable mirror of the message looks up earlier estimates
       (after a compaction the positions shift, but the messages are the same).

    Python equality treats ``True == 1 == 1.0``; a message differing from the previous
    step's only by such a type swap at the same position would reuse its figure. Chat
    messages carry no such fields.

    A caller whose messages are read-only — never changed in place once passed, as the run
    loop's projections and request bodies are (LOOP-1) — says so with ``read_only``: its
    track keeps the messages themselves instead of snapshots, and a message that *is*
    the previous request's at its position is a hit without being compared, as Python's
    own containers treat identity as equality. A step then costs what is new.
    """

    def __init__(self, estimator: Estimator, max_entries: int = 200_000) -> None:
        self.estimator = estimator
        self.max_entries = max_entries
        self._cache: dict[Any, int] = {}
        # Layer 1, per track: (snapshots, figures, read_only) of the previous request on that
        # track; a read-only track's snapshots are the caller's messages themselves.
        self._tracks: dict[Hashable, tuple[list[Any], list[int], bool]] = {}
        self.hits = 0
        self.misses = 0

    @property
    def id(self) -> str:
        """The wrapped estimator's id: cached figures are that estimator's figures."""
        return self.estimator.id

    def message(self, message: Mapping[str, Any]) -> int:
        """The estimate of one message, computed at most once per distinct content."""
        key = _freeze(message)
        value = self._cache.get(key)
        if value is not None:
            self.hits += 1
            return value
        self.misses += 1
        value = self.estimator.message(message)
        if len(self._cache) >= self.max_entries:
            # Drop the oldest half; insertion order is age order for a dict.
            for old in list(self._cache)[: self.max_entries // 2]:
                del self._cache[old]
        self._cache[key] = value
        return value

    def messages(self, messages: Sequence[Mapping[str, Any]], track: Hashable = None, *,
                 read_only: bool = False) -> list[int]:
        """Per-message estimates, in order (what the context inspector shows).

        ``track`` names the sequence of requests this one continues (one instance's
        projected view, or its request bodies): layer 1 compares with the previous request
        of the same track, so estimating two differently shaped lists in turn still finds
        every old message in place. ``read_only``: see the class."""
        snapshots, figures, was_read_only = self._tracks.get(track, ((), (), False))
        if was_read_only != read_only:
            snapshots, figures = (), ()
        out: list[int] = []
        new_snapshots: list[Any] = []
        known = len(snapshots)
        position = 0
        while position < len(messages):
            # A read-only track's run of the very same objects is taken whole (``same_until``:
            # no Python step per message kept); a snapshot of a track that is not read-only is
            # a copy, never the message itself.
            kept = same_until(messages, snapshots, position) if read_only else position
            if kept > position:
                self.hits += kept - position
                out += figures[position:kept]
                new_snapshots += snapshots[position:kept]
                position = kept
                continue
            message = messages[position]
            if position < known and message == snapshots[position]:
                self.hits += 1
                out.append(figures[position])
                new_snapshots.append(message if read_only else snapshots[position])
            else:
                out.append(self.message(message))
                # A snapshot, not the caller's object: in-place edits must not fool layer 1.
                new_snapshots.append(message if read_only else copy.deepcopy(message))
            position += 1
        self._tracks.pop(track, None)  # re-inserted last: the dict's order is the order of use
        if len(self._tracks) >= 64:
            self._tracks.pop(next(iter(self._tracks)))  # the least recently used: a finished sub-agent's
        self._tracks[track] = (new_snapshots, out, read_only)
        return list(out)

    def tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tool schemas rarely change within a run; they are estimated directly."""
        return self.estimator.tools(tools)

    def request(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None,
                track: Hashable = None, *, read_only: bool = False) -> int:
        """The whole request: equal to the wrapped estimator's full count, by construction."""
        overhead = self.estimator.request([], None)
        return overhead + sum(self.messages(messages, track, read_only=read_only)) + self.tools(tools or ())
