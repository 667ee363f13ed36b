from django.apps import AppConfig


class ToolServersConfig(AppConfig):
    name = "toolservers"
    label = "toolservers"
    verbose_name = "Tool servers"
