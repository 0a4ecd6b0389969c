from django.apps import AppConfig


class RetentionConfig(AppConfig):
    name = "retention"
    verbose_name = "Retention, erasure and receipts"

    def ready(self) -> None:
        # Wiring, once the models exist (NetBox's `ready()`): the reactions to governance's
        # signals, and the Celery tasks, registered in every process so work is queued by name.
        from retention import reactions, tasks  # noqa: F401

        reactions.connect()
