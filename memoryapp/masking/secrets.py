"""Secrets (SPEC §4.1): API keys and tokens of known shapes, values after password / secret /
token / key words in every form people paste, passport numbers after the word.

Known token shapes come from Yelp's detect-secrets (its regex plugins: AWS, Azure storage,
GitHub, GitLab, Slack, Stripe, Twilio, JWT, npm, PyPI, SendGrid, Square, Telegram, Discord,
Mailchimp, OpenAI, IBM, Softlayer, Cloudant, Artifactory), plus a few shapes it does not list.
detect-secrets answers *which* strings are secrets, not where they are, and some of its patterns
match only a prefix of the token (its GitHub pattern captures "ghp"), so each of its patterns is
run here with positions and every hit is widened to the whole token it sits in.

Values after a label are found by reading the text the way people write them:

- assignments — `key=value`, `key: value`, `"key": "value"`, `KEY := value`, `key => value`,
  env files (`PGPASSWORD=…`), connection strings (`…;AccountKey=…==;`), query strings;
  the label is any identifier that holds a secret word (`db_password`, `MY_API_KEY`,
  `aws_secret_access_key`, `AccountKey`);
- URLs with a password (`postgres://user:pw@host/db`);
- prose — "my password is swordfish", "the wifi password: correct horse battery staple",
  "パスワードはhunter2です", "הסיסמה שלי היא …";
- `Authorization: Bearer …` / `Basic …` headers and CLI flags (`--password hunter2`).

A value is masked whole: quoted values up to their closing quote, multi-word passphrases after
"password:" up to the end of their clause, bare values up to the next space or the next
`name=` pair. Values after password words are always secrets; values after weaker words (token,
key) only when they look like one (digits and letters, symbols, or the Shannon entropy that
detect-secrets uses for its high-entropy plugin). A long random-looking token on its own
(base64 alphabet, mixed case and digits, entropy above detect-secrets' Base64 limit) is a
secret too.

Every pattern here runs in time linear in the text: labels are found by one scan of identifier
runs (possessive quantifiers, no nested repetition), and values are read by plain loops.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import DENYLIST as _DS_KEYWORDS
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from memoryapp.masking import words

Span = tuple[int, int, str]

# --------------------------------------------------------------------------------------------
# Known token shapes
# --------------------------------------------------------------------------------------------
_DETECT_SECRETS_PLUGINS = (
    ArtifactoryDetector,
    AWSKeyDetector,
    AzureStorageKeyDetector,
    CloudantDetector,
    DiscordBotTokenDetector,
    GitHubTokenDetector,
    GitLabTokenDetector,
    IbmCloudIamDetector,
    IbmCosHmacDetector,
    JwtTokenDetector,
    MailchimpDetector,
    NpmDetector,
    OpenAIDetector,
    PypiTokenDetector,
    SendGridDetector,
    SlackDetector,
    SoftlayerDetector,
    SquareOAuthDetector,
    StripeDetector,
    TelegramBotTokenDetector,
    TwilioKeyDetector,
)
# Patterns of detect-secrets that backtrack quadratically on adversarial text (found by
# bench/masking.py) are left out; a linear pattern below covers each: JWT (an unbounded run
# before the first "."), OpenAI's legacy shape (an unbounded prefix before "T3BlbkFJ"), npm's
# `//.+/:_authToken=` and AWS's secret-after-a-label (the assignment reader covers that form).
_SUPERLINEAR = {
    JwtTokenDetector.denylist[0].pattern,
    OpenAIDetector.denylist[0].pattern,
    NpmDetector.denylist[0].pattern,
    AWSKeyDetector.denylist[1].pattern,
}
_SHAPES: tuple[re.Pattern, ...] = tuple(rx for plugin in _DETECT_SECRETS_PLUGINS for rx in plugin.denylist if rx.pattern not in _SUPERLINEAR) + (
    re.compile(r"_authToken(?<![A-Za-z0-9]_authToken)[ \t]*+=[ \t]*+(?!\[[A-Z_]+\])(\S++)"),  # .npmrc
    # shapes detect-secrets does not list (or lists narrower)
    re.compile(r"sk-(?<![A-Za-z0-9_]sk-)(?=[A-Za-z_-]*[0-9])[A-Za-z0-9_-]{16,}"),  # OpenAI / Anthropic
    re.compile(r"(?<![A-Za-z0-9_])(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"),  # Stripe (test, publishable)
    re.compile(r"gh(?<![A-Za-z0-9_]gh)[pousr]_[A-Za-z0-9]{20,}"),  # GitHub, any length
    re.compile(r"github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{22,}"),  # GitHub fine-grained
    re.compile(r"xox(?<![A-Za-z0-9_]xox)[abeoprs]-[A-Za-z0-9-]{10,}"),  # Slack, any shape
    re.compile(r"AIza(?<![A-Za-z0-9_]AIza)[0-9A-Za-z_-]{35}"),  # Google API key
    re.compile(r"(?<![A-Za-z0-9_])(?:hf|npm|pypi|glpat|shpat|shpss|dop_v1|doo_v1)[_-][A-Za-z0-9_-]{20,}"),
    re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}(?![0-9A-Za-z])"),  # AWS ids
    re.compile(r"SG\.(?<![A-Za-z0-9_]SG\.)[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),  # SendGrid, any length
    re.compile(r"eyJ(?<![A-Za-z0-9_]eyJ)[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}(?:\.[A-Za-z0-9_-]*)?"),  # JWT / JWS
)
# Characters a token is made of: a hit is widened over them ("." only inside a token).
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/=~")


def _widen(work: str, s: int, e: int, *, left: bool = True) -> tuple[int, int]:
    while s < e and work[s] not in _TOKEN_CHARS:
        s += 1
    while e > s and work[e - 1] not in _TOKEN_CHARS:
        e -= 1
    n = len(work)
    while left and s > 0 and work[s - 1] in _TOKEN_CHARS:
        s -= 1
    while e < n and (work[e] in _TOKEN_CHARS or (work[e] == "." and e + 1 < n and work[e + 1] in _TOKEN_CHARS)):
        e += 1
    while left and s < e and work[s] in "-=~":  # "ל-ghp_…", "key=ghp_…": a joiner, not the token
        s += 1
    return s, e


def _hit_span(m: re.Match) -> tuple[int, int, bool]:
    """(start, end, is_value). A pattern with a capture group that ends the match (a label, then
    the secret) marks the secret by the group; otherwise (GitHub's group is the prefix) the whole
    match is the token."""
    if m.re.groups:
        for g in range(1, m.re.groups + 1):
            if m.group(g) and m.end() - m.end(g) <= 1 and m.start(g) > m.start():
                return m.start(g), m.end(g), True
    return m.start(), m.end(), False


# Most shapes need a literal that plain text rarely holds: a pattern runs only when one of its
# triggers is in the text (case-insensitive triggers for case-insensitive patterns). A pattern
# without an entry (a shape a newer detect-secrets adds) always runs.
_LABEL_WORDS = ("key", "pwd", "pw", "pass", "token", "secret")
_TRIGGERS: dict[str, tuple[str, ...]] = {
    ArtifactoryDetector.denylist[0].pattern: ("AKC",),
    ArtifactoryDetector.denylist[1].pattern: ("AP",),
    AWSKeyDetector.denylist[0].pattern: ("A3T", "ABIA", "ACCA", "AKIA", "ASIA"),
    AzureStorageKeyDetector.denylist[0].pattern: ("AccountKey=",),
    **{rx.pattern: _LABEL_WORDS for rx in CloudantDetector.denylist[:2]},
    **{rx.pattern: ("cloudant.com",) for rx in CloudantDetector.denylist[2:]},
    GitHubTokenDetector.denylist[0].pattern: ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    IbmCloudIamDetector.denylist[0].pattern: _LABEL_WORDS,
    IbmCosHmacDetector.denylist[0].pattern: ("secret",),
    MailchimpDetector.denylist[0].pattern: ("-us",),
    **{rx.pattern: ("pypi-",) for rx in PypiTokenDetector.denylist},
    SendGridDetector.denylist[0].pattern: ("SG.",),
    SlackDetector.denylist[0].pattern: ("xox",),
    SlackDetector.denylist[1].pattern: ("hooks.slack.com",),
    SoftlayerDetector.denylist[0].pattern: _LABEL_WORDS,
    SoftlayerDetector.denylist[1].pattern: ("softlayer.com",),
    SquareOAuthDetector.denylist[0].pattern: ("sq0csp-",),
    StripeDetector.denylist[0].pattern: ("k_live_",),
    TelegramBotTokenDetector.denylist[0].pattern: (":",),
    TwilioKeyDetector.denylist[0].pattern: ("AC",),
    TwilioKeyDetector.denylist[1].pattern: ("SK",),
    **{rx.pattern: ("gl", "GR1348941") for rx in GitLabTokenDetector.denylist},
}
_SHAPE_TRIGGERS: tuple[tuple[re.Pattern, tuple[str, ...] | None, bool], ...] = tuple((rx, _TRIGGERS.get(rx.pattern), bool(rx.flags & re.IGNORECASE)) for rx in _SHAPES)


def _stage_token_shapes(work: str) -> list[Span]:
    out: list[Span] = []
    low = _trigger_text(work)
    for rx, triggers, ignore_case in _SHAPE_TRIGGERS:
        if triggers is not None and not any(t in (low if ignore_case else work) for t in triggers):
            continue
        reached = -1  # hits inside a token already widened are that token again (keeps this linear)
        for m in rx.finditer(work):
            s, e, is_value = _hit_span(m)
            if s < reached:
                continue
            s, e = _widen(work, s, e, left=not is_value)
            if e > s:
                out.append((s, e, "SECRET"))
                reached = e
    return out


_KEY_BLOCK_RE = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d")
_KEY_END_RE = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")


def _stage_private_keys(work: str) -> list[Span]:
    """A private key block is masked from its header to its footer, or to the end of the text
    when the footer is missing (a key cut short is still a key)."""
    if "PRIVATE KEY" not in work and "PuTTY" not in work:
        return []
    out: list[Span] = []
    pos = 0
    while True:
        m = _KEY_BLOCK_RE.search(work, pos)
        if m is None:
            return out
        end = _KEY_END_RE.search(work, m.end())
        stop = end.end() if end else len(work)
        out.append((m.start(), stop, "SECRET"))
        pos = stop


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
_TOKEN_SEGMENTS = frozenset({"key", "auth", "sig", "signature", "salt", "session", "sid", "jwt", "cvv", "cvc", "license", "otp", "totp", "hmac", "sasl", "creds"})

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
    if _TOKEN_WORDS_RE.search(flat) or any(s.endswith("key") and len(s) > 3 and s[:-3] in _KEY_PREFIXES for s in segments):
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
        if _TEMPLATE_RE.match(value) or value.lower() in _NOT_A_VALUE:
            return False
        if value.isdigit():
            return len(value) >= 6
        has_digit = _HAS_DIGIT_RE.search(value) is not None
        mixed = value != value.lower() and value != value.upper()
        return len(value) >= 8 or (len(value) >= 4 and (has_digit or mixed or _HAS_SYMBOL_RE.search(value) is not None))
    return looks_like_token(value)


_KEY_PREFIXES = frozenset({"api", "access", "secret", "private", "account", "auth", "client", "master", "signing", "encryption", "ssh", "gpg", "pgp", "license", "app", "consumer", "session"})

# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------
_PLACEHOLDER_START_RE = re.compile(r"\[(?:EMAIL|PHONE|IL_ID|CARD|BANK_ACCOUNT|NUMBER|SECRET)\]")


def _trigger_text(work: str) -> str:
    """The lower-case text a stage checks its trigger words in, without the placeholders an
    earlier stage or round left ("[SECRET]" holds "secret", which must not wake every label
    pattern up again)."""
    return _PLACEHOLDER_START_RE.sub(" ", work).lower() if "[" in work else work.lower()


_CLOSERS = {'"': '"', "'": "'", "`": "`", "「": "」", "『": "』", "“": "”", "‘": "’", "«": "»", "„": "“"}
_NEXT_PAIR_RE = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_.\-]{0,63}\s*(?:=|:(?!//))")
_VALUE_MAX = 300
_ENTROPY = Base64HighEntropyString()


def entropy(value: str) -> float:
    """Shannon entropy over the base64 alphabet (detect-secrets' measure)."""
    return _ENTROPY.calculate_shannon_entropy(value)


_QUOTED_BODY_RE = {opener: re.compile(r"(?:[^" + re.escape(closer) + r"\\\n]|\\[^\n])*+") for opener, closer in _CLOSERS.items()}


def _quoted_end(work: str, i: int, quote: str) -> int:
    """Index of the closing quote for a value opened at work[i] (backslash escapes honoured);
    the end of the line if it never closes (at most _VALUE_MAX characters on)."""
    limit = min(len(work), i + 1 + _VALUE_MAX)
    return _QUOTED_BODY_RE[quote].match(work, i + 1, limit).end()


def _trim_bare(work: str, s: int, e: int) -> int:
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
            if k >= limit or work[k] in "\n\r" or _NEXT_PAIR_RE.match(work, k) or _PLACEHOLDER_START_RE.match(work, k):
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
    return _trim_bare(work, i, j)


def read_value(work: str, i: int, *, words: bool) -> tuple[int, int] | None:
    """(start, end) of the value that starts at work[i] (after a separator and spaces)."""
    n = len(work)
    if i >= n or _PLACEHOLDER_START_RE.match(work, i):
        return None
    ch = work[i]
    if ch in _CLOSERS:
        end = _quoted_end(work, i, ch)
        return (i + 1, end) if end > i + 1 else None
    if ch in "\n\r\t ":
        return None
    end = _bare_end(work, i, words=words)
    return (i, end) if end > i else None


_HAS_DIGIT_RE = re.compile(r"[0-9]")
_HAS_LETTER_RE = re.compile(r"[A-Za-z]")
_HAS_SYMBOL_RE = re.compile(r"[^A-Za-z0-9\s]")
_NOT_A_VALUE = frozenset({"", "none", "null", "nil", "true", "false", "undefined", "required", "optional", "n/a", "na", "tbd", "todo", "redacted", "hidden"})
_TEMPLATE_RE = re.compile(r"^(?:\$\{?[A-Z_][A-Z0-9_]*\}?|\$\{[A-Za-z_][A-Za-z0-9_]*\}|\{\{.*\}\}|<[^<>]*>|\*+|x+|X+|\.\.\.|…)$")


def looks_like_token(value: str) -> bool:
    """A value after a token/key word that is a credential rather than a word or a count."""
    if _TEMPLATE_RE.match(value) or value.lower() in _NOT_A_VALUE:
        return False
    digits = _HAS_DIGIT_RE.search(value) is not None
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
    if _TEMPLATE_RE.match(value):
        return False
    if not prose:
        return value.lower() not in ("", "none", "null")
    if _HAS_DIGIT_RE.search(value) or _HAS_SYMBOL_RE.search(value.replace(" ", "")):
        return True
    words = value.lower().split()
    if not words or words[0] in _PROSE_LEADS:
        return False
    if words[0] in _PROSE_ENDS and len(words) == 1:
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
_PROSE_ENDS = frozenset({"correct", "right", "ok", "okay", "fine", "good", "secure", "safe", "known", "set", "done"})

# --------------------------------------------------------------------------------------------
# Stages
# --------------------------------------------------------------------------------------------
# An identifier used as a label, then its separator. Possessive quantifiers: no backtracking.
_ASSIGN_RE = re.compile(
    r"(?<![A-Za-z0-9_.\-])(?P<label>-{0,2}[A-Za-z][A-Za-z0-9_.\-]*+)[\"'`\]]?[ \t]*+"
    r"(?P<sep>:=|=>|==?|:(?!//)|：|\u2192|->)[ \t]*+"
)


def _stage_assignments(work: str) -> list[Span]:
    """`label=value`, `label: value`, `"label": "value"`, `label := value` for secret labels."""
    if "=" not in work and ":" not in work and "：" not in work and ">" not in work:
        return []
    out: list[Span] = []
    for m in _ASSIGN_RE.finditer(work):
        label = m.group("label").lstrip("-").rstrip(".-")
        cls = label_class(label)
        if cls is None:
            continue
        words = cls == "password" and m.group("sep") in (":", "：")
        span = read_value(work, m.end(), words=words)
        if span is None:
            continue
        value = work[span[0] : span[1]]
        if value.lower() in ("bearer", "basic", "token", "digest"):  # "Authorization: Bearer …"
            rest = _SPACES_RE.match(work, span[1])
            if rest is None:
                continue
            span = read_value(work, rest.end(), words=False)
            if span is None:
                continue
            value = work[span[0] : span[1]]
        ok = value_is_secret(cls, value)
        if ok:
            out.append((span[0], span[1], "SECRET"))
    return out


_XML_RE = re.compile(r"<(?P<label>[A-Za-z][A-Za-z0-9_.:\-]{0,63}+)>(?P<v>[^<\n]{1,300}+)</(?P=label)>")


def _stage_xml(work: str) -> list[Span]:
    """`<password>…</password>`, `<apiKey>…</apiKey>`."""
    if "</" not in work:
        return []
    out: list[Span] = []
    for m in _XML_RE.finditer(work):
        cls = label_class(m.group("label").rpartition(":")[2])
        value = m.group("v")
        if value_is_secret(cls, value):
            out.append((m.start("v"), m.end("v"), "SECRET"))
    return out


_SPACES_RE = re.compile(r"[ \t]+")
_CLI_RE = re.compile(r"(?<![A-Za-z0-9_])--?(?P<label>[A-Za-z][A-Za-z0-9_\-]{1,40}) ++(?=[^\s-])")


def _stage_cli_flags(work: str) -> list[Span]:
    """`--password hunter2`, `--api-key abc…`."""
    if "-" not in work:
        return []
    out: list[Span] = []
    for m in _CLI_RE.finditer(work):
        cls = label_class(m.group("label"))
        if cls is None:
            continue
        span = read_value(work, m.end(), words=False)
        if span is None:
            continue
        value = work[span[0] : span[1]]
        if (cls == "password" and len(value) >= 3 and looks_like_password(value, prose=True)) or looks_like_token(value):
            out.append((span[0], span[1], "SECRET"))
    return out


# Commands whose short flag takes a password (its manual page's option), and those where the
# password may be glued to the flag ("mysql -phunter2", "7z a -pSecret"). A flag is read only in
# the command's own part of the line (up to the next command, ";", "|", "&&" or line end), so
# "ssh -p 22" or "mkdir -p" is never a password.
_CLI_PASSWORD_FLAGS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck", "mysqlsh", "mariadb", "mariadb-dump", "mariadb-admin"), ("p",)),
    "sshpass": ("p",),
    **dict.fromkeys(("redis-cli", "valkey-cli", "keydb-cli"), ("a",)),
    "login": ("p",),  # docker / podman / helm / az / oc / cf / buildah / skopeo … login -p
    **dict.fromkeys(("sqlcmd", "bcp", "osql", "isql", "ipmitool"), ("P",)),
    **dict.fromkeys(("zip", "unzip", "zipcloak"), ("P",)),
    **dict.fromkeys(("7z", "7za", "7zr", "rar", "unrar"), ("p",)),
    **dict.fromkeys(("ldapsearch", "ldapmodify", "ldapadd", "ldapdelete", "ldapwhoami", "ldappasswd", "ldapcompare", "ldapmodrdn"), ("w",)),
    **dict.fromkeys(("mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport", "mongostat", "mongotop"), ("p",)),
    "openssl": ("k", "pass", "passin", "passout"),
    **dict.fromkeys(("rdesktop", "xfreerdp"), ("p",)),
}
_CLI_GLUED = frozenset(
    {"mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck", "mysqlsh", "mariadb", "mariadb-dump", "mariadb-admin", "sshpass", "7z", "7za", "7zr", "rar", "unrar"}
)
_CLI_COMMAND_RE = re.compile(r"(?<![\w.\-])(?P<cmd>" + "|".join(re.escape(c) for c in sorted(_CLI_PASSWORD_FLAGS, key=len, reverse=True)) + r")(?![\w\-])")
_CLI_FLAG_RES = {flags: re.compile(r"(?<![\w\-])-(?P<flag>" + "|".join(sorted(flags, key=len, reverse=True)) + r")(?P<rest>[^\s\-]?)") for flags in set(_CLI_PASSWORD_FLAGS.values())}
_CLI_SEGMENT_END_RE = re.compile(r"[\n;|]|&&")
# "-u user:password" (curl, wget's --user), "--proxy-user", "-U user%password" (smbclient)
_CLI_USER_PASS_RE = re.compile(r"(?<![\w\-])(?:-u|--user|--proxy-user|-U|--userpass)(?:[ \t]++|=)['\"]?(?P<user>[^\s:%'\"]{1,64}+)(?P<sep>[:%])(?=\S)")


def _cli_value(work: str, i: int) -> tuple[int, int] | None:
    span = read_value(work, i, words=False)
    if span is None:
        return None
    value = work[span[0] : span[1]]
    if value.startswith("-") or _TEMPLATE_RE.match(value) or value.lower() in _NOT_A_VALUE:
        return None
    return span


def _stage_cli_commands(work: str) -> list[Span]:
    """Passwords given to commands as flags: ``mysql -u root -phunter2``, ``sshpass -p hunter2``,
    ``redis-cli -a …``, ``docker login -p …``, ``curl -u admin:hunter2``, ``smbclient -U u%pw``."""
    if "-" not in work:
        return []
    out: list[Span] = []
    n = len(work)
    commands = list(_CLI_COMMAND_RE.finditer(work))
    for index, cmd in enumerate(commands):
        name = cmd.group("cmd")
        stop = commands[index + 1].start() if index + 1 < len(commands) else n
        end = _CLI_SEGMENT_END_RE.search(work, cmd.end(), stop)
        stop = end.start() if end else stop
        for flag in _CLI_FLAG_RES[_CLI_PASSWORD_FLAGS[name]].finditer(work, cmd.end(), stop):
            i = flag.start("rest")
            if flag.group("rest"):
                if name not in _CLI_GLUED and flag.group("rest") not in "='\"":
                    continue  # "-pv": a cluster of flags, not a glued value
                if work[i] == "=":
                    i += 1
            else:
                while i < n and work[i] in " \t":
                    i += 1
            span = _cli_value(work, i)
            if span is not None:
                out.append((span[0], span[1], "SECRET"))
    if ":" in work or "%" in work:
        for m in _CLI_USER_PASS_RE.finditer(work):
            if m.group("sep") == "%" and not m.group().startswith("-U"):
                continue
            span = _cli_value(work, m.end())
            if span is None:
                continue
            if work[span[0] : span[1]].isdigit() and m.group("user").isdigit():
                continue  # "docker run -u 1000:1000": a user and group id
            out.append((span[0], span[1], "SECRET"))
    return out


_URL_CREDENTIALS_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,30}://(?P<user>[^\s:/?#@\[\]]*+):")


