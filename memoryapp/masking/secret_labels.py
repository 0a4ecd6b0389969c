"""What a label is and how its value reads (SPEC §4.1), for the secret stages in ``secrets``.

A label is any identifier that holds a secret word (`db_password`, `MY_API_KEY`,
`aws_secret_access_key`, `AccountKey`); values after password words are always secrets, values
after weaker words (token, key) only when they look like one (digits and letters, symbols, or the
Shannon entropy that detect-secrets uses for its high-entropy plugin). A value is read whole:
quoted values up to their closing quote, multi-word passphrases up to the end of their clause,
bare values up to the next space or the next `name=` pair, by plain loops (linear time).
"""

from __future__ import annotations

import re

from detect_secrets.plugins.keyword import DENYLIST as _DS_KEYWORDS

from memoryapp.masking.secret_shapes import PLACEHOLDER_START_RE, entropy

Span = tuple[int, int, str]


# --------------------------------------------------------------------------------------------
# Labels
# --------------------------------------------------------------------------------------------
# Words whose value is always a secret (password-like: prose values may be plain words).
_PASSWORD_WORDS = (
    "password",
    "passwd",
    "passwort",
    "passphrase",
    "passcode",
    "kennwort",
    "contrasena",
    "contraseña",
    "motdepasse",
    "wachtwoord",
    "senha",
    "пароль",
    "пароля",
)
_PASSWORD_SEGMENTS = frozenset({"pass", "pwd", "pw", "pin", "pincode", "mdp", "passwd", "pword", "pswd", "pass_phrase"})
# Words whose value is a secret when it looks like one (token-like).
_TOKEN_WORDS = (
    "secret",
    "token",
    "apikey",
    "credential",
    "creds",
    "privatekey",
    "accesskey",
    "accountkey",
    "authkey",
    "signingkey",
    "encryptionkey",
    "masterkey",
    "sessionkey",
    "clientkey",
    "servicekey",
    "webhook",
    "bearer",
    "authorization",
    "cookie",
    "sessionid",
) + tuple(w.replace("_?", "") for w in _DS_KEYWORDS if "_?" in w)  # detect-secrets' keyword list
_TOKEN_SEGMENTS = frozenset(
    {
        "key",
        "auth",
        "sig",
        "signature",
        "salt",
        "session",
        "sid",
        "jwt",
        "cvv",
        "cvc",
        "license",
        "otp",
        "totp",
        "hmac",
        "sasl",
        "creds",
    }
)

_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# one scan for "any of these words inside the label" (labels are read once per "label=" / "label:")
_PASSWORD_WORDS_RE = re.compile("|".join(re.escape(w) for w in sorted(_PASSWORD_WORDS, key=len, reverse=True)))
_TOKEN_WORDS_RE = re.compile("|".join(re.escape(w) for w in sorted(set(_TOKEN_WORDS), key=len, reverse=True)))
_SEGMENT_SPLIT_RE = re.compile(r"[_.\-\s]+")


def label_class(label: str) -> str | None:
    """The kind of label an identifier or a short phrase is: "password" (any value is a secret),
    "token" (secret, token, api key…: a value that is not a plain count or word), "key" (a bare
    "key", "auth", "session"…: a value that looks like a credential), or None."""
    if len(label) > 64:
        return None
    flat = re.sub(r"[_.\-\s]", "", label.lower())
    segments = [s.lower() for s in _SEGMENT_SPLIT_RE.split(_CAMEL_RE.sub("_", label)) if s]
    if any(s in _COUNT_SEGMENTS for s in segments) or "tokeniz" in flat:
        return None  # max_tokens, token_limit, session_timeout, tokenizer: settings, not secrets
    if _PASSWORD_WORDS_RE.search(flat) or any(s in _PASSWORD_SEGMENTS for s in segments):
        return "password"
    if _TOKEN_WORDS_RE.search(flat) or any(
        s.endswith("key") and len(s) > 3 and s[:-3] in _KEY_PREFIXES for s in segments
    ):
        return "token"
    if any(s in _TOKEN_SEGMENTS for s in segments):
        return "key"
    return None


