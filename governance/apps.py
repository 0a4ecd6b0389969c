from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = "Governance"

    def ready(self) -> None:
        from django.conf import settings
        from django.contrib.auth.signals import user_logged_in
        from django.db.models.signals import post_delete, post_save, pre_delete

        # content: registers the content-declaration check; tasks: queued by name
        from governance import actions, auth, content, tasks  # noqa: F401
        from governance.models import Entity, entity_changed  # models load only once the registry is ready

        # A session remembers when it logged in, so a re-added membership can refuse older ones.
        user_logged_in.connect(auth.record_login_time, dispatch_uid="governance.record_login_time")
        # A user deleted by any path ends their memberships first (receipts, revoked credentials).
        pre_delete.connect(
            actions.on_user_deleting, sender=settings.AUTH_USER_MODEL, dispatch_uid="governance.user_deleting"
        )
        # Each process's cached entity matcher knows an entity change by the workspace's counter.
        post_save.connect(entity_changed, sender=Entity, dispatch_uid="governance.entity_saved")
        post_delete.connect(entity_changed, sender=Entity, dispatch_uid="governance.entity_deleted")
