"""Masking tried as an attacker would (issue 13 §3, SPEC §4.1): secrets in the forms people
paste, addresses and numbers hidden by Unicode, and a benign set that must come back unchanged.
Plain pytest + hypothesis, no Django."""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryapp.masking import PLACEHOLDERS, contains_personal_data, is_effectively_empty, mask

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)

# --------------------------------------------------------------------------------------------
# The classes reported on main, each with the whole value masked
# --------------------------------------------------------------------------------------------
EXACT = [
    ('{"password": "S3cr3t!x"}', '{"password": "[SECRET]"}'),
    ("db_password=Hunter2!", "db_password=[SECRET]"),
    ("PGPASSWORD=xyzzy psql -h db", "PGPASSWORD=[SECRET] psql -h db"),
    ("my password is swordfish", "my password is [SECRET]"),
    ("password: correct horse battery staple", "password: [SECRET]"),
    ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key=[SECRET]"),
    ("MY_API_KEY=abcdef123456", "MY_API_KEY=[SECRET]"),
    (
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=abc+def/ghi123==;EndpointSuffix=core.windows.net",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=[SECRET];EndpointSuffix=core.windows.net",
    ),
    ("GITHUB_TOKEN=abcdef1234567890", "GITHUB_TOKEN=[SECRET]"),
    ("postgres://dana:pw@db.internal/app", "postgres://dana:[SECRET]@db.internal/app"),
    ("mysql://root:p@ss:w0rd@10.0.0.5:3306/shop", "mysql://root:[SECRET]@10.0.0.5:3306/shop"),
    ("パスワードはhunter2です。", "パスワードは[SECRET]です。"),
    ("パスワードは「さくら さくら」です", "パスワードは「[SECRET]」です"),
    ("josé.pérez@example.com", "[EMAIL]"),
    ("write to dana@exämple.com", "write to [EMAIL]"),
    ("почта дана@пример.рф", "почта [EMAIL]"),
    ("dana@example。com", "[EMAIL]"),
    ("da\u200bna@exa\u200dmple.com", "[EMAIL]"),
    ("dana [at] example [dot] com", "[EMAIL]"),
    ("call 212-555-0123 x3682", "call [PHONE]"),
    ("+1 212 555 0123 ext. 12 please", "[PHONE] please"),
    ("03-1234-5678 内線 123", "[PHONE]"),
    ("001-271-861-1879", "[PHONE]"),
    ("011 972 54 123 4567", "[PHONE]"),
    ("054\u200b123\u200b4567", "[PHONE]"),
    ("054\u00ad123\u00ad4567", "[PHONE]"),
    ("054_123_4567", "[PHONE]"),
    ("054·123·4567", "[PHONE]"),
    ("17-0392-1747", "[NUMBER]"),
    ("(00566) 53081", "[PHONE]"),
    ("call 555-1234 tonight", "call [PHONE] tonight"),
    ("電話 1234-5678 まで", "電話 [PHONE] まで"),
    ("4111.1111.1111.1111", "[CARD]"),
    ("4111/1111/1111/1111", "[CARD]"),
    ("4111_1111_1111_1111", "[CARD]"),
    ("4111  1111  1111  1111", "[CARD]"),
    ("6762-1714-5215", "[CARD]"),
    ("ID 123 456 782", "ID [IL_ID]"),
    ("IBAN DE89-3704-0044-0532-0130-00", "IBAN [BANK_ACCOUNT]"),
    ("SSN 123-45-6789", "SSN [NUMBER]"),
    ("My SSN is 123 45 6789.", "My SSN is [NUMBER]."),
    ("//registry.npmjs.org/:_authToken=abcd1234-ef56-7890-abcd-ef1234567890", "//registry.npmjs.org/:_authToken=[SECRET]"),
    ("Passwort: geheim123, danke", "Passwort: [SECRET], danke"),
    ("mot de passe : abc123", "mot de passe : [SECRET]"),
    ("Authorization: Basic ZGFuYTpodW50ZXIy", "Authorization: Basic [SECRET]"),
    ("run with --password hunter2 --verbose", "run with --password [SECRET] --verbose"),
    ("wifi password: Blue Sky 42, guest network", "wifi password: [SECRET], guest network"),
    ("the password for the router is admin123", "the password for the router is [SECRET]"),
    ("export SMTP_PASS='p a s s'", "export SMTP_PASS='[SECRET]'"),
    ('client_secret: "abc def"', 'client_secret: "[SECRET]"'),
    ("token=abc123def456&user=dana", "token=[SECRET]&user=dana"),
]


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
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    assert mask("my key:\n" + key + "-----END OPENSSH PRIVATE KEY-----\nthanks").text == "my key:\n[SECRET]\nthanks"
    assert mask("my key:\n" + key).text == "my key:\n[SECRET]"


