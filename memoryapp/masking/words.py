"""The words that label personal data, in the languages of the product's users (SPEC §4.1: "in
the languages of the product's users, not English alone"): English, Japanese, Hebrew, German,
French, Spanish, Italian, Portuguese, Dutch, Polish, Korean, Chinese (the twelve locales of the
generated tests), and Russian. Over ~400 lines on purpose: it is word lists, one block per kind.

Where the words come from:

- **Password words** are Django's own translations of "Password" and "password" (the
  ``django.contrib.auth`` catalogs, maintained by Django's translation teams), read from the
  ``.mo`` files of the installed Django with the standard library's ``gettext``: no Django set-up,
  and a new Django release brings its translators' corrections. Synonyms the catalogs do not use
  (German "Kennwort", Spanish "clave", French "mdp", Korean "비번"/"암호", Chinese "口令", the
  other Chinese script, Portuguese "senha" and "palavra-passe" both) are added in
  ``PASSWORD_SYNONYMS``, each with the reason.
- **Connectors** ("is", "ist", "est", "è", "to", "是", particles) and **phone words** are not in
  any maintained list this project found (CLDR has neither; phone words in detectors such as
  Presidio's are English only), so they are the table below: the copula and the colon-like
  words of each language's grammar, and the everyday nouns and verbs for telephone, mobile and
  calling. Each entry is one language's; a connector applies only after that language's label
  (Polish "to" after "hasło", never English "password to Dana").
"""

from __future__ import annotations

import gettext
import importlib.util
import re
from functools import cache
from pathlib import Path

from stopwords import get_stopwords

#: Django catalog language -> the language whose connectors apply after its password words.
_CATALOGS = {
    "de": "de",
    "fr": "fr",
    "es": "es",
    "it": "it",
    "pt": "pt",
    "pt_BR": "pt",
    "nl": "nl",
    "pl": "pl",
    "ko": "ko",
    "zh_Hans": "zh",
    "zh_Hant": "zh",
    "ja": "ja",
    "he": "he",
    "ru": "ru",
}

PASSWORD_SYNONYMS: dict[str, tuple[str, ...]] = {
    "en": ("password", "passwd", "passphrase", "passcode", "pwd", "pw", "pin", "pin code"),
    "de": ("kennwort", "passwort", "zugangscode", "pin"),  # Kennwort: the older German word (Windows, banks)
    "fr": ("mdp", "code secret", "code pin"),  # mdp: the common abbreviation of "mot de passe"
    "es": ("clave", "contrasena", "pin"),  # clave: the everyday word in Latin America; unaccented spelling
    "it": ("parola d'ordine", "pin"),
    "pt": ("senha", "palavra-passe", "pin"),  # Brazil and Portugal each use one of the two catalogs' words
    "nl": ("pincode",),
    "pl": ("haslo", "pin"),  # the spelling without the Polish letter
    "ko": ("비번", "암호"),  # 비번: the everyday short form of 비밀번호; 암호: "code, password"
    "zh": ("口令", "密码", "密碼"),  # both scripts whichever catalog is installed
    "ja": ("暗証番号", "パスコード"),
    "he": ("סיסמא", "סיסמת"),  # the other spelling, and the construct form
    "ru": ("пароля",),
}

# Words between a password word and its value, per language. Spaces inside an entry match any
# run of spaces; an entry ending in a letter needs a space (or the end of the label) after it.
CONNECTORS: dict[str, tuple[str, ...]] = {
    "en": ("is", "was", "=", ":"),
    "de": ("ist", "lautet", "war", "heißt", "heisst", ":"),
    "fr": ("est", "c'est", "était", "etait", ":"),
    "es": ("es", "era", "será", ":"),
    "it": ("è", "e'", "é", "era", "sarà", ":"),
    "pt": ("é", "e", "era", "será", ":"),
    "nl": ("is", "was", "luidt", "wordt", ":"),
    "pl": ("to", "jest", "brzmi", "było", "bylo", ":"),
    "ko": ("는", "은", "이", "가", ":", "="),
    "zh": ("是", "为", "為", "：", ":"),
    "ja": ("は", "が", "：", ":"),
    "he": ("היא", "הוא", "שלי", ":"),
    "ru": ("это", "—", "-", ":"),
}