_COUNT_SEGMENTS = frozenset(
    {
        "max",
        "min",
        "limit",
        "limits",
        "count",
        "num",
        "number",
        "length",
        "len",
        "size",
        "ttl",
        "timeout",
        "expiry",
        "expires",
        "lifetime",
        "budget",
        "used",
        "remaining",
        "tokens",
        "per",
        "rate",
        "window",
        "type",
        "name",
        "id",
    }
)


def value_is_secret(cls: str, value: str) -> bool:
    """Whether the value after a label of this class is a secret (see label_class)."""
    if cls == "password":
        return looks_like_password(value, prose=False)
    if cls == "token":
        if TEMPLATE_RE.match(value) or value.lower() in NOT_A_VALUE:
            return False
        if value.isdigit():
            return len(value) >= 6
        has_digit = HAS_DIGIT_RE.search(value) is not None
        mixed = value != value.lower() and value != value.upper()
        return len(value) >= 8 or (len(value) >= 4 and (has_digit or mixed or _HAS_SYMBOL_RE.search(value) is not None))
    return looks_like_token(value)


_KEY_PREFIXES = frozenset(
    {
        "api",
        "access",
        "secret",
        "private",
        "account",
        "auth",
        "client",
        "master",
        "signing",
        "encryption",
        "ssh",
        "gpg",
        "pgp",
        "license",
        "app",
        "consumer",
        "session",
    }
)

# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------
CLOSERS = {'"': '"', "'": "'", "`": "`", "「": "」", "『": "』", "“": "”", "‘": "’", "«": "»", "„": "“"}
_NEXT_PAIR_RE = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_.\-]{0,63}\s*(?:=|:(?!//))")
_VALUE_MAX = 300


_QUOTED_BODY_RE = {
    opener: re.compile(r"(?:[^" + re.escape(closer) + r"\\\n]|\\[^\n])*+") for opener, closer in CLOSERS.items()
}


def _quoted_end(work: str, i: int, quote: str) -> int:
    """Index of the closing quote for a value opened at work[i] (backslash escapes honoured);
    the end of the line if it never closes (at most _VALUE_MAX characters on)."""
    limit = min(len(work), i + 1 + _VALUE_MAX)
    return _QUOTED_BODY_RE[quote].match(work, i + 1, limit).end()


def trim_bare(work: str, s: int, e: int) -> int:
    """Drop sentence punctuation and unbalanced closers that end a bare value."""
    while e - s > 1:
        ch = work[e - 1]
        if ch in ".,;:":
            e -= 1
        elif ch in ")]}>" and "([{<"[")]}>".index(ch)] not in work[s : e - 1]:
            e -= 1
        elif ch in "\"'`" and work.count(ch, s, e - 1) % 2 == 0:
            e -= 1
        else:
            break
    return e


def _bare_end(work: str, i: int, *, words: bool) -> int:
    """End of a bare value starting at work[i]. A value runs to the next whitespace; `;`, `&`
    and `,` end it only when a `name=` pair or whitespace follows (connection strings, query
    strings). With words=True (a passphrase after "password:") it runs on across spaces to the
    end of its clause: a line break, sentence punctuation followed by a space, or a next
    `label:` pair."""
    n = len(work)
    limit = min(n, i + _VALUE_MAX)
    ascii_start = work[i] < "\u0080"
    j = i
    while j < limit:
        ch = work[j]
        if ch == "\n" or ch == "\r" or (ascii_start and ch >= "\u3000"):
            break
        if ch in " \t":
            if not words:
                break
            k = j
            while k < limit and work[k] in " \t":
                k += 1
            if k >= limit or work[k] in "\n\r" or _NEXT_PAIR_RE.match(work, k) or PLACEHOLDER_START_RE.match(work, k):
                break
            if work.startswith(("and ", "but ", "or ", "so ", "then ", "und ", "et ", "y "), k):
                break
            j = k
            continue
        if j > i and ch in ";&,|" and (j + 1 >= limit or work[j + 1] in " \t\n\r" or _NEXT_PAIR_RE.match(work, j + 1)):
            break
        if words and j > i and ch in ".!?" and (j + 1 >= limit or work[j + 1] in " \t\n\r"):
            break
        if ch in "\"'`" and j > i and (j + 1 >= limit or work[j + 1] in " \t\n\r,;}])"):
            break  # the closing quote of a value that was opened before the label
        if ch in "\u3001\u3002\u300c\u300d":  # Japanese punctuation ends a value
            break
        j += 1
    return trim_bare(work, i, j)


def read_value(work: str, i: int, *, words: bool) -> tuple[int, int] | None:
    """(start, end) of the value that starts at work[i] (after a separator and spaces)."""
    n = len(work)
    if i >= n or PLACEHOLDER_START_RE.match(work, i):
        return None
    ch = work[i]
    if ch in CLOSERS:
        end = _quoted_end(work, i, ch)
        return (i + 1, end) if end > i + 1 else None
    if ch in "\n\r\t ":
        return None
    end = _bare_end(work, i, words=words)
    return (i, end) if end > i else None


HAS_DIGIT_RE = re.compile(r"[0-9]")
_HAS_LETTER_RE = re.compile(r"[A-Za-z]")
_HAS_SYMBOL_RE = re.compile(r"[^A-Za-z0-9\s]")
NOT_A_VALUE = frozenset(
    {
        "",
        "none",
        "null",
        "nil",
        "true",
        "false",
        "undefined",
        "required",
        "optional",
        "n/a",
        "na",
        "tbd",
        "todo",
        "redacted",
        "hidden",
    }
)
TEMPLATE_RE = re.compile(
    r"^(?:\$\{?[A-Z_][A-Z0-9_]*\}?|\$\{[A-Za-z_][A-Za-z0-9_]*\}|\{\{.*\}\}|<[^<>]*>|\*+|x+|X+|\.\.\.|…)$"
)


def looks_like_token(value: str) -> bool:
    """A value after a token/key word that is a credential rather than a word or a count."""
    if TEMPLATE_RE.match(value) or value.lower() in NOT_A_VALUE:
        return False
    digits = HAS_DIGIT_RE.search(value) is not None
    letters = _HAS_LETTER_RE.search(value) is not None
    if digits and not letters:
        return len(value.replace("-", "").replace(" ", "")) >= 8
    if digits and letters:
        return len(value) >= 6
    if _HAS_SYMBOL_RE.search(value) and len(value) >= 8:
        return True
    return len(value) >= 10 and entropy(value) >= 3.0 and value != value.lower()


def looks_like_password(value: str, *, prose: bool) -> bool:
    """Values after password words are secrets; in prose, common words that follow "password is"
    ("required", "too short", "stored in the vault") are not."""
    if TEMPLATE_RE.match(value):
        return False
    if not prose:
        return value.lower() not in ("", "none", "null")
    if HAS_DIGIT_RE.search(value) or _HAS_SYMBOL_RE.search(value.replace(" ", "")):
        return True
    words = value.lower().split()
    if not words or words[0] in _PROSE_LEADS:
        return False
    if words[0] in PROSE_ENDS and len(words) == 1:
        return False
    return True


# Words that start ordinary statements about a password ("the password is required / not set").
_PROSE_LEADS = frozenset(
    """a an the my your his her our their its this that these those not no never always also still now
    just only too very so quite really being been be being set stored saved kept written sent shown
    required needed necessary mandatory optional wrong incorrect invalid expired weak strong long short
    empty blank missing changed reset updated encrypted hashed protected case sensitive same different
    in on at for to from by with of into under over about like unknown forgotten lost locked
    managed handled rotated generated random unique personal private shared secret hard easy simple
    complex bad unsafe insecure visible hidden new old expiring due what which who how why where when
    here there one two three""".split()
)
PROSE_ENDS = frozenset({"correct", "right", "ok", "okay", "fine", "good", "secure", "safe", "known", "set", "done"})
