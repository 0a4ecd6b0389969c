"""The identifiers people write every day, and everyday numbers that are none, for
tests/masking/test_catalogue.py and bench/masking_corpus.py. Seeded, so every run sees the same
corpus; no Django.

- ``build_catalogue_corpus``: values of each class (``national_id``, ``ssn_label``, ``email_ja``,
  ``comma_groups``, ``mobile``) in many locales and 8 forms (prose, JSON, key=value, CSV, list item,
  parenthesised, quoted, table row). Every national identifier is checked with the country's
  python-stdnum module before it goes in, and the templates hold no digits, so whatever digits are
  left after masking came from the value.
- ``build_everyday_corpus``: sentences with numbers that are not personal data (rooms, prices,
  times, timestamps, versions, order ids under ten digits…); masking must leave them as written.

What each class holds: docs/masking.md "Tests".
"""

from __future__ import annotations

import importlib
import json
import random
import re
from dataclasses import dataclass

import phonenumbers
from faker import Faker
from stdnum import luhn

FORMS = ("prose", "json", "kv", "csv", "list", "paren", "quoted", "table")
CLASSES = ("national_id", "ssn_label", "email_ja", "comma_groups", "mobile")


@dataclass(frozen=True)
class Sample:
    cls: str
    locale: str
    form: str
    value: str
    text: str


# locale -> (stdnum module, how the value is made: a Faker method name, or ("digits", length))
NATIONAL_IDS: dict[str, tuple[str | None, object]] = {
    "en_US": ("us.ssn", "ssn"),
    "en_GB": (None, "ssn"),  # National Insurance number: python-stdnum 2.2 has no module (shape only)
    "it_IT": ("it.codicefiscale", "ssn"),
    "nl_NL": ("nl.bsn", "ssn"),
    "fr_FR": ("fr.nir", "ssn"),
    "pl_PL": ("pl.pesel", "ssn"),
    "sv_SE": ("se.personnummer", "ssn"),
    "fi_FI": ("fi.hetu", "ssn"),
    "no_NO": ("no.fodselsnummer", "ssn"),
    "pt_BR": ("br.cpf", "ssn"),
    "et_EE": ("ee.ik", "ssn"),
    "hr_HR": ("hr.oib", "ssn"),
    "ro_RO": ("ro.cnp", "ssn"),
    "tr_TR": ("tr.tckimlik", "ssn"),
    "zh_CN": ("cn.ric", "ssn"),
    "ko_KR": ("kr.rrn", "ssn"),
    "he_IL": ("il.idnr", "ssn"),
    "nl_BE": ("be.nn", "ssn"),
    "fr_CH": ("ch.ssn", "ssn"),
    "en_CA": ("ca.sin", "ssn"),
    "de_AT": ("at.vnr", "ssn"),
    "el_GR": ("gr.amka", "ssn"),
    "uk_UA": ("ua.rntrc", "ssn"),
    "es_ES": ("es.dni", "nif"),
    "en_IN": ("in_.aadhaar", "aadhaar_id"),
    "da_DK": ("dk.cpr", ("cpr", 10)),
    "de_DE": ("de.idnr", ("digits", 11)),
    "cs_CZ": ("cz.rc", ("cpr", 10)),
    "lv_LV": ("lv.pvn", "ssn"),
    "ja_JP": ("jp.in_", ("digits", 12)),
}
LOCALES = tuple(NATIONAL_IDS)
#: regions whose mobiles are generated (the countries of the locales, where Faker makes mobiles)
MOBILE_LOCALES = (
    "pl_PL",
    "da_DK",
    "nl_NL",
    "de_DE",
    "fr_FR",
    "it_IT",
    "es_ES",
    "sv_SE",
    "no_NO",
    "fi_FI",
    "en_GB",
    "ja_JP",
    "he_IL",
    "pt_BR",
    "ko_KR",
    "zh_CN",
)

# -- forms: the label is the class's word in a neutral spelling; no digits anywhere --------------
_LABELS = {"national_id": "id", "ssn_label": "SSN", "email_ja": "メール", "comma_groups": "number", "mobile": "contact"}


