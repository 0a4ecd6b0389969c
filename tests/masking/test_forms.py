"""The forms issue 22 found stored in clear (SPEC §4.1): digit groups of any size, command-line
credentials, e-mails written out or disguised, labelled secrets in the product's users'
languages, local phone numbers after a phone word. Faker values in twelve locales, each in every
form (tests/masking/forms_corpus.py), must leave nothing readable; namespace, key and topic refuse the
same texts (their API paths are in tests/masking/test_end_to_end.py). No Django."""

from __future__ import annotations

import collections
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryapp.masking import contains_personal_data, mask
from tests.masking.forms_corpus import FORMS, LOCALES, build_forms_corpus, is_card, survivors

CORPUS = build_forms_corpus(seed=22)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_corpus_covers_twelve_locales_and_every_form():
    assert len(LOCALES) == 12 and {s.locale for s in CORPUS} == set(LOCALES)
    counts = collections.Counter((s.form, s.locale) for s in CORPUS)
    assert set(counts) == {(f, loc) for f in FORMS for loc in LOCALES}
    assert min(counts.values()) >= 50


@pytest.mark.parametrize("form", FORMS)
def test_no_generated_value_of_the_form_survives_masking(form):
    found = []
    for sample in CORPUS:
        if sample.form != form:
            continue
        result = mask(sample.text)
        left = survivors(sample, result.text)
        if left or not result.kinds:
            found.append((sample.locale, sample.text, result.text, left))
    assert found == [], f"{len(found)} survivors: {found[:15]}"


@pytest.mark.parametrize("form", FORMS)
def test_every_generated_text_is_refused_as_a_name(form):
    # namespace, key and topic use contains_personal_data, which must agree with mask()
    texts = [s.text for s in CORPUS if s.form == form]
    assert [t for t in texts if not contains_personal_data(t)] == []


def test_luhn_valid_digit_groups_are_cards_and_the_rest_numbers():
    groups = [s for s in CORPUS if s.form == "digits"]
    cards = [s for s in groups if is_card(s.value)]
    assert len(cards) >= 50
    assert [s.text for s in cards if "CARD" not in mask(s.text).kinds] == []
    plain = [s for s in groups if not is_card(s.value) and not re.sub(r"\D", "", s.value).startswith("0")]
    assert [s.text for s in plain if "CARD" in mask(s.text).kinds] == []


@pytest.mark.parametrize(
    "text, hidden",
    [
        ("411111 111111 1111", "411111"),
        ("4111,1111,1111,1111", "4111"),
        ("123456 7890", "123456"),
        ("wire to 123456 789012", "789012"),
        ("ref 2024-05-01-12345678", "12345678"),
        ("1234 - 5678 - 9012 - 3456", "9012"),
        ("1234 / 5678 / 90", "5678"),  # a date shape continued by its separator is no date
        ("mysql -u root -phunter2", "hunter2"),
        ("mysql --password=hunter2", "hunter2"),
        ("curl -u admin:hunter2 https://example.com", "hunter2"),
        ("sshpass -p hunter2 ssh dana@db", "hunter2"),
        ("PGPASSWORD=hunter2 psql -h db", "hunter2"),
        ("https://dana:hunter2@example.com/x", "hunter2"),
        ("dana at example dot com", "dana"),
        ("dana at example.com", "dana"),
        ("dana[at]example[.]com", "dana"),
        ("dana (at) example (dot) com", "dana"),
        ("dana @ example.com", "dana"),
        ("dana\u00a0@\u00a0example.com", "dana"),
        ('"dana"@example.com', "dana"),
        ('"dana levi"@example.com', "levi"),
        ("dana アット example ドット com", "dana"),
        ("passwort ist hunter2", "hunter2"),
        ("contraseña es hunter2", "hunter2"),
        ("mot de passe : hunter2", "hunter2"),
        ("パスワードは hunter2", "hunter2"),
        ("la password è hunter2", "hunter2"),
        ("a senha é hunter2", "hunter2"),
        ("hasło to hunter2", "hunter2"),
        ("비밀번호는 hunter2", "hunter2"),
        ("密码是hunter2", "hunter2"),
        ("Telefon 555 1234", "1234"),
        ("téléphone 55 12 34", "12 34"),
        ("전화 555-1234", "1234"),
        ("电话 5551234", "5551234"),
    ],
)
def test_each_reported_form_is_masked(text, hidden):
    result = mask(text)
    assert hidden not in result.text, result
    assert contains_personal_data(text)