#: Languages written without spaces: the value may follow the label or connector directly.
UNSPACED = frozenset({"ja", "zh", "ko"})

# The everyday words for telephone, mobile and calling, then the words that may stand between
# such a word and the number ("call me at", "ruf mich an unter", "appelle-moi au").
PHONE_WORDS: dict[str, tuple[str, ...]] = {
    "en": (
        "call",
        "phone",
        "tel",
        "telephone",
        "mobile",
        "cell",
        "cellphone",
        "fax",
        "ring",
        "text",
        "sms",
        "whatsapp",
        "dial",
        "landline",
    ),
    "de": (
        "telefon",
        "tel",
        "handy",
        "mobil",
        "mobiltelefon",
        "telefonnummer",
        "handynummer",
        "rufnummer",
        "festnetz",
        "anrufen",
        "ruf",
        "ruft",
        "rufen",
        "fax",
    ),
    "fr": ("téléphone", "telephone", "tél", "portable", "mobile", "appelle", "appelez", "appeler", "rappelle", "fax"),
    "es": (
        "teléfono",
        "telefono",
        "tel",
        "móvil",
        "movil",
        "celular",
        "llámame",
        "llamame",
        "llámanos",
        "llama al",
        "llamar al",
        "fax",
    ),
    "it": ("telefono", "tel", "cellulare", "cell", "chiamami", "chiamaci", "chiama", "chiamare", "fax"),
    "pt": (
        "telefone",
        "tel",
        "celular",
        "telemóvel",
        "telemovel",
        "me liga",
        "liga para",
        "liga pra",
        "ligue",
        "ligar para",
        "fax",
    ),
    "nl": ("telefoon", "tel", "mobiel", "gsm", "telefoonnummer", "bel me", "bel mij", "bel ons", "bellen", "fax"),
    "pl": (
        "telefon",
        "telefonu",
        "tel",
        "komórka",
        "komórki",
        "komórkowy",
        "komorka",
        "zadzwoń",
        "zadzwon",
        "dzwoń",
        "dzwon",
        "faks",
    ),
    "ko": ("전화", "전화번호", "휴대폰", "핸드폰", "휴대전화", "연락처"),
    "zh": ("电话", "電話", "手机", "手機", "联系电话", "聯繫電話", "打电话", "座机"),
    "ja": ("電話", "携帯", "ケータイ", "TEL", "連絡先"),
    "he": ("טלפון", "נייד", "פלאפון"),
    "ru": ("телефон", "тел", "мобильный", "звоните", "позвони"),
}
PHONE_CONNECTORS: tuple[str, ...] = (
    # en
    "me",
    "us",
    "him",
    "her",
    "them",
    "at",
    "on",
    "back",
    "no",
    "number",
    "num",
    "nr",
    "is",
    "was",
    "my",
    "our",
    "his",
    # de
    "mich",
    "uns",
    "an",
    "unter",
    "ist",
    "mein",
    "meine",
    "nummer",
    "nr",
    "die",
    # fr
    "moi",
    "nous",
    "au",
    "le",
    "est",
    "mon",
    "numéro",
    "numero",
    "de",
    # es / pt / it
    "al",
    "es",
    "mi",
    "el",
    "número",
    "numero",
    "no",
    "é",
    "meu",
    "minha",
    "para",
    "pra",
    "è",
    "il",
    "mio",
    "a",
    # nl / pl
    "op",
    "mijn",
    "nummer",
    "pod",
    "to",
    "mój",
    "moj",
    "numer",
    "na",
    # ko / zh / ja / he (particles and words written next to the number)
    "번호",
    "는",
    "은",
    "로",
    "으로",
    "号码",
    "號碼",
    "是",
    "给我",
    "給我",
    "番号",
    "は",
    "に",
    "まで",
    "מספר",
    "שלי",
    "ל",
)


