"""Request bodies of the workspace API (SPEC §5.1)."""

from __future__ import annotations

from rest_framework import serializers

from core.fields import IdField, InstantField, PlainText, StrictSerializer
from governance.models import GRACE_DAYS_RANGE, PHONE_REGIONS, RETENTION_DAYS_RANGE
from governance.permissions import MEMORY_SCOPES, Role
from memoryapp.schemas import ScreenedText


class SettingsBody(StrictSerializer):
    agentMemoriesEnabled = serializers.BooleanField(required=False)
    agentMemoryRetentionDays = serializers.IntegerField(
        min_value=RETENTION_DAYS_RANGE[0], max_value=RETENTION_DAYS_RANGE[1], required=False
    )
    expiredGraceDays = serializers.IntegerField(
        min_value=GRACE_DAYS_RANGE[0], max_value=GRACE_DAYS_RANGE[1], required=False
    )
    phoneRegion = serializers.ChoiceField(
        choices=PHONE_REGIONS,
        allow_null=True,
        required=False,
        error_messages={"invalid_choice": "Not a region code (ISO 3166 alpha-2, upper case, such as DK or PL)."},
        help_text="The workspace's country for masking: its mobiles are masked in any grouping, without a phone word; "
        "null: none.",
    )


class SettingsPutBody(SettingsBody):
    """The PUT body as documented: the settings, and `dryRun` (read by the view before the
    settings are validated, so only the JSON booleans pass)."""

    dryRun = serializers.BooleanField(
        required=False,
        help_text="true: answer {dryRun, settings, manifest, planToken} (what saving would erase or move now) and "
        "save nothing.",
    )
    planToken = serializers.CharField(
        required=False,
        help_text="planToken of a dry run: save only if what the change erases is still exactly what it previewed, "
        "else 409 PREVIEW_OUTDATED (new manifest and token) and nothing saved.",
    )


class CredentialBody(StrictSerializer):
    name = ScreenedText(min_length=1, max_length=120)
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=sorted(MEMORY_SCOPES)), max_length=len(MEMORY_SCOPES)
    )
    contextSetId = IdField(required=False, allow_null=True)
    expiresAt = InstantField(required=False, allow_null=True)


class RoleBody(StrictSerializer):
    role = serializers.ChoiceField(choices=[r.label for r in Role])


class CollectionBody(StrictSerializer):
    name = PlainText(min_length=1, max_length=200)
    restricted = serializers.BooleanField(required=False, default=False)
    memberIds = serializers.ListField(child=IdField(), required=False, default=list, max_length=1000)


class DocumentBody(StrictSerializer):
    collectionId = IdField()
    title = PlainText(min_length=1, max_length=300)
    text = serializers.CharField(min_length=1, max_length=60000, trim_whitespace=False)
    expiresAt = InstantField(required=False, allow_null=True)


class DocumentVersionBody(StrictSerializer):
    text = serializers.CharField(min_length=1, max_length=60000, trim_whitespace=False)


class EntityBody(StrictSerializer):
    name = PlainText(min_length=1, max_length=200)
    aliases = serializers.ListField(
        child=PlainText(min_length=1, max_length=200), required=False, default=list, max_length=50
    )


class ContextSetBody(StrictSerializer):
    name = PlainText(min_length=1, max_length=200)
    collectionIds = serializers.ListField(child=IdField(), required=False, default=list, max_length=500)
    documentIds = serializers.ListField(child=IdField(), required=False, default=list, max_length=500)
    active = serializers.BooleanField(required=False, default=True)


class ContextSetPatchBody(StrictSerializer):
    active = serializers.BooleanField()
