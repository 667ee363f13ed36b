"""Create the admin, a demo space, the offline demo model and a published demo agent.

Idempotent: running it again changes nothing and prints no new password.
"""
from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from agents.models import Agent
from agents.services import agent_create, agent_publish
from core.spaces.services import space_bootstrap_for_user
from models_catalog.models import FigureSource, ModelConnection
from models_catalog.providers.builtin import DEMO

DEMO_AGENT_NAME = "Demo assistant"
DEMO_CONNECTION_NAME = "Offline demo model"


class Command(BaseCommand):
    help = "Create the admin (from DJANGO_SUPERUSER_* or a generated password), a demo space and a demo agent."

    def handle(self, *args, **options) -> None:
        User = get_user_model()
        username = os.environ.get("DJANGO_SUPERUSER_USERNAME") or "admin"
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD")
        with transaction.atomic():
            user = User.objects.filter(username=username).first()
            created_password = None
            if user is None:
                created_password = password or secrets.token_urlsafe(12)
                user = User.objects.create_superuser(username=username, email="", password=created_password)
            space = space_bootstrap_for_user(user=user, name="Demo space")
            connection, _ = ModelConnection.objects.get_or_create(
                space=space,
                name=DEMO_CONNECTION_NAME,
                defaults={
                    "provider": DEMO.name,
                    "model": "agentloom-demo",
                    "context_window": 32_768,
                    "max_output_tokens": 4_096,
                    "safety_margin_tokens": 1_024,
                    "context_window_source": FigureSource.PLATFORM_DEFAULT,
                    "max_output_tokens_source": FigureSource.PLATFORM_DEFAULT,
                },
            )
            agent = Agent.objects.filter(space=space, name=DEMO_AGENT_NAME).first()
            if agent is None:
                agent = agent_create(
                    space=space,
                    name=DEMO_AGENT_NAME,
                    model_connection=connection,
                    instructions="You are a helpful assistant. Use tools when they help.",
                    tools=["calculator", "current_time", "update_plan"],
                    created_by=user,
                )
            if not agent.versions.exists():
                agent_publish(agent=agent, published_by=user)
        if created_password and not password:
            self.stdout.write(
                self.style.SUCCESS(f"Admin created: username {username!r}, password {created_password!r} (shown once).")
            )
        elif created_password:
            self.stdout.write(self.style.SUCCESS(f"Admin {username!r} created from DJANGO_SUPERUSER_* variables."))
        self.stdout.write(f"Demo space {space.name!r} with agent {agent.name!r} is ready.")