def _stage_url_credentials(work: str) -> list[Span]:
    """`scheme://user:password@host`: the password, up to the last "@" of the authority."""
    if "://" not in work:
        return []
    out: list[Span] = []
    n = len(work)
    j = 0  # end of the current run of non-space characters (shared by the URLs inside it)
    last_at = -1  # its last "@"
    for m in _URL_CREDENTIALS_RE.finditer(work):
        start = m.end()
        if j < start:
            j = start
            while j < n and work[j] not in " \t\r\n\"'<>":
                j += 1
            last_at = work.rfind("@", start, j)
        at = last_at
        if at <= start:
            continue
        slash = work.find("/", start, at)
        if slash != -1 and work[start:slash].isdigit():
            continue  # "host:8080/path@x": a port, not a password
        if not _PLACEHOLDER_START_RE.fullmatch(work[start:at]):
            out.append((start, at, "SECRET"))
    return out


_PROSE_LABEL = (
    r"(?:(?i:\b(?:pass\s?words?|passwd|pass\s?phrase|pass\s?code|pwd|pw|pin(?:\s?(?:code|number))?"
    r"|wi-?fi\s+(?:key|password)|secret(?:\s+(?:key|code|word))?|security\s+code|verification\s+code"
    r"|one[-\s]time\s+(?:code|password)|otp|2fa\s+code|recovery\s+code|backup\s+code|cvv|cvc"
    r"|api[\s_-]?keys?|access[\s_-]?(?:keys?|tokens?)|auth[\s_-]?tokens?|refresh[\s_-]?tokens?|tokens?"
    r"|private[\s_-]?keys?|client[\s_-]?secrets?|keys?|passwort|kennwort|mot\s+de\s+passe|contrase[ñn]a|senha)\b)"
    r"|パスワード|ﾊﾟｽﾜｰﾄﾞ|暗証番号|合言葉|パスコード|パスフレーズ|認証コード|確認コード|セキュリティコード"
    r"|APIキー|アクセスキー|トークン|シークレット|秘密鍵|סיסמה|סיסמא|סיסמת|קוד\s+סודי|пароль)"
)
_PROSE_RE = re.compile(
    _PROSE_LABEL
    + r"(?P<for>[ \t]+(?i:for|to|of|on|at)[ \t]+(?:(?i:the|my|our|your|his|her)[ \t]+)?[^\s:=]{1,30}?)?"
    + r"(?P<sep>[ \t]*+(?:[:=：][ \t]*+|(?i:is|was|are|were|will\s+be|would\s+be|is\s+now|has\s+been\s+changed\s+to|changed\s+to|set\s+to|reads?|equals)[ \t]++)"
    + r"|[ \t]*(?:は|が|を|：|:)[ \t]*|[ \t]+(?:שלי[ \t]+)?(?:היא|הוא)?[ \t]*|[ \t]++)"
)
_TOKEN_LABEL_RE = re.compile(r"(?i:token|api|access|auth|refresh|private|client|secret|\bkeys?\b|キー|トークン|秘密鍵|シークレット)")


