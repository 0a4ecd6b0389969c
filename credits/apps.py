from django.apps import AppConfig


class CreditsConfig(AppConfig):
    name = "credits"
    verbose_name = "Credits, usage and consolidation records"
