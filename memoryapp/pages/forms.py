"""Page forms. They check shapes (lengths, snake_case, line counts) so a person gets a message in
their language next to the field; the rules themselves stay in the actions, whose refusals the
views show as form errors."""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import AuthenticationForm, UsernameField
from django.core.validators import RegexValidator
from django.utils.translation import gettext_lazy as _

from core.fields import CONTROL_CHARACTERS
from governance.login_throttle import ThrottledLoginMixin
from governance.models import GRACE_DAYS_RANGE, PHONE_REGIONS, RETENTION_DAYS_RANGE, ContextSet
from memoryapp import masking
from memoryapp.assistant import TOPIC
from memoryapp.schemas import MAX_DETAIL_LINES

# The kinds offered on the AI memory page (seed 002: 事実 / 指示 / 好み): the closed vocabulary
# MEMORY_KINDS, which the APIs accept too.
KIND_CHOICES = [
    ("fact", _("Fact")),
    ("preference", _("Preference")),
    ("instruction", _("Instruction")),
]


def no_control_characters(value: str) -> None:
    if CONTROL_CHARACTERS.search(value):
        raise forms.ValidationError(_("Control characters are not allowed."))


class DetailsField(forms.CharField):
    """One item per line; blank lines are dropped."""

    widget = forms.Textarea(attrs={"rows": 4})

    def clean(self, value):
        value = super().clean(value) or ""
        lines = [line.strip() for line in value.splitlines() if line.strip()]
        if len(lines) > MAX_DETAIL_LINES:
            raise forms.ValidationError(_("At most %(count)d lines.") % {"count": MAX_DETAIL_LINES})
        if any(len(line) > 500 for line in lines):
            raise forms.ValidationError(_("Each line must be at most 500 characters."))
        for line in lines:
            no_control_characters(line)
        return lines


class KindField(forms.ChoiceField):
    def __init__(self, *args, current: str | None = None, **kwargs):
        super().__init__(*args, choices=list(KIND_CHOICES), label=_("Type"), **kwargs)


def topic_field(help_text: str) -> forms.CharField:
    return forms.CharField(
        label=_("Topic"),
        max_length=120,
        help_text=help_text,
        validators=[RegexValidator(TOPIC, _("Use English snake_case, for example preferred_language."))],
        widget=forms.TextInput(
            attrs={"autocomplete": "off", "spellcheck": "false", "placeholder": "communication_style"}
        ),
    )


class AssistantMemoryForm(forms.Form):
    kind = KindField()
    topic = topic_field(_("English snake_case, for example communication_style."))
    summary = forms.CharField(
        label=_("Summary"),
        max_length=1000,
        validators=[no_control_characters],
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    details = DetailsField(label=_("Details"), required=False, help_text=_("One item per line."))


class AssistantMemoryEditForm(forms.Form):
    topic = topic_field(
        _(
            "English snake_case. A new topic moves this memory: it is saved under the new topic (replacing that "
            "topic's memory if you already have one) and the old topic is closed — the assistant stops using it, and "
            "its earlier versions stay in the history until they expire."
        )
    )
    summary = forms.CharField(
        label=_("Summary"),
        max_length=1000,
        validators=[no_control_characters],
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    details = DetailsField(label=_("Details"), required=False, help_text=_("One item per line."))

    def __init__(self, *args, current_kind: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.fields = {"kind": KindField(current=current_kind), **self.fields}


def no_personal_data(value: str) -> None:
    if masking.contains_personal_data(value):
        raise forms.ValidationError(_("Must not contain personal data: it is stored as written."))


class CredentialForm(forms.Form):
    name = forms.CharField(
        label=_("Name"),
        max_length=120,
        validators=[no_control_characters, no_personal_data],
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    scopes = forms.MultipleChoiceField(
        label=_("Scopes"),
        required=False,
        choices=[("memory:read", "memory:read"), ("memory:write", "memory:write")],
        widget=forms.CheckboxSelectMultiple,
    )
    context_set = forms.ModelChoiceField(
        label=_("Context set"),
        queryset=ContextSet.objects.none(),
        required=False,
        empty_label=_("Not bound (all memories)"),
    )
    expires_on = forms.DateField(
        label=_("Expires on"),
        required=False,
        help_text=_("Optional; the credential stops working at the end of that day (UTC)."),
        widget=forms.DateInput(attrs={"type": "date"}),
    )

    def __init__(self, *args, workspace, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["context_set"].queryset = (
            ContextSet.objects.live().filter(workspace=workspace).order_by("name", "id")
        )

    def clean_scopes(self):
        scopes = self.cleaned_data["scopes"]
        if not scopes:
            raise forms.ValidationError(_("Choose at least one scope."))
        return scopes


class AskHistorySettingsForm(forms.Form):
    agent_memories_enabled = forms.BooleanField(label=_("Let agents keep memories"), required=False)
    agent_memory_retention_days = forms.IntegerField(
        label=_("Retention (days)"),
        min_value=RETENTION_DAYS_RANGE[0],
        max_value=RETENTION_DAYS_RANGE[1],
        help_text=_(
            "Between 1 and 365. A change applies to existing memories at once: memories older than the new period "
            "expire immediately."
        ),
    )
    expired_grace_days = forms.IntegerField(
        label=_("Expired grace (days)"),
        min_value=GRACE_DAYS_RANGE[0],
        max_value=GRACE_DAYS_RANGE[1],
        help_text=_(
            "Between 0 and 90. Expired AI memories stay available for reactivation this long, then are erased (0 = at "
            "expiry)."
        ),
    )
    phone_region = forms.TypedChoiceField(
        label=_("Region for phone numbers"),
        choices=[("", _("None"))] + [(code, code) for code in PHONE_REGIONS],
        required=False,
        empty_value=None,
        error_messages={"invalid_choice": _("Not a region code (ISO 3166 alpha-2, upper case, such as DK or PL).")},
        help_text=_(
            "The country most members write phone numbers of (ISO 3166 code): its mobile numbers are masked in "
            "whatever grouping they are written, without a phone word."
        ),
    )


class LoginForm(ThrottledLoginMixin, AuthenticationForm):
    """Members log in with their email address (usernames are the lower-cased email)."""

    username = UsernameField(
        label=_("Email"), widget=forms.TextInput(attrs={"autofocus": True, "autocomplete": "username"})
    )

    def clean_username(self) -> str:
        return (self.cleaned_data.get("username") or "").strip().lower()
