"""The one writer of ``Instance.frame`` (see ``sessions.frames`` for what it holds).

Every change locks the instance row, merges into the frame it reads there (never into a
stale copy), saves, and refreshes the caller's instance, so two writers — the loop taking
supplements, the API queueing one — never lose each other's change.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from django.db import transaction

from sessions.frames import Frame, PlanStep
from sessions.models import Instance


@contextmanager
def frame_locked(*, instance: Instance) -> Iterator[Frame]:
    """Yield the instance's current frame under a row lock; what the block leaves in it is
    saved when the block ends (nothing is saved if it raises).

    Opens a transaction, or joins the caller's: anything else written inside the block
    (records taken from a queue) commits with the frame or not at all.
    """
    with transaction.atomic():
        locked = Instance.objects.select_for_update().only("pk", "frame", "parent_id").get(pk=instance.pk)
        frame = cast(Frame, dict(locked.frame or {}))
        before = dict(frame)
        yield frame
        if frame != before:
            locked.frame = dict(frame)
            locked.save(update_fields=["frame"])
    instance.frame = dict(frame)
    instance.parent_id = locked.parent_id


def frame_update(*, instance: Instance, **changes: Any) -> Frame:
    """Merge ``changes`` into the instance's frame; a value of None removes its key."""
    with frame_locked(instance=instance) as frame:
        for key, value in changes.items():
            if value is None:
                frame.pop(key, None)  # type: ignore[misc]
            else:
                frame[key] = value  # type: ignore[literal-required]
    return frame


def plan_set(*, instance_id: int, steps: list[PlanStep]) -> str:
    """Replace the instance's plan (``update_plan``); the caller validated the steps.
    Returns the instance as events name it: ``main``, or a sub-instance's id."""
    instance = Instance(pk=instance_id)
    frame_update(instance=instance, plan=list(steps))
    return "main" if instance.parent_id is None else str(instance_id)
