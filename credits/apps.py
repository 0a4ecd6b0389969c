from django.apps import AppConfig


class CreditsConfig(AppConfig):
    name = "credits"
    verbose_name = "Credits, usage and consolidation records"

    def ready(self) -> None:
        # The Celery tasks, registered in every process so that work queued by name resolves.
        from credits import tasks  # noqa: F401
