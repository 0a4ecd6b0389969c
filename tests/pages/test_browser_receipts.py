"""The receipt chain's verification on the owner's receipts view (issue 17 §4), in a real browser
(`tests/pages/test_browser.py`'s machinery). Screenshots in both languages at 390 px and 1280 px:
an intact chain, and one a database edit broke."""

from __future__ import annotations

import pytest

from retention.models import DeletionReceipt
from tests.pages.headless import CHROMIUM, expect, shoot
from tests.support import make_agent

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install -y chromium)"),
    pytest.mark.django_db(transaction=True),
]

TEXT = {
    "en": {
        "intact": "Verified: chain intact",
        "count": "3 receipts, hashed and signed",
        "broken": "Chain broken at receipt #{pk} (position 2)",
        "why": "hash mismatch",
    },
    "ja": {
        "intact": "検証済み：チェーンは完全です",
        "count": "3 件の削除証明をハッシュ化・署名済み",
        "broken": "削除証明 #{pk}（位置 2）でチェーンが壊れています",
        "why": "ハッシュ不一致",
    },
}


@pytest.mark.parametrize("language", ["en", "ja"])
def test_the_receipts_view_shows_the_chain_intact_then_the_break(world, open_session, language):
    agent = make_agent(world.editor)
    for i in range(3):
        memory_id = agent.remember(namespace="n", key=f"k{i}", text=f"Note {i} about the Osaka office").json()[
            "memory"
        ]["id"]
        assert agent.forget(memoryId=memory_id).status_code == 200
    second = DeletionReceipt.objects.filter(workspace_ref=world.workspace.pk).order_by("chain_seq")[1]
    text = TEXT[language]
    session = open_session(language)
    session.login("owner@acme.test", "pw-owner-123")
    page = session.page
    page.goto(f"/w/{world.workspace.pk}/settings/ask-history/")
    status = page.locator("#chain-status")
    expect(status).to_contain_text(text["intact"])
    expect(status).to_contain_text(text["count"])
    shoot(session, f"receipt_chain_intact_{language}")
    DeletionReceipt.objects.filter(pk=second.pk).update(actor_label="someone with database access")
    page.reload()
    expect(status).to_contain_text(text["broken"].format(pk=second.pk))
    expect(status).to_contain_text(text["why"])
    expect(status).to_have_attribute("role", "alert")
    shoot(session, f"receipt_chain_broken_{language}")
