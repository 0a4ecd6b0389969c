"""Generated personal data inside English and Japanese sentences (SPEC §4.1), for the masking
tests: Faker values in six locales plus synthetic tokens of known shapes, seeded so that every
run sees the same corpus. The templates hold no digits and no e-mail-like text, so whatever
digits or address parts are left after masking came from the value."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
from dataclasses import dataclass

from faker import Faker

LOCALES = ("en_US", "en_GB", "de_DE", "fr_FR", "ja_JP", "he_IL")


@dataclass(frozen=True)
class Sample:
    category: str  # phone, email, card, iban, bban, ssn, passport, password, token
    locale: str
    value: str  # the personal data as written in the text
    text: str  # the value inside a sentence


CONTACT_TEMPLATES = (
    "Please call me at {} tomorrow.",
    "You can reach Dana on {} after lunch.",
    "Contact: {}",
    "My details are {} (private).",
    "{}",
    "Send it to {}, thanks!",
    "連絡先は{}です。",
    "明日、{}に連絡してください。",
    "メモ：{}",
    "「{}」までお願いします。",
)
PHONE_TEMPLATES = CONTACT_TEMPLATES + (
    "call {} after six",
    "電話番号は{}です。",
    "携帯：{}",
    "Phone: {}",
    "My mobile is {} now.",
)
CARD_TEMPLATES = (
    "My card is {} and it expires soon.",
    "card number: {}",
    "カード番号は{}です。",
    "Paid with {} yesterday.",
    "{}",
)
IBAN_TEMPLATES = ("IBAN {} please.", "Wire it to {} today.", "振込先は{}です。", "Account: {}", "{}")
BBAN_TEMPLATES = (
    "bank account {} at the local branch",
    "account number: {}",
    "口座番号は{}です。",
    "My acct no. {} is new.",
    "Konto {} bitte",
)
SSN_TEMPLATES = ("My ID number is {}.", "ID: {}", "SSN {} on file", "身分証の番号は{}です。", "{}")
PASSPORT_TEMPLATES = (
    "passport number {}",
    "My passport is {}.",
    "Passport No.: {}",
    "パスポート番号は{}です。",
    "passport {} expires soon",
)
PASSWORD_TEMPLATES = (
    "my password is {}",
    "password: {}",
    '{{"password": "{}"}}',
    "DB_PASSWORD={}",
    "PGPASSWORD={} psql -h db",
    "パスワードは{}です。",
    "The wifi password is {} so keep it safe.",
    "login with user dana and pwd {}",
    "export SMTP_PASS='{}'",
    "mysql://dana:{}@db.internal/app",
)
TOKEN_TEMPLATES = (
    "token: {}",
    "GITHUB_TOKEN={}",
    "Authorization: Bearer {}",
    "use {} for the deploy",
    "APIキーは{}です。",
    '{{"api_key": "{}"}}',
    "{}",
    "the key is {} (rotate monthly)",
)


def _spaced(digits: str, sep: str) -> str:
    if len(digits) == 15:  # Amex 4-6-5
        return sep.join((digits[:4], digits[4:10], digits[10:]))
    return sep.join(digits[i : i + 4] for i in range(0, len(digits), 4))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _tokens(rng: random.Random, count: int) -> list[str]:
    alnum = string.ascii_letters + string.digits
    upper_digits = string.ascii_uppercase + string.digits
    hex_lower = "0123456789abcdef"

    def pick(alphabet: str, n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    makers = (
        lambda: "AKIA" + pick(upper_digits, 16),
        lambda: "ghp_" + pick(alnum, 36),
        lambda: "github_pat_" + pick(alnum, 22) + "_" + pick(alnum, 59),
        lambda: "glpat-" + pick(alnum + "-_", 20),
        lambda: "xoxb-" + pick(string.digits, 12) + "-" + pick(string.digits, 12) + "-" + pick(alnum, 24),
        lambda: "sk-proj-" + pick(alnum, 40) + rng.choice(string.digits),
        lambda: "sk_live_" + pick(alnum, 24),
        lambda: "AIza" + pick(alnum + "-_", 35),
        lambda: "SG." + pick(alnum + "-_", 22) + "." + pick(alnum + "-_", 43),
        lambda: "npm_" + pick(alnum, 36),
        lambda: "hf_" + pick(alnum, 34),
        lambda: "AC" + pick(hex_lower, 32),
        lambda: pick(hex_lower, 32) + "-us" + str(rng.randint(1, 20)),
        lambda: str(rng.randint(10**8, 10**9 - 1)) + ":" + pick(alnum + "-_", 35),
        lambda: "AccountKey=" + base64.b64encode(rng.randbytes(64)).decode(),
        lambda: (
            _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
            + "."
            + _b64url(json.dumps({"sub": pick(alnum, 8), "iat": rng.randint(10**9, 2 * 10**9)}).encode())
            + "."
            + _b64url(hashlib.sha256(rng.randbytes(16)).digest())
        ),
        lambda: base64.b64encode(rng.randbytes(30)).decode(),  # an AWS-secret-like random blob (40 chars)
    )
    return [makers[i % len(makers)]() for i in range(count)]


def build_corpus(seed: int = 13, scale: int = 1) -> list[Sample]:
    """About 5,400 samples per scale unit (6 locales)."""
    rng = random.Random(seed)
    samples: list[Sample] = []

    def add(category: str, locale: str, value: str, templates: tuple[str, ...]) -> None:
        samples.append(Sample(category, locale, value, rng.choice(templates).format(value)))

    for index, locale in enumerate(LOCALES):
        fake = Faker(locale)
        fake.seed_instance(seed * 100 + index)
        for _ in range(240 * scale):
            add("phone", locale, fake.phone_number(), PHONE_TEMPLATES)
        for _ in range(120 * scale):
            add("email", locale, fake.email(), CONTACT_TEMPLATES)
        for _ in range(40 * scale):
            number = fake.credit_card_number()
            add("card", locale, number, CARD_TEMPLATES)
            add("card", locale, _spaced(number, " "), CARD_TEMPLATES)
            add("card", locale, _spaced(number, "-"), CARD_TEMPLATES)
        for _ in range(40 * scale):
            iban = fake.iban()
            add("iban", locale, iban, IBAN_TEMPLATES)
            add("iban", locale, " ".join(iban[i : i + 4] for i in range(0, len(iban), 4)), IBAN_TEMPLATES)
        for _ in range(40 * scale):
            add("bban", locale, fake.bban(), BBAN_TEMPLATES)
        for _ in range(60 * scale):
            add("passport", locale, fake.passport_number(), PASSPORT_TEMPLATES)
        for _ in range(100 * scale):
            add("password", locale, fake.password(length=rng.randint(8, 16)), PASSWORD_TEMPLATES)
        if locale == "he_IL":
            for _ in range(150 * scale):
                ssn = fake.ssn()
                written = rng.choice([ssn, f"{ssn[:3]} {ssn[3:6]} {ssn[6:]}", f"{ssn[:8]}-{ssn[8:]}"])
                add("ssn", locale, written, SSN_TEMPLATES)
        elif locale in ("en_US", "fr_FR"):
            for _ in range(60 * scale):
                add("ssn", locale, fake.ssn(), SSN_TEMPLATES)
    for token in _tokens(rng, 340 * scale):
        add("token", "-", token, TOKEN_TEMPLATES)
    return samples


def survivors(sample: Sample, masked: str) -> list[str]:
    """What of the value is still readable in the masked text (empty when nothing is)."""
    found: list[str] = []
    value = sample.value
    template_rest = sample.text.replace(value, "")
    if sample.category == "email":
        local = value.split("@")[0]
        if local.lower() in masked.lower() and local.lower() not in template_rest.lower():
            found.append(f"local part {local!r}")
        return found
    digits = [ch for ch in value if ch.isdigit()]
    left = [ch for ch in masked if ch.isdigit()]
    if len(digits) >= 4 and len(left) >= 4:
        found.append(f"{len(left)} digits left: {''.join(left)!r}")
    if sample.category in ("password", "token", "passport") or not digits:
        # no run of 5 characters of the value (that the sentence itself does not hold)
        for i in range(len(value) - 4):
            piece = value[i : i + 5]
            if piece in masked and piece not in template_rest and piece not in "[SECRET]":
                found.append(f"piece {piece!r}")
                break
    return found