def _django_locale_dir() -> Path | None:
    spec = importlib.util.find_spec("django")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "contrib" / "auth" / "locale"


@cache
def password_words() -> dict[str, frozenset[str]]:
    """Language -> its lower-case password words (Django's translations plus the synonyms)."""
    words: dict[str, set[str]] = {lang: set(synonyms) for lang, synonyms in PASSWORD_SYNONYMS.items()}
    locale_dir = _django_locale_dir()
    for catalog, lang in _CATALOGS.items():
        if locale_dir is None:
            break
        try:
            translation = gettext.translation("django", str(locale_dir), languages=[catalog])
        except OSError:
            continue  # a Django without this catalog: the synonyms still apply
        for msgid in ("Password", "password"):
            translated = translation.gettext(msgid).strip().lower()
            if translated:
                words.setdefault(lang, set()).add(translated)
    return {lang: frozenset(w) for lang, w in words.items()}


def _is_unspaced(word: str) -> bool:
    """Words in scripts that glue words together (CJK, Hebrew with its prefix letters) take no
    word boundaries."""
    return any(ord(ch) >= 0x3000 or 0x0590 <= ord(ch) <= 0x05FF for ch in word)


def _char(ch: str) -> str:
    return r"[ \t]+" if ch == " " else r"[ \t\-]?" if ch == "-" else re.escape(ch)