def _stage_prose(work: str) -> list[Span]:
    """ "my password is swordfish", "password for the wifi: correct horse", "パスワードはabc"."""
    low = _trigger_text(work)
    if not any(t in low for t in _PROSE_TRIGGERS):
        return []
    out: list[Span] = []
    n = len(work)
    for m in _PROSE_RE.finditer(work):
        label = work[m.start() : m.start("for") if m.group("for") is not None else m.start("sep")]
        sep = m.group("sep").strip()
        tokenish = _TOKEN_LABEL_RE.search(label) is not None and _PASSWORD_LABEL_RE.search(label) is None
        s0 = m.end()
        japanese = sep in ("は", "が", "を") or (_is_cjk_label(label) and sep in ("", ":", "："))
        if japanese and s0 < n and work[s0] not in _CLOSERS:
            # the value is the ASCII run after the particle ("パスワードはabc123です")
            j = s0
            while j < n and "!" <= work[j] <= "~" and work[j] not in "\"'`":
                j += 1
            span = (s0, _trim_bare(work, s0, j)) if j > s0 else None
        else:
            span = read_value(work, s0, words=sep in (":", "=", "：") and not tokenish)
        if span is None:
            continue
        s, e = span
        quoted = s > s0
        verb = sep not in ("", ":", "=", "：") and not japanese
        if verb and not quoted and not tokenish:
            e = _prose_phrase_end(work, s, e)
        value = work[s:e]
        if quoted:
            ok = bool(value.strip()) and (not tokenish or len(value) >= 6)
        elif tokenish:
            ok = looks_like_token(value)
        elif japanese:
            ok = value.lower() not in _PROSE_ENDS
        elif sep in (":", "=", "："):
            ok = looks_like_password(value, prose=False)
        elif not sep:  # "password hunter2": no connector, so the value must look like one
            ok = len(value) >= 4 and _looks_like_credential(value, mixed_case=False)
        else:
            ok = looks_like_password(value, prose=True)
        if ok:
            out.append((s, e, "SECRET"))
    return out