def _in_form(form: str, label: str, value: str, rng: random.Random) -> str:
    if form == "prose":
        return rng.choice(
            ("Here it is: {} — keep it safe.", "{}", "I wrote {} on the form", "{} is the one they asked for.")
        ).format(value)
    if form == "json":
        return json.dumps({label: value, "note": "from the form"}, ensure_ascii=False)
    if form == "kv":
        return f"{label}={value}; source=form"
    if form == "csv":
        return f'Dana Levi,{rng.choice(("", "x,"))}"{value}",yes' if "," in value else f"Dana Levi,{value},yes"
    if form == "list":
        return f"- {label}: {value}\n- done"
    if form == "paren":
        return f"the clerk noted it ({value}) yesterday"
    if form == "quoted":
        return f"she said “{value}” twice"
    return f"| {label} | {value} |"


# -- values -------------------------------------------------------------------------------------
def _stdnum(name: str):
    return importlib.import_module("stdnum." + name)


def _cpr_like(rng: random.Random) -> str:
    return f"{rng.randint(1, 28):02d}{rng.randint(1, 12):02d}{rng.randint(0, 99):02d}{rng.randint(0, 9999):04d}"


def national_id(fake: Faker, rng: random.Random, locale: str) -> str:
    module_name, how = NATIONAL_IDS[locale]
    module = _stdnum(module_name) if module_name else None
    for _ in range(10_000):
        if isinstance(how, str):
            value = str(getattr(fake, how)())
        elif how[0] == "cpr":
            value = _cpr_like(rng)
            value = value if rng.random() < 0.5 else f"{value[:6]}-{value[6:]}"
        else:
            value = str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(how[1] - 1))
        if module is None or module.is_valid(value):
            return value
    raise AssertionError(f"no valid {module_name} drawn")


_SSN_LABELS = ("SSN", "SSN:", "SSN #", "Social Security number", "social security no.", "my SSN is", "SSN=")


def ssn_invalid_range(rng: random.Random) -> str:
    area = rng.choice((f"9{rng.randint(0, 99):02d}", "000", "666", f"{rng.randint(1, 899):03d}"))
    group = "00" if area[0] not in "069" else f"{rng.randint(0, 99):02d}"
    serial = f"{rng.randint(0, 9999):04d}" if group != "00" else f"{rng.randint(1, 9999):04d}"
    sep = rng.choice(("-", " ", "-"))
    return f"{area}{sep}{group}{sep}{serial}"


_JA_AT = ("アットマーク", "アット", "＠", " アットマーク ", " アット ", "あっとまーく")
_JA_DOT = ("ドット", "．", " ドット ", "どっと")


def email_ja(fake: Faker, rng: random.Random) -> tuple[str, str]:
    local = re.sub(r"[^a-z0-9._]", "", fake.user_name().lower()).strip("._") or "dana"
    domain = rng.choice((fake.free_email_domain(), fake.domain_name()))
    dot = rng.choice(_JA_DOT)
    written_domain = domain.replace(".", dot) if rng.random() < 0.8 else domain
    return local, f"{local}{rng.choice(_JA_AT)}{written_domain}"


def comma_groups(fake: Faker, rng: random.Random, locale: str) -> str:
    pick = rng.randrange(3)
    if pick == 0:
        digits = fake.credit_card_number()
    elif pick == 1 and locale in MOBILE_LOCALES:
        digits = re.sub(r"\D", "", mobile(rng, locale))
    else:
        digits = re.sub(r"\D", "", national_id(fake, rng, locale))
    if len(digits) < 10:  # nine digits in ", " groups are three numbers of a list: a card instead
        digits = fake.credit_card_number()
    size = rng.choice((2, 3, 3, 4))
    groups = [digits[i : i + size] for i in range(0, len(digits), size)]
    if len(groups[-1]) < 2:
        groups[-2:] = [groups[-2] + groups[-1]]
    return ", ".join(groups)


def mobile(rng: random.Random, locale: str) -> str:
    """A valid mobile of the locale's country (phonenumbers' metadata), written in its national
    format: the region's example mobile with all but its first three digits drawn at random."""
    region = locale[-2:]
    national = str(phonenumbers.example_number_for_type(region, phonenumbers.PhoneNumberType.MOBILE).national_number)
    for _ in range(10_000):
        candidate = national[:3] + "".join(rng.choice("0123456789") for _ in range(len(national) - 3))
        number = phonenumbers.parse(candidate, region)
        if (
            phonenumbers.is_valid_number_for_region(number, region)
            and phonenumbers.number_type(number) == phonenumbers.PhoneNumberType.MOBILE
        ):
            return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL)
    raise AssertionError(f"no mobile for {region}")


