"""An e-mail address is masked whatever follows it: a hyphen, an underscore, a dot or any other
joiner people type after one ("john@example.com- thanks", "<uuid>-john@example.com-draft"). A
trailing hyphen once stopped the address from matching at all (a TLD followed by "-" was read as
the start of a longer label), so it was stored as written."""

from __future__ import annotations

from faker import Faker
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryapp.masking import mask, name_kinds
from memoryapp.masking.identifiers import _JOINERS

LOCALES = ("en_US", "de_DE", "fr_FR", "ja_JP", "ru_RU", "pl_PL", "pt_BR", "es_ES", "it_IT", "nl_NL", "ko_KR", "zh_CN")
ADDRESSES = []
for _locale in LOCALES:
    _fake = Faker(_locale)
    _fake.seed_instance(34)
    ADDRESSES += [_fake.email() for _ in range(10)] + [_fake.company_email() for _ in range(5)]
# what people type right after an address: the joiners of keys, and sentence punctuation
FOLLOWERS = sorted(set(_JOINERS) | set("!?)]}'\"。、）"))


@settings(max_examples=300, deadline=None)
@given(
    address=st.sampled_from(ADDRESSES),
    follower=st.sampled_from(FOLLOWERS),
    tail=st.sampled_from(["", " thanks", "draft", "2", " 連絡ください"]),
    lead=st.sampled_from(["", "mail ", "連絡先は", "to: "]),
)
def test_an_address_is_masked_whatever_follows_it(address, follower, tail, lead):
    text = f"{lead}{address}{follower}{tail}"
    result = mask(text)
    assert "EMAIL" in result.kinds, (text, result.text)
    assert "@" not in result.text and address.split("@")[1] not in result.text, (text, result.text)


@settings(max_examples=100, deadline=None)
@given(address=st.sampled_from(ADDRESSES), follower=st.sampled_from(sorted(_JOINERS.strip())))
def test_a_name_holding_an_address_is_refused_whatever_follows_it(address, follower):
    assert "EMAIL" in name_kinds(f"{address}{follower}")
    assert "EMAIL" in name_kinds(f"0190f1e2-7c3a-7b4d-9e5f-6a7b8c9d0e1f{follower}{address}{follower}")
