from django.apps import AppConfig


class ToolServersConfig(AppConfig):
    name = "agentloom.toolservers"
    label = "toolservers"
    verbose_name = "Tool servers"
