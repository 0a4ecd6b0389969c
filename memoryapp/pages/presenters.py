"""What the page templates show: labels in the reader's language and the rows they render.

Views (`memoryapp.pages.views`) handle the request and call the actions; these functions turn
the actions' results and the member's records into template rows. Chart geometry lives in
`memoryapp.pages.charts`."""

from __future__ import annotations

import json
import shlex
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import Count
from django.forms import Form
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from core.errors import ApiError
from credits import usage as credit_usage
from credits.models import UsageCategory, UsageRecord
from governance.actions import ACCOUNT_NOTICES, account_target
from governance.models import AuditEvent, Collection, Credential, Member
from governance.permissions import scope_allowed_for_role, scope_minimum_role
from memoryapp import access_log
from memoryapp.models import AccessEntry, AccessSurface, MemoryVersion, Source, current_q
from memoryapp.pages.forms import KIND_CHOICES
from retention import receipt_keys
from retention import receipts as receipt_chain
from retention.models import DeletionReceipt, Operation

MASK_LABELS = {
    "EMAIL": gettext_lazy("email address"),
    "PHONE": gettext_lazy("phone number"),
    "IL_ID": gettext_lazy("ID number"),
    "CARD": gettext_lazy("payment card number"),
    "BANK_ACCOUNT": gettext_lazy("bank account number"),
    "NUMBER": gettext_lazy("long number"),
    "SECRET": gettext_lazy("secret"),
}

ROLE_LABELS = {
    "viewer": gettext_lazy("viewer"),
    "editor": gettext_lazy("editor"),
    "admin": gettext_lazy("admin"),
    "owner": gettext_lazy("owner"),
}

# The navigation, in order: (url name, label, permission needed or None, group).
NAV = [
    ("pages:ai-memory", gettext_lazy("AI memory"), None, gettext_lazy("Memory")),
    ("pages:agent-memories", gettext_lazy("What Bundata remembers"), None, gettext_lazy("Memory")),
    ("pages:agent-access", gettext_lazy("Agent access"), None, gettext_lazy("Settings")),
    ("pages:ask-history", gettext_lazy("Ask history"), "ask_history:manage", gettext_lazy("Settings")),
    ("pages:usage", gettext_lazy("Usage"), None, gettext_lazy("Credits")),
]


# --- the frame of every workspace page ------------------------------------------------------------
def frame(user: AbstractBaseUser, member: Member, current: str) -> dict[str, Any]:
    """Navigation (what the member's permissions allow) and the workspace switcher."""
    ws = member.workspace.pk
    nav: list[dict[str, Any]] = []
    for name, label, permission, group in NAV:
        if permission is None or member.has_perm(permission):
            if not nav or nav[-1]["label"] != group:
                nav.append({"label": group, "items": []})
            nav[-1]["items"].append({"url": reverse(name, args=[ws]), "label": label, "current": name == current})
    permission_of = {name: permission for name, _label, permission, _group in NAV}
    switcher = []
    for other in (
        Member.objects.active()
        .filter(user=user)
        .select_related("workspace")
        .order_by("workspace__name", "workspace_id")
    ):
        # Stay on the same page in the other workspace when allowed there, else land on AI memory.
        needed = permission_of.get(current)
        target = current if needed is None or other.has_perm(needed) else "pages:ai-memory"
        switcher.append(
            {
                "name": other.workspace.name,
                "url": reverse(target, args=[other.workspace_id]),
                "current": other.workspace_id == ws,
                "role": ROLE_LABELS.get(other.role, other.role),
            }
        )
    return {
        "member": member,
        "workspace": member.workspace,
        "nav": nav,
        "switcher": switcher,
        "role_label": ROLE_LABELS.get(member.role, member.role),
    }


# --- refusals and notes ---------------------------------------------------------------------------
def error_text(exc: ApiError) -> str:
    """The action's refusal in the reader's language (the English message for unknown codes)."""
    reason = exc.details.get("reason") if isinstance(exc.details, dict) else None
    known = {
        "AGENT_MEMORY_EMPTY": _("Nothing is left of the text once personal data is masked."),
        "AGENT_MEMORY_PERSONAL_DATA": _("The topic must not contain personal data."),
        "AGENT_MEMORY_FULL": _("You already have the maximum number of stored memory versions in this workspace."),
        "NON_RETAINING_WORKSPACE": _("This workspace keeps no history, so it keeps no memories."),
        "MEMORY_NOT_FOUND": _("No such memory. It may already have been deleted."),
        "INSUFFICIENT_ROLE": _("A scope above your role cannot be granted."),
        "VALIDATION_ERROR": _("Please correct the highlighted fields."),
    }
    if exc.code == "AGENT_MEMORY_DISABLED":
        if reason == "organization":
            return _("AI memory is not enabled for your organization")
        if reason == "workspace":
            return _("The workspace owner has not enabled agent memories.")
        return _("AI memory is off; the assistant currently does not read or add memories")
    return known.get(exc.code, exc.message)


