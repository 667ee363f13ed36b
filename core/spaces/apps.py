from django.apps import AppConfig


class SpacesConfig(AppConfig):
    name = "core.spaces"
    label = "spaces"
    verbose_name = "Spaces"
