from django.apps import AppConfig


class SessionsConfig(AppConfig):
    # The label differs from the package name because django.contrib.sessions owns "sessions".
    name = "sessions"
    label = "agent_sessions"
    verbose_name = "Sessions and runs"