# --- what must stay as written -----------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "We met on 2024-05-01 at 10:30 and again on 2024-06-01.",
        "It costs 1,299.00 and the other one 2,499.00.",
        "Upgraded to 1.2.3, then 10.0.19045.3693.",
        "I have 3, 4, 5 or 6 kids in the class.",
        "Pick 1, 2, 3, 4, 5, 6, 7, 8, 9 or 10.",
        "Coordinates 35.6812, 139.7671 mark Tokyo Station.",
        "pi is about 3.1415926",
        "Call me at home at 9, thanks.",
        "I was at home dot dot dot waiting.",
        "I bought it at a shop near the station.",
        "Das Passwort ist zu kurz.",
        "Mein Passwort ist falsch.",
        "le mot de passe est trop court",
        "la contraseña es incorrecta",
        "la password è sbagliata",
        "a senha é muito fraca",
        "het wachtwoord is onjuist",
        "hasło jest nieprawidłowe",
        "비밀번호를 잊어버렸어요.",
        "我忘记了密码。",
        "mkdir -p build && cp -p a b",
        "ssh -p 22 host and psql -p 5432 db",
        "docker run -u 1000:1000 image",
        "git push -u origin main",
        "Telefon klingelt um halb neun.",
        "Llama a tu madre.",
    ],
)
def test_everyday_text_near_the_new_forms_is_unchanged(text):
    assert mask(text).text == text


# --- cost ------------------------------------------------------------------------------------
hostile_units = st.sampled_from(
    [
        " at ",
        " dot ",
        "a",
        "@",
        " @ ",
        "[at]",
        "[.]",
        "(dot)",
        '"',
        "-p",
        " -u ",
        ":",
        "1",
        "12",
        "123456",
        " ",
        ",",
        ".",
        "/",
        "\u00a0",
        "\u200b",
        "passwort ist ",
        "密码是",
        "Telefon ",
        "アット",
        "ドット",
        "x",
    ]
)


@SETTINGS
@given(st.lists(hostile_units, min_size=1, max_size=400))
def test_generated_hostile_inputs_mask_idempotently(units):
    text = "".join(units)
    once = mask(text)
    assert mask(once.text).text == once.text
    assert contains_personal_data(text) == (once.text != text)


# --- the benign-change budget: at most 1 sentence in 1,000 changed ---------------------------
def test_everyday_text_stays_within_the_benign_change_budget():
    from tests.masking import everyday_corpus as everyday

    folder = everyday.locomo_dir()
    assert folder is not None, (
        "LoCoMo conversations not found: set LOCOMO_DIR or place shared/data/locomo-dev beside the checkout"
    )
    locomo = everyday.locomo_sentences(folder)
    shipped = everyday.shipped_sentences()
    older = everyday.older_test_sentences()
    assert len(locomo) >= 9000 and len(shipped) >= 1400
    assert {
        line.split(", ")[-1]
        for line in everyday.EVERYDAY_FILE.read_text(encoding="utf-8").splitlines()
        if line.startswith("# generated, ")
    } == set(LOCALES)
    for name, sentences in (("LoCoMo", locomo), ("shipped", shipped), ("older tests", older)):
        changes = everyday.changed(sentences)
        assert len(changes) <= len(sentences) * everyday.BUDGET, (name, len(changes), changes[:10])