# --------------------------------------------------------------------------------------------
# Secrets in every form people paste, generated
# --------------------------------------------------------------------------------------------
password_alphabet = string.ascii_letters + string.digits + "!@#$%^&*()_+-=?~"
passwords = st.text(password_alphabet, min_size=6, max_size=24).filter(lambda v: not v.startswith(("$", "-", "=")) and v.strip("*") != "")
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
    ["{label}={value}", "{label}: {value}", '"{label}": "{value}"', "{label} = '{value}'", "export {label}={value}", "{label}:={value}", '{label} => "{value}"', "<{label}>{value}</{label}>"]
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
@given(st.lists(st.sampled_from(["correct", "horse", "battery", "staple", "purple", "monkey", "dishwasher", "Tokyo", "rain"]), min_size=2, max_size=6))
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
@given(st.sampled_from(VALUES), st.lists(st.tuples(st.integers(1, 40), st.sampled_from(INVISIBLES)), min_size=1, max_size=4))
def test_invisible_characters_do_not_hide_a_value(pair, inserts):
    value, kind = pair
    hidden = value
    for position, ch in inserts:
        position = 1 + position % (len(hidden) - 1)
        hidden = hidden[:position] + ch + hidden[position:]
    result = mask(f"Note: {hidden} ok")
    assert result.text == f"Note: {PLACEHOLDERS[kind]} ok" or kind in ("PHONE",) and result.text in ("Note: [PHONE] ok", "Note: [NUMBER] ok"), (hidden, result)


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
        "\U0001d429\U0001d41a\U0001d42c\U0001d42c\U0001d430\U0001d428\U0001d42b\U0001d41d: hunter2",  # mathematical bold
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
BENIGN = [
    "The meeting moved to 2024-05-03 at 10:30.",
    "Flight LH 401 leaves at 14:05 from gate B22.",
    "Dana's room is 1204 on floor 12.",
    "Order #48213 shipped on 3 May 2024.",
    "The jacket costs $129.99, down from $159.00.",
    "We upgraded to Python 3.11.7 and Django 5.2.1.",
    "The train at 07:45 arrives at 09:12.",
    "She runs 5 km every morning at 6:30.",
    "Budget for Q3 is €12,500 and the deadline is 30/09/2024.",
    "Invoice INV-2024-0012 is due on 2024-06-01.",
    "Call back at 9.",
    "Room 305 and room 306 are booked for 2 nights.",
    "Version 10.0.19045.3693 of Windows is installed.",
    "Flight UA 88 from SFO lands at 6:45 pm.",
    "Ticket ABC-1234 was closed after 3 days.",
    "The recipe needs 250 g flour, 2 eggs and 100 ml milk.",
    "He was born in 1987 and moved to Berlin in 2015.",
    "The library opens 9:00-17:30, Monday to Friday.",
    "Temperature was 23.5°C with 60% humidity.",
    "Our order id is A-7731 and the tracking note says 2 parcels.",
    "Prefers seat 14C on flights longer than 3 hours.",
    "The conference runs from 2024-10-14 to 2024-10-17.",
    "Chapter 12, pages 201-245, is the assignment.",
    "Price went from ¥12,000 to ¥9,800 in the sale.",
    "Release 2.10.3 fixed bug #987 and #1002.",
    "The bus number 42 stops at 8:10 and 8:40.",
    "Score was 98/100 and the ratio 3:2.",
    "Dinner for 4 at 19:30 on Friday, table 7.",
    "Wants 2 tickets for the 21:00 show on 12/24.",
    "The password is required for the admin panel.",
    "The token expires in 3600 seconds.",
    "Max tokens: 4096 per request.",
    "The key ingredient is 2 tbsp of miso.",
    "Coordinates 35.6812, 139.7671 mark Tokyo Station.",
    "ISBN 978-3-16-148410-0 is the textbook.",
    "Gate closes 20 minutes before departure at 11:50.",
    "Weekly standup moved from 10:00 to 10:15 UTC.",
    "The model has 7 billion parameters and a 128k context.",
    "The router sits at 192.168.100.200 on the office network.",
    "Shoe size 42, jacket size 50.",
    "Her flight NH 7 departs 2024-12-01 17:25 from terminal 1.",
    "Parking spot P3-118 is reserved until 18:00.",
    "会議は2024年5月3日の10時30分からです。",
    "JAL 123便は14時05分に出発します。",
    "部屋番号は1204で、12階にあります。",
    "注文番号#48213は5月3日に発送されました。",
    "価格は1,280円（税込）です。",
    "Pythonを3.11.7にアップデートしました。",
    "電車は7時45分に出て9時12分に着きます。",
    "毎朝6時半に5キロ走ります。",
    "締め切りは2024/09/30で、予算は12万円です。",
    "パスワードを忘れたので再設定しました。",
    "口座を開設しました。",
    "明日は10時から会議です。予算は1,200万円。",
    "新幹線のぞみ21号、8号車12番A席を予約しました。",
    "バージョン2.10.3でバグ#987が直りました。",
    "気温は23.5度、湿度は60%でした。",
    "4名で19時30分に予約、テーブル7番です。",
    "第12章の201〜245ページが課題です。",
    "バスは8時10分と8時40分に来ます。",
]


def test_the_benign_set_has_fifty_sentences_with_numbers_in_english_and_japanese():
    assert len(BENIGN) >= 50
    assert all(any(ch.isdigit() for ch in text) or "パスワード" in text or "口座" in text or "password" in text for text in BENIGN)
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
    st.text(alphabet=st.sampled_from(list("0123456789 -+()./:@#_=\"'abcXYZパスワード：は、。\u200b\u00ad·xext")), max_size=120),
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
    ["dana@example.com", "054-123-4567, 4111 1111 1111 1111", "「ghp_0123456789abcdefghijABCDEFGHIJ012345」", "da\u200bna@example.com。", "+1 212 555 0123 ext. 12"],
)
def test_nothing_but_placeholders_is_effectively_empty(text):
    assert is_effectively_empty(mask(text).text)


@pytest.mark.parametrize("text", ["call 555-1234 tonight", "my password is swordfish", "パスワードはhunter2です。"])
def test_words_around_a_value_are_content(text):
    assert not is_effectively_empty(mask(text).text)
