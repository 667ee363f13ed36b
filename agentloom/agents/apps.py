from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agentloom.agents"
    label = "agents"
    verbose_name = "Agents"