def build_catalogue_corpus(seed: int = 33, per_cell: int = 10) -> list[Sample]:
    """``per_cell`` samples of each class in each locale and form (national identifiers and
    comma groups: every locale; SSN labels: every locale's template language is English, so en_US;
    Japanese e-mails: ja_JP; mobiles: MOBILE_LOCALES)."""
    rng = random.Random(seed)
    samples: list[Sample] = []
    for index, locale in enumerate(LOCALES):
        fake = Faker(locale)
        fake.seed_instance(seed * 100 + index)
        for form in FORMS:
            for _ in range(per_cell * 2):
                value = national_id(fake, rng, locale)
                samples.append(
                    Sample("national_id", locale, form, value, _in_form(form, _LABELS["national_id"], value, rng))
                )
            for _ in range(per_cell):
                value = comma_groups(fake, rng, locale)
                samples.append(
                    Sample("comma_groups", locale, form, value, _in_form(form, _LABELS["comma_groups"], value, rng))
                )
            if locale in MOBILE_LOCALES:
                for _ in range(per_cell * 2):
                    value = mobile(rng, locale)
                    samples.append(Sample("mobile", locale, form, value, _in_form(form, _LABELS["mobile"], value, rng)))
            if locale == "en_US":
                for _ in range(per_cell * 6):
                    value = ssn_invalid_range(rng)
                    written = f"{rng.choice(_SSN_LABELS)} {value}"
                    samples.append(
                        Sample("ssn_label", locale, form, value, _in_form(form, _LABELS["ssn_label"], written, rng))
                    )
            if locale == "ja_JP":
                for _ in range(per_cell * 6):
                    local, written = email_ja(fake, rng)
                    text = rng.choice(("連絡先は{}です。", "メールは{}までお願いします", "{}")).format(written)
                    samples.append(
                        Sample("email_ja", locale, form, local, _in_form(form, _LABELS["email_ja"], text, rng))
                    )
    return samples


def survivors(sample: Sample, masked: str) -> list[str]:
    """What of the value is still readable in the masked text (empty when nothing)."""
    if sample.cls == "email_ja":
        value = sample.value
        return [f"local part {value!r}"] if len(value) >= 3 and value in masked else []
    left = "".join(ch for ch in masked if ch.isdigit())
    letters = re.sub(r"[^A-Z]", "", sample.value)
    found = [f"{len(left)} digits left: {left!r}"] if len(left) >= 4 else []
    if len(letters) >= 4 and letters in re.sub(
        r"[^A-Z]",
        "",
        masked.replace("[NUMBER]", "")
        .replace("[PHONE]", "")
        .replace("[CARD]", "")
        .replace("[IL_ID]", "")
        .replace("[SECRET]", "")
        .replace("[EMAIL]", "")
        .replace("[BANK_ACCOUNT]", ""),
    ):
        found.append(f"letters left: {letters!r}")
    return found


# -- everyday sentences ---------------------------------------------------------------------------
def _ascending(rng: random.Random, n: int, low: int, high: int, step: int = 1) -> list[int]:
    start = rng.randint(low, high)
    return [start + i * step for i in range(n)]


