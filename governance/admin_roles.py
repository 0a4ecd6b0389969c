"""The two staff roles of the admin console, as Django groups (SPEC §10).

- **auditor**: view permission on every model of the product (and on users and groups); never
  memory text, which no admin page shows anyway.
- **operator**: an auditor who may also run the governed actions: revoke credentials, switch a
  workspace's platform flags, erase a member's memories, re-verify a deletion receipt.

Superusers hold every permission, so they are operators. The admin checks these permissions
(`user.has_perm`), never group names.

The groups are created by a data migration and kept in step after every `migrate` (and every
test-database flush) by a `post_migrate` hook, so a model added later is viewable by auditors
without another data migration. Everything here takes an `apps` registry so the migration can
run it against historical models.
"""

from __future__ import annotations

from django.db import router

AUDITOR = "auditor"
OPERATOR = "operator"

STAFF_APPS = ("governance", "memoryapp", "retention", "credits", "auth")

# (app label, model, codename, name): the governed actions, attached to the model they act on.
GOVERNED_PERMISSIONS: tuple[tuple[str, str, str, str], ...] = (
    ("governance", "credential", "revoke_credential", "Can revoke agent credentials (governed admin action)"),
    ("governance", "workspace", "set_platform_flags", "Can switch a workspace's platform flag and history retention"),
    ("governance", "member", "erase_member_memories", "Can erase every memory of a member (with a receipt)"),
    ("retention", "deletionreceipt", "reverify_receipt", "Can re-run the verification of a deletion receipt"),
)

REVOKE_CREDENTIAL = "governance.revoke_credential"
SET_PLATFORM_FLAGS = "governance.set_platform_flags"
ERASE_MEMBER_MEMORIES = "governance.erase_member_memories"
REVERIFY_RECEIPT = "retention.reverify_receipt"


def sync_staff_groups(apps, using: str = "default") -> None:
    """Create or complete both groups. Idempotent; never removes a permission an admin added."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")

    def content_type(app_label: str, model_name: str):
        return ContentType.objects.db_manager(using).get_or_create(app_label=app_label, model=model_name)[0]

    view_permissions = []
    for label in STAFF_APPS:
        try:
            app_config = apps.get_app_config(label)
        except LookupError:
            continue
        for model in app_config.get_models():
            opts = model._meta
            ct = content_type(opts.app_label, opts.model_name)
            permission, _ = Permission.objects.db_manager(using).get_or_create(
                content_type=ct,
                codename=f"view_{opts.model_name}",
                defaults={"name": f"Can view {opts.verbose_name_raw}"},
            )
            view_permissions.append(permission)

    governed_permissions = []
    for app_label, model_name, codename, name in GOVERNED_PERMISSIONS:
        ct = content_type(app_label, model_name)
        permission, _ = Permission.objects.db_manager(using).get_or_create(
            content_type=ct, codename=codename, defaults={"name": name}
        )
        governed_permissions.append(permission)

    auditor, _ = Group.objects.db_manager(using).get_or_create(name=AUDITOR)
    operator, _ = Group.objects.db_manager(using).get_or_create(name=OPERATOR)
    auditor.permissions.add(*view_permissions)
    operator.permissions.add(*view_permissions, *governed_permissions)


def sync_after_migrate(sender, app_config=None, using: str = "default", apps=None, **kwargs) -> None:
    """`post_migrate` receiver; runs once per migrate (when the governance app is signalled)."""
    if app_config is None or app_config.label != "governance":
        return
    if not router.allow_migrate(using, "auth", model_name="group"):
        return  # a database that holds no auth tables (the key store's)
    if apps is None:
        from django.apps import apps as global_apps

        apps = global_apps
    sync_staff_groups(apps, using=using)