def _trie_pattern(words: list[str]) -> str:
    """An alternation of ``words`` as a trie ("c(?:all|ell)"): the engine reads each character
    once instead of trying every word in turn, and a longer word wins over its prefix."""
    trie: dict = {}
    for word in words:
        node = trie
        for ch in word.lower():
            node = node.setdefault(ch, {})
        node[""] = {}

    def walk(node: dict) -> str:
        branches = [_char(ch) + walk(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 and "" not in node else "(?:" + "|".join(branches) + ")"
        return body + "?" if "" in node else body

    return walk(trie)


def word_pattern(words: set[str] | frozenset[str] | tuple[str, ...] | list[str]) -> str:
    """One case-insensitive regex for ``words``: any run of spaces where a word has a space, an
    optional space or hyphen where it has a hyphen, word boundaries around words of spaced
    scripts. The words are a trie and the boundaries stand outside it, so the scan is one pass
    (not one try per word at every character)."""
    spaced = [w for w in set(words) if not _is_unspaced(w)]
    unspaced = [w for w in set(words) if _is_unspaced(w)]
    parts = []
    if spaced:
        parts.append(r"(?<!\w)" + _trie_pattern(spaced) + r"(?!\w)")
    if unspaced:
        parts.append(_trie_pattern(unspaced))
    return "(?i:" + "|".join(parts) + ")" if parts else "(?!)"


# Between a password word and its value, a qualifier may stand ("la contraseña del wifi es …").
QUALIFIERS: dict[str, tuple[str, ...]] = {
    "de": ("für", "fürs", "vom", "von", "zum", "des"),
    "fr": ("du", "de", "pour", "des"),
    "es": ("del", "de", "para"),
    "it": ("del", "della", "dello", "di", "per"),
    "pt": ("do", "da", "de", "para"),
    "nl": ("van", "voor"),
    "pl": ("do", "od", "dla"),
    "ru": ("от", "для"),
}

# Everyday words said of a password that neither the stop words nor Django's messages hold
# ("Das Passwort ist abgelaufen", "la contraseña es débil"): a plain word after a connector is a
# password unless it is an ordinary word of the language (``ordinary_words``).
STATE_WORDS: dict[str, tuple[str, ...]] = {
    "de": (
        "abgelaufen",
        "alt",
        "schwach",
        "stark",
        "geheim",
        "sicher",
        "unsicher",
        "richtig",
        "falsch",
        "kurz",
        "lang",
        "neu",
        "gleich",
        "vergessen",
        "geändert",
        "gesperrt",
        "leer",
    ),
    "fr": (
        "sécurisé",
        "changé",
        "expiré",
        "identique",
        "faible",
        "fort",
        "oublié",
        "bon",
        "mauvais",
        "nouveau",
        "vide",
        "correct",
        "incorrect",
        "court",
        "long",
    ),
    "es": (
        "segura",
        "seguro",
        "caducada",
        "olvidada",
        "débil",
        "fuerte",
        "incorrecta",
        "correcta",
        "nueva",
        "vieja",
        "corta",
        "larga",
        "vacía",
        "secreta",
    ),
    "it": (
        "sbagliata",
        "sicura",
        "scaduta",
        "vecchia",
        "debole",
        "forte",
        "nuova",
        "corretta",
        "errata",
        "corta",
        "lunga",
        "vuota",
        "segreta",
    ),
    "pt": (
        "segura",
        "expirada",
        "esquecida",
        "fraca",
        "forte",
        "errada",
        "nova",
        "antiga",
        "correta",
        "incorreta",
        "curta",
        "longa",
        "vazia",
        "secreta",
    ),
    "nl": (
        "onjuist",
        "veilig",
        "verlopen",
        "hetzelfde",
        "zwak",
        "sterk",
        "vergeten",
        "nieuw",
        "oud",
        "juist",
        "fout",
        "kort",
        "lang",
        "leeg",
        "geheim",
    ),
    "pl": (
        "nieprawidłowe",
        "prawidłowe",
        "bezpieczne",
        "wygasło",
        "zapomniane",
        "słabe",
        "silne",
        "nowe",
        "stare",
        "błędne",
        "krótkie",
        "długie",
        "puste",
        "tajne",
    ),
    "ru": ("неверный", "неправильный", "слабый", "сложный", "простой", "новый", "старый", "верный"),
}
_STOPWORD_LANGUAGES = {
    "de": ("german",),
    "fr": ("french",),
    "es": ("spanish",),
    "it": ("italian",),
    "pt": ("portuguese", "brazilian"),
    "nl": ("dutch",),
    "pl": ("polish",),
    "ru": ("russian",),
}
_DJANGO_CATALOG_DIRS = {
    "de": ("de",),
    "fr": ("fr",),
    "es": ("es",),
    "it": ("it",),
    "pt": ("pt", "pt_BR"),
    "nl": ("nl",),
    "pl": ("pl",),
    "ru": ("ru",),
}
_WORD_RE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")


@cache
def ordinary_words(lang: str) -> frozenset[str]:
    """Ordinary lower-case words said of a password in a language: its stop words (the
    ``stopwords`` package), every word of Django's account messages in it (the
    ``django.contrib.auth`` catalog: "zu kurz", "falsch", "zu häufig", "ausschließlich Zahlen"…),
    and ``STATE_WORDS``. Not a dictionary: a word outside these after "Passwort ist" is read as
    the password."""
    words: set[str] = set(STATE_WORDS.get(lang, ()))
    for name in _STOPWORD_LANGUAGES.get(lang, ()):
        words.update(w.lower() for w in get_stopwords(name))
    locale_dir = _django_locale_dir()
    if locale_dir is not None:
        for catalog in _DJANGO_CATALOG_DIRS.get(lang, ()):
            mo = locale_dir / catalog / "LC_MESSAGES" / "django.mo"
            if mo.is_file():
                with mo.open("rb") as handle:
                    translation = gettext.GNUTranslations(handle)
                for message in translation._catalog.values():
                    if isinstance(message, str):
                        words.update(w.lower() for w in _WORD_RE.findall(message))
    return frozenset(words)