_PROSE_TRIGGERS = (
    "pass",
    "pw",
    "pin",
    "secret",
    "code",
    "token",
    "key",
    "otp",
    "cvv",
    "cvc",
    "パス",
    "ﾊﾟｽ",
    "暗証",
    "合言葉",
    "コード",
    "キー",
    "トークン",
    "シークレット",
    "秘密鍵",
    "סיסמ",
    "סודי",
    "пароль",
    "contrase",
    "senha",
    "kennwort",
    "mot de passe",
)
_PASSWORD_LABEL_RE = re.compile(r"(?i:pass|pw|pin|パスワード|ﾊﾟｽﾜｰﾄﾞ|暗証|合言葉|סיסמ|пароль|contrase|senha|kennwort)")


def _is_cjk_label(label: str) -> bool:
    return any(ord(ch) > 0x3000 for ch in label)


_WORD_RE = re.compile(r"[^\s,.;!?()\[\]{}\"']+")
_FUNCTION_WORDS = frozenset(
    "and but or so for to from at in on by with which that because then if when since until please "
    "don't dont do not is was are were it this the a an und et y enough too now again here there "
    "today tomorrow yesterday anymore".split()
)


def _prose_phrase_end(work: str, s: int, e: int) -> int:
    """After "password is": the first token, then further words up to a function word or the end
    of the clause (a passphrase such as "correct horse battery staple")."""
    n = len(work)
    pos = e
    words = 1
    while words < 6:
        if work[e - 1 : e] in (".", ",", ";", "!", "?") or pos >= n or work[pos] not in " \t":
            break
        k = pos
        while k < n and work[k] in " \t":
            k += 1
        m = _WORD_RE.match(work, k)
        if m is None:
            break
        word = m.group()
        if word.lower() in _FUNCTION_WORDS or not word.isalpha():
            break
        e = k + len(word)
        pos = e
        words += 1
    return e


