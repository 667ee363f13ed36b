from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "agentloom.accounts"
    label = "accounts"
    verbose_name = "API tokens"
