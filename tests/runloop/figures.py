"""CTX-41: how a token figure in an event must be named, checked over any event payload."""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# A request's size, one name per meaning: our estimator's count or the calibrated figure the
# trigger and the commit rule compare, of the view before or after a compaction.
NAMED = re.compile(r"^tokens_(before|after|masked)_(estimated|calibrated)$")
# CTX-47: what each tier of a compaction removed, in calibrated figures (the differences of
# tokens_before/masked/after_calibrated), under the names the spec gives them.
REMOVED = frozenset({"mask_tokens_removed", "summary_tokens_removed"})
# The budget's marks the chat's meter draws (CTX-21/22/45): set figures, not measurements.
MARKS = frozenset({"effective_input_tokens", "trigger_tokens", "target_tokens", "prepare_tokens"})


def misnamed(payload: Any, path: str = "") -> list[str]:
    """Every key of ``payload`` (nested) holding a token figure whose name does not say
    what it is. The meter's ``tokens`` is named by the ``measured_by`` beside it (the
    provider's count, or our calibrated estimate)."""
    found: list[str] = []
    if isinstance(payload, dict):
        for key, value in payload.items():
            where = f"{path}.{key}" if path else str(key)
            if "token" in str(key) and not (NAMED.match(str(key)) or key in MARKS or key in REMOVED
                                            or (key == "tokens" and payload.get("measured_by") in ("provider",
                                                                                                  "estimate"))):
                found.append(where)
            found += misnamed(value, where)
    elif isinstance(payload, list):
        for index, value in enumerate(payload):
            found += misnamed(value, f"{path}[{index}]")
    return found


def figures_named(events: Iterable[Any], *, carrying: Iterable[str]) -> dict[str, list[str]]:
    """``{event type: misnamed keys}`` over ``events`` (RunEvent rows), every type of
    ``carrying`` required to be among them with both of its figures named."""
    bad: dict[str, list[str]] = {}
    seen: set[str] = set()
    for event in events:
        seen.add(event.type)
        wrong = misnamed(event.payload)
        if event.type in carrying and not any(NAMED.match(key) for key in _keys(event.payload)):
            wrong.append("(no named token figure)")
        if wrong:
            bad.setdefault(event.type, []).extend(wrong)
    for missing in set(carrying) - seen:
        bad[missing] = ["(never emitted)"]
    return bad


def _keys(payload: Any) -> list[str]:
    if isinstance(payload, dict):
        return [str(k) for k in payload] + [k for v in payload.values() for k in _keys(v)]
    return []