# -- password words of the other languages of the product's users (``words``) ---------------
def _language_prose_re(lang: str, labels: frozenset[str]) -> re.Pattern:
    connectors = [c for c in words.CONNECTORS.get(lang, ()) if c not in (":", "=", "：")]
    connector = words.word_pattern(connectors) if connectors else "(?!)"
    if lang in words.UNSPACED:
        sep = r"(?P<sep>[ \t]*+(?:[:=：]|" + connector + r")?[ \t]*+)"
        return re.compile(r"(?P<label>" + words.word_pattern(labels) + r")" + sep)
    qualifier = ""
    if lang in words.QUALIFIERS:
        # one or two words after the preposition, never the connector itself ("del wifi es")
        qualifier = r"(?P<for>[ \t]+" + words.word_pattern(words.QUALIFIERS[lang]) + r"(?:[ \t]+(?!" + connector + r")[^\s:=]{1,24}+){1,2})?"
    sep = r"(?P<sep>[ \t]*+[:=：][ \t]*+|[ \t]++" + connector + r"[ \t]++|[ \t]++)"
    return re.compile(r"(?P<label>" + words.word_pattern(labels) + r")" + qualifier + sep)


@cache
def _language_prose() -> tuple[tuple[str, tuple[str, ...], re.Pattern], ...]:
    return tuple((lang, tuple(sorted(labels)), _language_prose_re(lang, labels)) for lang, labels in sorted(words.password_words().items()) if lang != "en")