def masked_note(kinds: list[str]) -> str:
    return ", ".join(str(MASK_LABELS.get(k, k)) for k in kinds)


# --- memories -----------------------------------------------------------------------------------
def agent_memory_rows(memories: list[dict[str, Any]], member: Member) -> list[dict[str, Any]]:
    """Rows of "What Bundata remembers" from memory objects `M`, with their collections' names."""
    collection_ids = {int(m["collectionId"]) for m in memories if m["collectionId"]}
    names = (
        dict(Collection.objects.restrict(member, "view").filter(pk__in=collection_ids).values_list("pk", "name"))
        if collection_ids
        else {}
    )
    return [
        {
            **m,
            "created": parse_datetime(m["createdAt"]),
            "expires": parse_datetime(m["expiresAt"]),
            "collection_name": names.get(int(m["collectionId"])) if m["collectionId"] else None,
            "source_label": Source.label_of(m["source"]),
            "masked_note": masked_note(m["masked"]),
            "citation_count": len(m["citations"]),
        }
        for m in memories
    ]


def assistant_rows(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kinds = dict(KIND_CHOICES)
    return [
        {
            **item,
            "kind_label": kinds.get(item["kind"], item["kind"] or "—"),
            "source_label": Source.label_of(item["source"]),
            "created": parse_datetime(item["createdAt"]),
            "updated": parse_datetime(item["updatedAt"]),
            "expires": parse_datetime(item["expiresAt"]),
            "erased": parse_datetime(item["erasedAt"]) if item.get("erasedAt") else None,
            "masked_note": masked_note(item["masked"]),
        }
        for item in items
    ]


# --- the access log ------------------------------------------------------------------------------------


def access_rows(
    entries: list[AccessEntry], visible: dict[int, MemoryVersion], hidden: set[int]
) -> list[dict[str, Any]]:
    """Rows of "Access history": each read, and the memories it returned as they are now (the
    member may open them: they are theirs); an erased one says so, never what it said."""
    today = timezone.localdate()
    rows = []
    for entry in entries:
        memories = []
        for ref in entry.memories:
            state = access_log.state_of(int(ref["id"]), visible, hidden)
            version = visible.get(int(ref["id"]))
            memories.append(
                {
                    "id": str(ref["id"]),
                    "version": ref["v"],
                    "state": state,
                    "namespace": version.namespace if version else None,
                    "key": version.key if version else None,
                    "text": version.text if version else None,
                    "assistant": bool(version and version.is_assistant),
                    "source_label": Source.label_of(version.source) if version else None,
                }
            )
        rows.append(
            {
                "entry": entry,
                "name": entry.credential_name,
                "recall": entry.operation == "recall",
                "surface_label": AccessSurface.label_of(entry.surface),
                "today": timezone.localdate(entry.at) == today,
                "memories": memories,
            }
        )
    return rows


# --- Settings → Agent access --------------------------------------------------------------------------
def scope_options(member: Member, form: Form) -> list[dict[str, Any]]:
    chosen = set(form["scopes"].value() or []) if form.is_bound else set()
    options = []
    for scope, description in (
        ("memory:read", _("Recall and list your memories")),
        ("memory:write", _("Remember and forget memories for you")),
    ):
        minimum = scope_minimum_role(scope)
        allowed = scope_allowed_for_role(scope, member.role)
        options.append(
            {
                "value": scope,
                "description": description,
                "allowed": allowed,
                "checked": allowed and scope in chosen,
                "reason": ""
                if allowed
                else _("Needs the %(needed)s role or above; your role is %(role)s.")
                % {"needed": ROLE_LABELS[minimum.label], "role": ROLE_LABELS.get(member.role, member.role)},
            }
        )
    return options


def connection_snippet(request: HttpRequest, token: str) -> dict[str, str]:
    """What an agent builder pastes after creating a credential: the client's environment
    (`GAM_URL`, `GAM_TOKEN`, read by `governed_memory.MemoryClient`) and an MCP client's config
    for streamable HTTP with the bearer header. Built for the one response that shows the token."""
    base = request.build_absolute_uri("/").rstrip("/")
    mcp = {
        "mcpServers": {
            "agent-memory": {"type": "http", "url": f"{base}/mcp", "headers": {"Authorization": f"Bearer {token}"}}
        }
    }
    return {
        "env": f"export GAM_URL={shlex.quote(base)}\nexport GAM_TOKEN={shlex.quote(token)}",
        "mcp": json.dumps(mcp, indent=2),
    }


def credential_rows(member: Member) -> list[dict[str, Any]]:
    now = timezone.now()
    rows = []
    for credential in Credential.objects.restrict(member, "view").select_related("context_set"):
        status = credential.status(now)
        disabled_scopes = [
            s
            for s in credential.scopes
            if s in ("memory:read", "memory:write") and not scope_allowed_for_role(s, member.role)
        ]
        rows.append(
            {
                "credential": credential,
                "status": status.value,
                "status_label": status.label,
                "disabled_scopes": disabled_scopes,
            }
        )
    return rows


def account_notices(user: AbstractBaseUser, limit: int = 20) -> list[dict[str, Any]]:
    """What administrators did to the person's account (SPEC §10: "a member sees when it was
    used"), newest first: the audited password step, or a password set when an admin created the
    account. Shown on every workspace's Agent access page: the account is the person's."""
    events = AuditEvent.objects.filter(action__in=ACCOUNT_NOTICES, target=account_target(user)).order_by(
        "-created_at", "-id"
    )[:limit]
    return [{"at": event.created_at, "reason": event.reason} for event in events]


# --- Settings → Ask history (owner) ------------------------------------------------------------------
def agent_memory_counts(member: Member) -> dict[str, int]:
    """How many agent memories the workspace holds: counts, never content."""
    agent_versions = MemoryVersion.objects.filter(workspace=member.workspace).agent()
    return agent_versions.aggregate(
        versions=Count("id"),
        memories=Count("id", filter=current_q()),
        members=Count("member", distinct=True),
    )


def receipt_rows(member: Member) -> list[dict[str, Any]]:
    rows = []
    for receipt in DeletionReceipt.objects.restrict(member, "view").order_by("-purged_at", "-id")[:50]:
        rows.append(
            {
                "receipt": receipt,
                "operation_label": Operation.label_of(receipt.operation),
                "versions": receipt.versions_erased,
                "citations": receipt.artifact_count("citation"),
                "embeddings": receipt.artifact_count("memory_embedding"),
                "clean": bool(receipt.verified_clean),
                "backup_days": receipt.backup_days,
            }
        )
    return rows


# The page verifies the newest receipts only, so it stays fast on a workspace with years of
# sweep receipts (docs/benchmarks.md "Receipt chain"); `verify_receipts` and the verify
# endpoint check every receipt.
PAGE_CHAIN_CHECK = 1000


def receipt_chain_status(member: Member) -> dict[str, Any]:
    """The workspace's receipt chain, verified now: intact with its count, or the first break."""
    keys = receipt_keys.public_keys()
    chain = receipt_chain.verify_chain(member.workspace_id, keys=keys, newest=PAGE_CHAIN_CHECK)
    brk = chain["firstBreak"]
    return {
        "intact": chain["intact"],
        "receipts": chain["receipts"],
        "checked": chain["checked"],
        "partial": "checkedFromSeq" in chain,
        "key_id": next(iter(keys))[:8],
        "break_receipt": brk["receiptId"] if brk else None,
        "break_position": brk["chainSeq"] if brk else None,
        "break_reason": receipt_chain.REASON_LABELS.get(brk["reason"], brk["reason"]) if brk else None,
    }


# --- Usage ------------------------------------------------------------------------------------------------
def usage_lines(record: UsageRecord) -> list[dict[str, Any]]:
    """The record's lines (`credits.usage.lines_of`), their labels and the AI-memory note translated."""
    return [
        {
            "label": _(line.label),
            "tokens": line.tokens,
            "cost": line.cost,
            "memory_tokens": line.memory_tokens,
            "note": credit_usage.memory_note(record, translated=True) if line.memory_tokens else "",
        }
        for line in credit_usage.lines_of(record)
    ]


def usage_rows(records: list[UsageRecord]) -> list[dict[str, Any]]:
    return [
        {
            "record": r,
            "category_label": _("AI memory") if r.category == UsageCategory.AI_MEMORY else _("Assistant reply"),
            "lines": usage_lines(r),
            "who": (r.member.user.email or r.member.user.username) if r.member_id else _("Former member"),
        }
        for r in records
    ]


# --- erase previews (retention.previews manifests) ------------------------------------------------
def number(value: int) -> str:
    """A count as the reader's locale writes it (1,204)."""
    return number_format(value, force_grouping=True)


def manifest_rows(manifest: dict[str, Any], *, owner: bool = False) -> list[dict[str, str]]:
    """The lines of a confirmation step: what the erase's receipts will count, counts only."""
    artifacts = manifest["artifacts"]
    rows = [
        {
            "label": _("Agent memories") if "assistantMemories" not in manifest else _("Memories"),
            "value": number(manifest["memories"]),
            "key": "memories",
        },
        {
            "label": _("Stored versions, including earlier ones"),
            "value": number(artifacts["memory_version"]),
            "key": "memory_version",
        },
        {"label": _("Citation links"), "value": number(artifacts["citation"]), "key": "citation"},
        {
            "label": _("Search index entries (embeddings)"),
            "value": number(artifacts["memory_embedding"]),
            "key": "memory_embedding",
        },
        {
            "label": _("Access-history entries erased"),
            "value": number(artifacts["access_log_entry"]),
            "key": "access_log_entry",
        },
        {
            "label": _("References struck from other access-history entries"),
            "value": number(artifacts["access_log_reference"]),
            "key": "access_log_reference",
        },
    ]
    if "assistantMemories" in manifest:
        rows.insert(
            1, {"label": _("of which AI memories"), "value": number(manifest["assistantMemories"]), "key": "assistant"}
        )
    if owner:
        rows.append({"label": _("Members they belong to"), "value": number(manifest["members"]), "key": "members"})
    rows.append(
        {"label": _("Deletion receipts to be written"), "value": number(manifest["receipts"]), "key": "receipts"}
    )
    return rows


def _days(days: int) -> str:
    return ngettext("%(n)s day", "%(n)s days", days) % {"n": number(days)}


def retention_sentences(manifest: dict[str, Any]) -> list[str]:
    """What saving the new retention does now, in words (the settings page's confirmation)."""
    old_days, days = manifest["agentMemoryRetentionDays"]
    old_grace, grace = manifest["expiredGraceDays"]
    agent = manifest["agentMemories"]["memories"]
    versions = manifest["agentMemories"]["versions"]
    to_expired = manifest["assistantMemoriesToExpired"]
    restored = manifest["assistantMemoriesRestored"]
    purged = manifest["expiredAssistantMemoriesErased"]
    agent_phrase = ngettext("%(n)s agent memory", "%(n)s agent memories", agent) % {"n": number(agent)}
    assistant_phrase = ngettext("%(n)s assistant memory", "%(n)s assistant memories", to_expired) % {
        "n": number(to_expired)
    }
    period = {"period": _days(days)}
    sentences = []
    if days < old_days:
        if (agent or versions) and to_expired:
            sentences.append(
                _("Lowering retention to %(period)s erases %(agent)s now and moves %(assistant)s to Expired.")
                % {**period, "agent": agent_phrase, "assistant": assistant_phrase}
            )
        elif agent or versions:
            sentences.append(
                _("Lowering retention to %(period)s erases %(agent)s now.") % {**period, "agent": agent_phrase}
            )
        elif to_expired:
            sentences.append(
                _("Lowering retention to %(period)s moves %(assistant)s to Expired.")
                % {**period, "assistant": assistant_phrase}
            )
        else:
            sentences.append(_("Lowering retention to %(period)s erases no memory now.") % period)
    elif days > old_days:
        if restored:
            sentences.append(
                ngettext(
                    "Raising retention to %(period)s brings back %(n)s expired assistant memory.",
                    "Raising retention to %(period)s brings back %(n)s expired assistant memories.",
                    restored,
                )
                % {**period, "n": number(restored)}
            )
        else:
            sentences.append(_("Raising retention to %(period)s erases no memory.") % period)
    if versions != agent and versions:
        sentences.append(
            ngettext(
                "With earlier versions, %(n)s stored version is erased.",
                "With earlier versions, %(n)s stored versions are erased.",
                versions,
            )
            % {"n": number(versions)}
        )
    if purged:
        sentences.append(
            ngettext(
                "%(n)s expired assistant memory whose grace period has ended is erased now.",
                "%(n)s expired assistant memories whose grace period has ended are erased now.",
                purged,
            )
            % {"n": number(purged)}
        )
    elif grace < old_grace and days == old_days:
        sentences.append(
            _("Shortening the expired grace to %(period)s erases no memory now.") % {"period": _days(grace)}
        )
    return sentences
