"""Masking tried as an attacker would (issue 13 §3, SPEC §4.1): secrets in the forms people
paste, addresses and numbers hidden by Unicode, and a benign set that must come back unchanged.
Plain pytest + hypothesis, no Django."""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryapp.masking import PLACEHOLDERS, contains_personal_data, is_effectively_empty, mask
from tests.masking.known_texts import BENIGN, EXACT

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)

# --------------------------------------------------------------------------------------------
# The classes reported on main, each with the whole value masked
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", EXACT)
def test_reported_classes_are_masked_whole(text, expected):
    result = mask(text)
    assert result.text == expected, result
    assert result.kinds, result


TOKENS = [
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVW",
    "glpat-abcdefghij0123456789",
    "xoxb-123456789012-123456789012-abcdefghijklmnopqrstuvwx",
    "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
    "sk_live_abcdefghijklmnopqrstuvwx",
    "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
    "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    "ACa1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6",
    "0123456789abcdef0123456789abcdef-us12",
    "123456789:AAbcdefghijklmnopqrstuvwxyz0123456789",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
]


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("template", ["{}", "use {} for deploys", "トークンは{}です。", "key: {}", "「{}」"])
def test_known_token_shapes_are_masked_whole(token, template):
    result = mask(template.format(token))
    assert "SECRET" in result.kinds, result
    assert result.text == template.format("[SECRET]"), result


def test_private_key_blocks_are_masked_even_when_cut_short():
    key = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    )
    assert mask("my key:\n" + key + "-----END OPENSSH PRIVATE KEY-----\nthanks").text == "my key:\n[SECRET]\nthanks"
    assert mask("my key:\n" + key).text == "my key:\n[SECRET]"


# --------------------------------------------------------------------------------------------
# Secrets in every form people paste, generated
# --------------------------------------------------------------------------------------------
password_alphabet = string.ascii_letters + string.digits + "!@#$%^&*()_+-=?~"
passwords = st.text(password_alphabet, min_size=6, max_size=24).filter(
    lambda v: not v.startswith(("$", "-", "=")) and v.strip("*") != ""
)
labels = st.sampled_from(
    [
        "password",
        "Password",
        "PASSWORD",
        "db_password",
        "PGPASSWORD",
        "MYSQL_ROOT_PASSWORD",
        "pwd",
        "passwd",
        "api_key",
        "API_KEY",
        "apiKey",
        "client_secret",
        "secret",
        "auth_token",
        "access_token",
        "GITHUB_TOKEN",
        "AccountKey",
        "secret_key",
    ]
)
forms = st.sampled_from(
    [
        "{label}={value}",
        "{label}: {value}",
        '"{label}": "{value}"',
        "{label} = '{value}'",
        "export {label}={value}",
        "{label}:={value}",
        '{label} => "{value}"',
        "<{label}>{value}</{label}>",
    ]
)


@SETTINGS
@given(labels, forms, passwords.filter(lambda v: any(c.isdigit() for c in v) and any(c.isalpha() for c in v)))
def test_assignments_mask_the_whole_value(label, form, value):
    if form.startswith("<") and ("<" in value or ">" in value):
        return
    text = "config: " + form.format(label=label, value=value) + "\nnext line"
    result = mask(text)
    assert value not in result.text, result
    assert "SECRET" in result.kinds, result
    assert result.text.endswith("\nnext line"), result


@SETTINGS
@given(
    st.sampled_from(
        [
            "my password is {}",
            "the password was {} .",
            "Password: {}",
            "password for the wifi is {}",
            "pwd {}",
            "PIN: {}",
            "パスワードは{}です",
            "パスワード：{}",
            "暗証番号は{}です",
            "הסיסמה שלי היא {}",
            "passcode = {}",
            "Passwort: {}",
        ]
    ),
    passwords.filter(lambda v: any(c.isdigit() for c in v)),
)
def test_prose_passwords_are_masked(template, value):
    result = mask(template.format(value))
    assert value not in result.text, result
    assert "SECRET" in result.kinds


@SETTINGS
@given(
    st.lists(
        st.sampled_from(["correct", "horse", "battery", "staple", "purple", "monkey", "dishwasher", "Tokyo", "rain"]),
        min_size=2,
        max_size=6,
    )
)
def test_multi_word_passphrases_after_password_colon_are_masked_whole(words):
    phrase = " ".join(words)
    for text in (f"password: {phrase}", f"Wifi password: {phrase}\nroom 12", f'passphrase = "{phrase}"'):
        result = mask(text)
        assert all(word not in result.text for word in words), result