def _looks_like_credential(value: str, *, mixed_case: bool = True) -> bool:
    """A digit, a symbol (letters of any script are no symbols; a closing "?" or "!" is the
    sentence's) or, with ``mixed_case``, a capital after the first letter."""
    value = value.rstrip("?!…")
    if _HAS_DIGIT_RE.search(value) or any(not ch.isalnum() for ch in value):
        return True
    return mixed_case and value[1:] != value[1:].lower()


def _stage_prose_languages(work: str) -> list[Span]:
    """ "mein Passwort ist hunter2", "mot de passe : …", "la contraseña del wifi es …", "hasło to …",
    "비밀번호는 …", "密码是…": a password word of the language, its own connector, the value."""
    low = _trigger_text(work)
    out: list[Span] = []
    n = len(work)
    for lang, labels, rx in _language_prose():
        if not any(label in low for label in labels):
            continue
        for m in rx.finditer(work):
            s0 = m.end()
            sep = m.group("sep").strip()
            if lang in words.UNSPACED and (s0 >= n or work[s0] not in _CLOSERS):
                j = s0
                while j < n and "!" <= work[j] <= "~" and work[j] not in "\"'`":
                    j += 1
                e = _trim_bare(work, s0, j) if j > s0 else s0
                if e > s0 and (sep or s0 > m.end("label")) and work[s0:e].lower() not in _PROSE_ENDS:
                    out.append((s0, e, "SECRET"))
                continue
            span = read_value(work, s0, words=sep in (":", "=", "："))
            if span is None:
                continue
            value = work[span[0] : span[1]]
            if span[0] > s0:  # quoted
                ok = bool(value.strip())
            elif sep in (":", "=", "："):
                ok = looks_like_password(value, prose=False)
            elif not sep:  # "Passwort hunter2": no connector, so the value must look like one
                ok = len(value) >= 4 and _looks_like_credential(value, mixed_case=False)
            else:
                ok = _looks_like_credential(value) or value.rstrip("?!…").lower() not in words.ordinary_words(lang)
            if ok and not _TEMPLATE_RE.match(value):
                out.append((span[0], span[1], "SECRET"))
    return out


