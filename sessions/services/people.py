"""What one person may hold and start (issue #44 item 14, SPEC §11).

Each conversation's files are bounded (``AGENTLOOM_SESSION_FILES_MAX_BYTES``), but a
person could start conversations without end: their files across every session are
bounded by ``AGENTLOOM_USER_FILES_MAX_BYTES`` (``files.file_store``), and the sessions they
start — in the chat, through the API or by an import — by ``AGENTLOOM_SESSIONS_PER_DAY``
over the last 24 hours. Both are checked and written under the person's row lock, so
requests side by side cannot each take the last of a bound.
"""
from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, Min
from django.utils import timezone

from core.errors import TryLater
from sessions.models import Session

DAY = timedelta(days=1)


def person_lock(*, user) -> None:
    """Lock ``user``'s row until the transaction ends (inside one; on SQLite, which writes
    one transaction at a time, there is nothing to lock). Taken before any session's lock."""
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk", flat=True))


def sessions_per_day_check(*, user) -> None:
    """TryLater (429 ``sessions_per_day``, Retry-After until the oldest of the day's ages
    out) when ``user`` started ``AGENTLOOM_SESSIONS_PER_DAY`` sessions in the last 24
    hours. Under ``person_lock``."""
    now = timezone.now()
    since = now - DAY
    # updated_at is never before created_at: the index (user, -updated_at) reads only the
    # sessions touched today, however many the person has.
    started = (Session.objects.filter(user=user, updated_at__gte=since, created_at__gte=since)
               .aggregate(count=Count("id"), first=Min("created_at")))
    bound = settings.AGENTLOOM_SESSIONS_PER_DAY
    if started["count"] >= bound:
        wait = math.ceil((started["first"] + DAY - now).total_seconds())
        raise TryLater(f"You have started {started['count']} conversations in the last 24 hours, the most this "
                       f"server allows one person. Continue one of them, or try again later.", status=429,
                       code="sessions_per_day", retry_after=max(wait, 1))
