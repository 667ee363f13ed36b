from django.apps import AppConfig


class ModelsCatalogConfig(AppConfig):
    name = "models_catalog"
    label = "models_catalog"
    verbose_name = "Models catalog"