# --------------------------------------------------------------------------------------------
# Unicode does not hide a value
# --------------------------------------------------------------------------------------------
INVISIBLES = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200e", "\u2061"]
VALUES = [
    ("dana.levi@example.com", "EMAIL"),
    ("054-123-4567", "PHONE"),
    ("+44 20 7946 0958", "PHONE"),
    ("4111 1111 1111 1111", "CARD"),
    ("039337423", "IL_ID"),
    ("DE89370400440532013000", "BANK_ACCOUNT"),
    ("ghp_0123456789abcdefghijABCDEFGHIJ012345", "SECRET"),
]


@SETTINGS
@given(
    st.sampled_from(VALUES),
    st.lists(st.tuples(st.integers(1, 40), st.sampled_from(INVISIBLES)), min_size=1, max_size=4),
)
def test_invisible_characters_do_not_hide_a_value(pair, inserts):
    value, kind = pair
    hidden = value
    for position, ch in inserts:
        position = 1 + position % (len(hidden) - 1)
        hidden = hidden[:position] + ch + hidden[position:]
    result = mask(f"Note: {hidden} ok")
    assert (
        result.text == f"Note: {PLACEHOLDERS[kind]} ok"
        or kind in ("PHONE",)
        and result.text in ("Note: [PHONE] ok", "Note: [NUMBER] ok")
    ), (hidden, result)


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


@pytest.mark.parametrize("value, kind", VALUES)
def test_full_width_forms_do_not_hide_a_value(value, kind):
    result = mask("メモ：" + _full_width(value) + "です")
    assert result.text == "メモ：" + PLACEHOLDERS[kind] + "です", result


@pytest.mark.parametrize(
    "text",
    [
        "p\u0430ssword: hunter2",  # Cyrillic а
        "passw\u043erd: hunter2",  # Cyrillic о
        # mathematical bold
        "\U0001d429\U0001d41a\U0001d42c\U0001d42c\U0001d430\U0001d428\U0001d42b\U0001d41d: hunter2",
        "ｐａｓｓｗｏｒｄ＝ｈｕｎｔｅｒ２",
    ],
)
def test_look_alike_labels_do_not_hide_a_secret(text):
    result = mask(text)
    assert "hunter2" not in result.text and "ｈｕｎｔｅｒ２" not in result.text, result
    assert result.kinds == ("SECRET",)


def test_words_wholly_in_cyrillic_or_greek_are_left_as_written():
    text = "Дана любит кофе, Ελένη προτιμά τσάι."
    assert mask(text).text == text


# --------------------------------------------------------------------------------------------
# Not over-masking: at least 50 sentences with numbers, English and Japanese, come back as written
# --------------------------------------------------------------------------------------------


def test_the_benign_set_has_fifty_sentences_with_numbers_in_english_and_japanese():
    assert len(BENIGN) >= 50
    assert all(
        any(ch.isdigit() for ch in text) or "パスワード" in text or "口座" in text or "password" in text
        for text in BENIGN
    )
    assert sum(any("\u3040" <= ch <= "\u30ff" for ch in text) for text in BENIGN) >= 15


@pytest.mark.parametrize("text", BENIGN)
def test_benign_sentences_come_back_unchanged(text):
    result = mask(text)
    assert result.text == text, result
    assert not contains_personal_data(text)


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------
attack_texts = st.one_of(
    st.sampled_from([t for t, _ in EXACT] + TOKENS + BENIGN),
    st.builds(lambda a, b: a + " " + b, st.sampled_from([t for t, _ in EXACT]), st.sampled_from(BENIGN)),
    st.text(
        alphabet=st.sampled_from(list("0123456789 -+()./:@#_=\"'abcXYZパスワード：は、。\u200b\u00ad·xext")),
        max_size=120,
    ),
)


@SETTINGS
@given(attack_texts)
def test_same_input_same_output_and_idempotent(text):
    first = mask(text)
    assert mask(text) == first
    again = mask(first.text)
    assert again.text == first.text and again.kinds == ()
    assert contains_personal_data(text) == (first.text != text)


@pytest.mark.parametrize(
    "text",
    [
        "dana@example.com",
        "054-123-4567, 4111 1111 1111 1111",
        "「ghp_0123456789abcdefghijABCDEFGHIJ012345」",
        "da\u200bna@example.com。",
        "+1 212 555 0123 ext. 12",
    ],
)
def test_nothing_but_placeholders_is_effectively_empty(text):
    assert is_effectively_empty(mask(text).text)


@pytest.mark.parametrize("text", ["call 555-1234 tonight", "my password is swordfish", "パスワードはhunter2です。"])
def test_words_around_a_value_are_content(text):
    assert not is_effectively_empty(mask(text).text)
