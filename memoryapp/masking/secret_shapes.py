"""Secrets of a known shape (SPEC §4.1): API keys and tokens, private keys, and long
random-looking tokens on their own.

Known token shapes come from Yelp's detect-secrets (its regex plugins: AWS, Azure storage,
GitHub, GitLab, Slack, Stripe, Twilio, JWT, npm, PyPI, SendGrid, Square, Telegram, Discord,
Mailchimp, OpenAI, IBM, Softlayer, Cloudant, Artifactory), plus a few shapes it does not list.
detect-secrets answers *which* strings are secrets, not where they are, and some of its patterns
match only a prefix of the token (its GitHub pattern captures "ghp"), so each of its patterns is
run here with positions and every hit is widened to the whole token it sits in. A long
random-looking token on its own (base64 alphabet, mixed case and digits, entropy above
detect-secrets' Base64 limit) is a secret too. ``secrets`` reads the values after labels.
"""

from __future__ import annotations

import re

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

Span = tuple[int, int, str]

PLACEHOLDER_START_RE = re.compile(r"\[(?:EMAIL|PHONE|IL_ID|CARD|BANK_ACCOUNT|NUMBER|SECRET)\]")


def trigger_text(work: str) -> str:
    """The lower-case text a stage checks its trigger words in, without the placeholders an
    earlier stage or round left ("[SECRET]" holds "secret", which must not wake every label
    pattern up again)."""
    return PLACEHOLDER_START_RE.sub(" ", work).lower() if "[" in work else work.lower()


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
_SHAPES: tuple[re.Pattern, ...] = tuple(
    rx for plugin in _DETECT_SECRETS_PLUGINS for rx in plugin.denylist if rx.pattern not in _SUPERLINEAR
) + (
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
_SHAPE_TRIGGERS: tuple[tuple[re.Pattern, tuple[str, ...] | None, bool], ...] = tuple(
    (rx, _TRIGGERS.get(rx.pattern), bool(rx.flags & re.IGNORECASE)) for rx in _SHAPES
)


def stage_token_shapes(work: str) -> list[Span]:
    out: list[Span] = []
    low = trigger_text(work)
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


def stage_private_keys(work: str) -> list[Span]:
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


_ENTROPY = Base64HighEntropyString()


def entropy(value: str) -> float:
    """Shannon entropy over the base64 alphabet (detect-secrets' measure)."""
    return _ENTROPY.calculate_shannon_entropy(value)


_BLOB_RE = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/=_\-]{32,1024}+(?![A-Za-z0-9+/=_\-])")


def stage_high_entropy(work: str) -> list[Span]:
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
        if (
            "/" in blob
            and sum(
                len(seg) >= 3 and seg.replace("-", "").replace("_", "").isalpha() and seg.islower()
                for seg in blob.split("/")
            )
            >= 2
        ):
            continue  # a path
        digits = sum(ch.isdigit() for ch in blob)
        base64_marks = "+" in blob or "/" in blob
        if digits == 0 and not base64_marks:
            continue  # an identifier in camel case
        threshold = limit - 0.3 if digits >= 3 or base64_marks else limit
        if entropy(blob) > threshold:
            out.append((m.start(), m.end(), "SECRET"))
    return out
