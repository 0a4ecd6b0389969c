"""Accounts in the admin console (SPEC §10): Django's user and group admins closed as an
impersonation path (a member's password is set only through the audited step, and the member
sees it), and the console's throttled login."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.forms import AdminPasswordChangeForm
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db import transaction

from governance import actions
from governance.admin_base import RefuseUnknownActionsMixin
from governance.auth import is_member_account, may_set_password
from governance.login_throttle import ThrottledLoginMixin

User = get_user_model()


# --- accounts: no admin path yields a member's session outside the audited step (SPEC §10) ------------
class AuditedPasswordChangeForm(AdminPasswordChangeForm):
    """Django's set-password form, with the reason the audited step asks for: required when the
    account is a member's (`is_member_account`), optional for platform staff."""

    reason = forms.CharField(
        label="Reason",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        max_length=2000,
        required=False,
        help_text="Recorded in the audit event; the account's owner sees it on their Settings → Agent access page.",
    )

    def __init__(self, user, *args, **kwargs):
        super().__init__(user, *args, **kwargs)
        self.member_account = is_member_account(user)
        self.fields["reason"].required = self.member_account

    def clean_reason(self) -> str:
        reason = self.cleaned_data.get("reason", "").strip()
        if self.member_account and not reason:
            raise forms.ValidationError("A reason is required: this account belongs to a workspace member.")
        return reason


class AccountAdmin(RefuseUnknownActionsMixin, UserAdmin):
    """Django's user admin, closed as an impersonation path. For an account that is or was a
    member's: setting or disabling its password needs the audited step (`audited_step_allowed`:
    the deployment's ADMIN_MAY_VIEW_MEMORY_CONTENT, an active superuser, a reason) and writes an
    audit event the member sees; its login (username) and e-mail are read-only, so nobody can
    point it elsewhere; deleting it is refused by the admin (its member rows are not deletable
    here). Every password an admin sets, on any account and through the add form too, is
    recorded the same way, so an account prepared by an admin that joins a workspace later shows
    it. Activating and deactivating stay editable; the privilege fields (superuser, staff, groups,
    permissions) and the password of a superuser or another admin are for superusers only."""

    change_password_form = AuditedPasswordChangeForm
    change_user_password_template = "admin/auth/user/change_password_audited.html"

    def get_readonly_fields(self, request, obj=None):
        readonly = tuple(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:  # staff cannot grant themselves (or anyone) more power
            readonly += ("is_superuser", "is_staff", "groups", "user_permissions")
        if obj is not None and is_member_account(obj):
            readonly += ("username", "email")
        return readonly

    def user_change_password(self, request, id, form_url=""):
        target = self.get_object(request, unquote(id))
        if target is not None and not may_set_password(request.user, target):
            raise PermissionDenied
        own = target is not None and target.pk == request.user.pk  # an admin's own password is theirs: no audit event
        with transaction.atomic():
            before = target.password if target is not None else None
            response = super().user_change_password(request, id, form_url)
            if target is not None and not own and request.method == "POST":
                target.refresh_from_db(fields=["password"])
                if target.password != before:
                    actions.record_password_set_by_admin(
                        target, actor=request.user, reason=request.POST.get("reason", "").strip()
                    )
        return response

    def save_model(self, request, obj, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if not change and obj.has_usable_password():
            actions.record_password_set_by_admin(
                obj, actor=request.user, reason="set when the account was created in the admin"
            )


if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, AccountAdmin)
# Groups keep Django's admin, with the console's rule that a refused action is a 403.
if admin.site.is_registered(Group):
    admin.site.unregister(Group)
admin.site.register(Group, type(GroupAdmin.__name__, (RefuseUnknownActionsMixin, GroupAdmin), {}))


class ThrottledAdminLoginForm(ThrottledLoginMixin, AdminAuthenticationForm):
    """The admin's login form with the product's login throttle (a limit per address and account, a
    slow-down per account: governance.login_throttle)."""


admin.site.login_form = ThrottledAdminLoginForm
admin.site.site_header = "Governed agent memory — governance console"
admin.site.site_title = "Governance console"
admin.site.index_title = "Dashboard"
