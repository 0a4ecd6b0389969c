from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    name = "memoryapp"
    verbose_name = "Memories"

    def ready(self) -> None:
        # The Celery tasks, registered in every process (not only workers) so that work queued by
        # name resolves, and runs in place in eager mode; importing them needs the models.
        from memoryapp import tasks  # noqa: F401
        # Metrics and task log lines for every task and every deletion receipt (importing the
        # observers needs the models too).
        from memoryapp import observers

        observers.connect()
