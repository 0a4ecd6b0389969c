from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    name = "memoryapp"
    verbose_name = "Memories"

    def ready(self) -> None:
        # The Celery tasks, registered in every process (not only workers) so that work queued by
        # name resolves, and runs in place in eager mode; importing them needs the models.
        from memoryapp import tasks  # noqa: F401
