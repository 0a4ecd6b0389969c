"""What governance tells the apps that keep data about its objects (SPEC §8 cascades).

Governance owns workspaces, members and knowledge; it does not know what other apps keep about
them. Its actions send these signals, and each app that keeps dependent data connects its
receivers in its `AppConfig.ready()` (NetBox's pattern): `retention.reactions` makes the
memories that depend on a removed member, document, collection or workspace unreachable at once,
in the cause's transaction, and erases them with receipts."""

from __future__ import annotations

from django.dispatch import Signal

#: Inside the transaction that ends a membership. kwargs: member.
member_removed = Signal()

#: Before a member row goes with its deleted user, outside the membership's own transaction (which
#: has ended it and sent `member_removed`). kwargs: member, actor. Receivers erase (not just mark)
#: what depends on the member now: the row and everything cascading from it go right after.
member_deleting = Signal()

#: Inside the transaction that deletes documents, before their rows go. kwargs: workspace_id,
#: document_ids, and collection_id when the whole collection goes (else None).
documents_deleting = Signal()

#: Inside the transaction that makes a workspace non-retaining. kwargs: workspace.
history_stopped = Signal()

#: Before a workspace's rows go, outside any transaction. kwargs: workspace, actor. Receivers
#: erase (not just mark) what depends on it, and answer how many memory versions they erased.
workspace_deleting = Signal()
