"""Secrets after a label (SPEC §4.1): values after password / secret / token / key words in
every form people paste, and passport numbers after the word. Token shapes and long random
tokens are ``secret_shapes``; what a label is and how its value reads is ``secret_labels``.

Values after a label are found by reading the text the way people write them:

- assignments — `key=value`, `key: value`, `"key": "value"`, `KEY := value`, `key => value`,
  env files (`PGPASSWORD=…`), connection strings (`…;AccountKey=…==;`), query strings;
- URLs with a password (`postgres://user:pw@host/db`);
- prose — "my password is swordfish", "the wifi password: correct horse battery staple",
  "パスワードはhunter2です", "הסיסמה שלי היא …", and the labels of the users' twelve languages;
- `Authorization: Bearer …` / `Basic …` headers, CLI flags (`--password hunter2`) and the short
  password flags of common commands (`mysql -phunter2`, `curl -u admin:hunter2`).

Every pattern here runs in time linear in the text: labels are found by one scan of identifier
runs (possessive quantifiers, no nested repetition), and values are read by plain loops.

Over ~400 lines on purpose: one reader of "label, then value" in every form; its steps share
the scanning state.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from memoryapp.masking import words
from memoryapp.masking.secret_labels import (
    CLOSERS,
    HAS_DIGIT_RE,
    NOT_A_VALUE,
    PROSE_ENDS,
    TEMPLATE_RE,
    label_class,
    looks_like_password,
    looks_like_token,
    read_value,
    trim_bare,
    value_is_secret,
)
from memoryapp.masking.secret_shapes import (
    PLACEHOLDER_START_RE,
    stage_high_entropy,
    stage_private_keys,
    stage_token_shapes,
    trigger_text,
)

Span = tuple[int, int, str]


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
        if (cls == "password" and len(value) >= 3 and looks_like_password(value, prose=True)) or looks_like_token(
            value
        ):
            out.append((span[0], span[1], "SECRET"))
    return out


# Commands whose short flag takes a password (its manual page's option), and those where the
# password may be glued to the flag ("mysql -phunter2", "7z a -pSecret"). A flag is read only in
# the command's own part of the line (up to the next command, ";", "|", "&&" or line end), so
# "ssh -p 22" or "mkdir -p" is never a password.
_CLI_PASSWORD_FLAGS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        (
            "mysql",
            "mysqldump",
            "mysqladmin",
            "mysqlimport",
            "mysqlshow",
            "mysqlcheck",
            "mysqlsh",
            "mariadb",
            "mariadb-dump",
            "mariadb-admin",
        ),
        ("p",),
    ),
    "sshpass": ("p",),
    **dict.fromkeys(("redis-cli", "valkey-cli", "keydb-cli"), ("a",)),
    "login": ("p",),  # docker / podman / helm / az / oc / cf / buildah / skopeo … login -p
    **dict.fromkeys(("sqlcmd", "bcp", "osql", "isql", "ipmitool"), ("P",)),
    **dict.fromkeys(("zip", "unzip", "zipcloak"), ("P",)),
    **dict.fromkeys(("7z", "7za", "7zr", "rar", "unrar"), ("p",)),
    **dict.fromkeys(
        ("ldapsearch", "ldapmodify", "ldapadd", "ldapdelete", "ldapwhoami", "ldappasswd", "ldapcompare", "ldapmodrdn"),
        ("w",),
    ),
    **dict.fromkeys(
        ("mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport", "mongostat", "mongotop"), ("p",)
    ),
    "openssl": ("k", "pass", "passin", "passout"),
    **dict.fromkeys(("rdesktop", "xfreerdp"), ("p",)),
}
_CLI_GLUED = frozenset(
    {
        "mysql",
        "mysqldump",
        "mysqladmin",
        "mysqlimport",
        "mysqlshow",
        "mysqlcheck",
        "mysqlsh",
        "mariadb",
        "mariadb-dump",
        "mariadb-admin",
        "sshpass",
        "7z",
        "7za",
        "7zr",
        "rar",
        "unrar",
    }
)
_CLI_COMMAND_RE = re.compile(
    r"(?<![\w.\-])(?P<cmd>"
    + "|".join(re.escape(c) for c in sorted(_CLI_PASSWORD_FLAGS, key=len, reverse=True))
    + r")(?![\w\-])"
)
_CLI_FLAG_RES = {
    flags: re.compile(
        r"(?<![\w\-])-(?P<flag>" + "|".join(sorted(flags, key=len, reverse=True)) + r")(?P<rest>[^\s\-]?)"
    )
    for flags in set(_CLI_PASSWORD_FLAGS.values())
}
_CLI_SEGMENT_END_RE = re.compile(r"[\n;|]|&&")
# "-u user:password" (curl, wget's --user), "--proxy-user", "-U user%password" (smbclient)
_CLI_USER_PASS_RE = re.compile(
    r"(?<![\w\-])(?:-u|--user|--proxy-user|-U|--userpass)(?:[ "
    r"\t]++|=)['\"]?(?P<user>[^\s:%'\"]{1,64}+)(?P<sep>[:%])(?=\S)"
)


def _cli_value(work: str, i: int) -> tuple[int, int] | None:
    span = read_value(work, i, words=False)
    if span is None:
        return None
    value = work[span[0] : span[1]]
    if value.startswith("-") or TEMPLATE_RE.match(value) or value.lower() in NOT_A_VALUE:
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
        if not PLACEHOLDER_START_RE.fullmatch(work[start:at]):
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
    + r"(?P<sep>[ \t]*+(?:[:=：][ \t]*+"
    r"|(?i:is|was|are|were|will\s+be|would\s+be|is\s+now|has\s+been\s+changed\s+to|changed\s+to|set\s+to|"
    r"reads?|equals)[ \t]++)" + r"|[ \t]*(?:は|が|を|：|:)[ \t]*|[ \t]+(?:שלי[ \t]+)?(?:היא|הוא)?[ \t]*|[ \t]++)"
)
_TOKEN_LABEL_RE = re.compile(
    r"(?i:token|api|access|auth|refresh|private|client|secret|\bkeys?\b|キー|トークン|秘密鍵|シークレット)"
)


def _stage_prose(work: str) -> list[Span]:
    """ "my password is swordfish", "password for the wifi: correct horse", "パスワードはabc"."""
    low = trigger_text(work)
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
        if japanese and s0 < n and work[s0] not in CLOSERS:
            # the value is the ASCII run after the particle ("パスワードはabc123です")
            j = s0
            while j < n and "!" <= work[j] <= "~" and work[j] not in "\"'`":
                j += 1
            span = (s0, trim_bare(work, s0, j)) if j > s0 else None
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
            ok = value.lower() not in PROSE_ENDS
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
        qualifier = (
            r"(?P<for>[ \t]+"
            + words.word_pattern(words.QUALIFIERS[lang])
            + r"(?:[ \t]+(?!"
            + connector
            + r")[^\s:=]{1,24}+){1,2})?"
        )
    sep = r"(?P<sep>[ \t]*+[:=：][ \t]*+|[ \t]++" + connector + r"[ \t]++|[ \t]++)"
    return re.compile(r"(?P<label>" + words.word_pattern(labels) + r")" + qualifier + sep)


@cache
def _language_prose() -> tuple[tuple[str, tuple[str, ...], re.Pattern], ...]:
    return tuple(
        (lang, tuple(sorted(labels)), _language_prose_re(lang, labels))
        for lang, labels in sorted(words.password_words().items())
        if lang != "en"
    )


def _looks_like_credential(value: str, *, mixed_case: bool = True) -> bool:
    """A digit, a symbol (letters of any script are no symbols; a closing "?" or "!" is the
    sentence's) or, with ``mixed_case``, a capital after the first letter."""
    value = value.rstrip("?!…")
    if HAS_DIGIT_RE.search(value) or any(not ch.isalnum() for ch in value):
        return True
    return mixed_case and value[1:] != value[1:].lower()


def _stage_prose_languages(work: str) -> list[Span]:
    """ "mein Passwort ist hunter2", "mot de passe : …", "la contraseña del wifi es …", "hasło to …",
    "비밀번호는 …", "密码是…": a password word of the language, its own connector, the value."""
    low = trigger_text(work)
    out: list[Span] = []
    n = len(work)
    for lang, labels, rx in _language_prose():
        if not any(label in low for label in labels):
            continue
        for m in rx.finditer(work):
            s0 = m.end()
            sep = m.group("sep").strip()
            if lang in words.UNSPACED and (s0 >= n or work[s0] not in CLOSERS):
                j = s0
                while j < n and "!" <= work[j] <= "~" and work[j] not in "\"'`":
                    j += 1
                e = trim_bare(work, s0, j) if j > s0 else s0
                if e > s0 and (sep or s0 > m.end("label")) and work[s0:e].lower() not in PROSE_ENDS:
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
            if ok and not TEMPLATE_RE.match(value):
                out.append((span[0], span[1], "SECRET"))
    return out


_PASSPORT_RE = re.compile(
    r"(?:(?i:\bpass?ports?\b)|パスポート|旅券|דרכון|(?i:\breisepass\b)|(?i:\bpasseport\b))"
    r"(?:[\s:#.\-]|(?i:\b(?:no|number|num|nr|n°|nº|is|was|id|numéro|nummer|de)\b)|番号|は|：|מספר|מס'|שלי|הוא)*?"
    r"(?<![A-Za-z0-9])(?P<v>(?=[A-Za-z]*[0-9])[A-Za-z0-9]{6,10})(?![A-Za-z0-9])"
)


def _stage_passport(work: str) -> list[Span]:
    low = trigger_text(work)
    if not any(t in low for t in ("passport", "pasport", "パスポート", "旅券", "דרכון", "reisepass", "passeport")):
        return []
    return [(m.start("v"), m.end("v"), "SECRET") for m in _PASSPORT_RE.finditer(work)]


STAGES: tuple[Callable[[str], list[Span]], ...] = (
    stage_private_keys,
    stage_token_shapes,
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
LATE_STAGES: tuple[Callable[[str], list[Span]], ...] = (stage_high_entropy,)