def _everyday_makers(rng: random.Random) -> dict[str, list]:
    r = rng.randint

    def rooms():
        nums = _ascending(rng, r(3, 6), 100, 950, rng.choice((1, 1, 2, 10)))
        sep = rng.choice((" ", ", ", " ", "/", " and "))
        return rng.choice(
            (
                "Room numbers {}",
                "rooms {} are booked",
                "We have rooms {} on hold",
                "Zimmer {} sind frei",
                "chambres {}",
                "部屋 {}",
            )
        ).format(sep.join(map(str, nums)))

    def seats():
        nums = _ascending(rng, r(3, 6), 1, 60)
        return rng.choice(("Seats {} in row F", "seat numbers {}", "our seats are {} together")).format(
            rng.choice((" ", ", ")).join(map(str, nums))
        )

    def pages():
        nums = sorted(rng.sample(range(1, 900), r(3, 6)))
        return rng.choice(("see pages {}", "Read pp. {} before class", "pages {} have the tables", "Seiten {}")).format(
            rng.choice((" ", ", ")).join(map(str, nums))
        )

    def prices():
        return rng.choice(
            (
                "It cost ${:,}.{:02d} in total",
                "The flat is €{:,} per month ({:02d} cents extra)",
                "Paid {:,} yen plus {} tax",
                "price {:,}.{:02d} EUR",
            )
        ).format(r(1, 2_000_000), r(0, 99))

    def times():
        return rng.choice(
            (
                "Meet at {:02d}:{:02d} tomorrow",
                "The train leaves at {}:{:02d}",
                "between {:02d}:{:02d} and eleven",
                "{}時{}分に集合",
            )
        ).format(r(0, 23), r(0, 59))

    def timestamps():
        ts = r(1_000_000_000, 2_100_000_000)
        return rng.choice(
            (
                "Timestamp {}",
                "created_at={}",
                "epoch {} in the log",
                "unix time {}",
                '"ts": {}',
                "last_modified: {}",
                "The Unix timestamp {} is when it started",
                "mtime {}",
            )
        ).format(ts if rng.random() < 0.8 else ts * 1000 + r(0, 999))

    def versions():
        return rng.choice(
            (
                "Upgrade to version {}.{}.{}",
                "Python {}.{}.{} fixed it",
                "build {}.{}.{}.{}",
                "v{}.{}.{} is out",
                "Android {}.{}.{} on the tablet",
            )
        ).format(r(0, 30), r(0, 30), r(0, 300), r(0, 9999))

    def scores():
        return rng.choice(
            (
                "final score {}–{}",
                "They won {} to {}",
                "scores were {} {} {} {}",
                "we got {}, {} and {} points",
                "ran {} km in {} minutes",
            )
        ).format(r(0, 120), r(0, 120), r(0, 120), r(0, 120))

    def dates():
        y, m, d = r(1950, 2030), r(1, 12), r(1, 28)
        return rng.choice(
            (
                f"on {y:04d}-{m:02d}-{d:02d}",
                f"due {d:02d}/{m:02d}/{y:04d}",
                f"born {d:02d}.{m:02d}.{y:04d}",
                f"{y}年{m}月{d}日に",
                f"{m}/{d}/{y} at {r(1, 12)} pm",
            )
        )

    def order_ids():
        oid = r(10_000, 999_999_999)
        return rng.choice(
            (
                "order #{}",
                "Order {} has shipped",
                "invoice {} is paid",
                "booking ref {}",
                "ticket {} was closed",
                "tracking number {} (parcel)",
                "Bestellnummer {}",
                "commande n° {}",
                "注文番号 {}",
                "pedido {}",
            )
        ).format(oid)

    def counts():
        return rng.choice(
            (
                "{} people came, {} stayed",
                "{} steps today",
                "population {:,}",
                "we sold {} units in {}",
                "{} km from home",
            )
        ).format(r(1, 99_999), r(1900, 2030))

    def years():
        return rng.choice(("from {} to {}", "in {}, {} and {}", "{}–{}", "the {} season and the {} one")).format(
            r(1900, 2030), r(1900, 2030), r(1900, 2030)
        )

    def codes():
        return rng.choice(
            (
                "flight LH {}",
                "bus {} then tram {}",
                "postcode {}",
                "Gate {}, terminal {}",
                "room {} on floor {}",
                "PIN-less door {}",
                "ext. of the building {}",
            )
        ).format(r(1, 9999), r(1, 99))

    return {n: f for n, f in locals().items() if callable(f) and n not in ("r",)}


def build_everyday_corpus(seed: int = 33, count: int = 1_200) -> list[tuple[str, str]]:
    """``count`` (kind, sentence) pairs, the kinds in turn."""
    rng = random.Random(seed)
    makers = _everyday_makers(rng)
    names = sorted(makers)
    return [(names[i % len(names)], makers[names[i % len(names)]]()) for i in range(count)]


def is_card(digits: str) -> bool:
    return 12 <= len(digits) <= 19 and luhn.is_valid(digits)
