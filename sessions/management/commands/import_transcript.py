"""Import a transcript file (JSON list, JSONL, or a tau-bench trajectory) as a session (RUN-12)."""
from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from sessions.services.imports import session_import


class Command(BaseCommand):
    help = "Import an OpenAI-messages transcript as a session of USER with AGENT."

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument("--user", required=True, help="username that will own the session")
        parser.add_argument("--agent", required=True, type=int, help="agent id (its latest published version is used)")
        parser.add_argument("--title", default="")

    def handle(self, *args, path: Path, user: str, agent: int, title: str, **options) -> None:
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"No user named {user!r}.")
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"Cannot read {path}: {exc.strerror}") from None
        try:
            session = session_import(user=owner, agent_id=agent, transcript=text, title=title)
        except DomainError as exc:
            detail = "; ".join(f"{k}: {v}" for k, v in exc.fields.items())
            raise CommandError(f"{exc.message} {detail}".strip()) from None
        self.stdout.write(f"Imported session {session.pk} ({session.last_seq} records).")