_PASSPORT_RE = re.compile(
    r"(?:(?i:\bpass?ports?\b)|パスポート|旅券|דרכון|(?i:\breisepass\b)|(?i:\bpasseport\b))"
    r"(?:[\s:#.\-]|(?i:\b(?:no|number|num|nr|n°|nº|is|was|id|numéro|nummer|de)\b)|番号|は|：|מספר|מס'|שלי|הוא)*?"
    r"(?<![A-Za-z0-9])(?P<v>(?=[A-Za-z]*[0-9])[A-Za-z0-9]{6,10})(?![A-Za-z0-9])"
)


def _stage_passport(work: str) -> list[Span]:
    low = _trigger_text(work)
    if not any(t in low for t in ("passport", "pasport", "パスポート", "旅券", "דרכון", "reisepass", "passeport")):
        return []
    return [(m.start("v"), m.end("v"), "SECRET") for m in _PASSPORT_RE.finditer(work)]


_BLOB_RE = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/=_\-]{32,1024}+(?![A-Za-z0-9+/=_\-])")


def _stage_high_entropy(work: str) -> list[Span]:
    """A long random-looking token on its own: 32+ characters of the base64 alphabet in mixed
    case, with entropy above detect-secrets' Base64 limit (4.5), or above 4.2 when it also holds
    three digits or more or base64's "+" or "/"; without digits it must hold "+" or "/". A path
    (two or more lower-case words between slashes) is not a token."""
    out: list[Span] = []
    limit = _ENTROPY.entropy_limit
    for m in _BLOB_RE.finditer(work):
        blob = m.group()
        if not (re.search(r"[a-z]", blob) and re.search(r"[A-Z]", blob)):
            continue
        if "/" in blob and sum(len(seg) >= 3 and seg.replace("-", "").replace("_", "").isalpha() and seg.islower() for seg in blob.split("/")) >= 2:
            continue  # a path
        digits = sum(ch.isdigit() for ch in blob)
        base64_marks = "+" in blob or "/" in blob
        if digits == 0 and not base64_marks:
            continue  # an identifier in camel case
        threshold = limit - 0.3 if digits >= 3 or base64_marks else limit
        if entropy(blob) > threshold:
            out.append((m.start(), m.end(), "SECRET"))
    return out


STAGES: tuple[Callable[[str], list[Span]], ...] = (
    _stage_private_keys,
    _stage_token_shapes,
    _stage_url_credentials,
    _stage_assignments,
    _stage_xml,
    _stage_cli_flags,
    _stage_cli_commands,
    _stage_prose,
    _stage_prose_languages,
    _stage_passport,
)
#: Runs after the e-mail stage, so an address's domain is never read as a random token.
LATE_STAGES: tuple[Callable[[str], list[Span]], ...] = (_stage_high_entropy,)
