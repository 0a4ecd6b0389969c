"""Attack on the editable topic (edit_assistant_memory topic=): a snake_case topic is a name
stored as written, so it is checked for personal data (check_topic); the identifier cut-out of
5077f25 lets a member hide a card or a national phone in it by padding the digits to 32 hex or
26 Crockford characters. Topics are read without the identifier cut-out, so the padded forms are refused."""

from __future__ import annotations

import pytest

from core.errors import ApiError
from memoryapp.assistant import check_topic


def test_a_bare_card_topic_is_refused():
    with pytest.raises(ApiError):
        check_topic("card_4111111111111111")


@pytest.mark.parametrize("topic", ["card_4111111111111111aaaaaaaaaaaaaaaa", "phone_0412345678abcdefghjkmnpqrs"])
def test_a_card_or_phone_dressed_as_an_identifier_is_refused(topic):
    with pytest.raises(ApiError):
        check_topic(topic)
