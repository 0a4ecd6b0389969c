"""Generated personal data in the forms issue 22 found stored in clear (SPEC §4.1), for the
masking tests and bench/masking_corpus.py: Faker values in twelve locales, each written in one of
the forms below and put into a sentence of the locale's language. Seeded, so every run sees the
same corpus. The templates hold no digits, so whatever digits are left after masking came from
the value.

Forms:

- ``digits``    digit groups of any size (a group of 6 or more among them, or many small ones)
                joined by spaces, commas, dots, dashes, slashes, no-break or thin spaces, or an
                invisible character, 10 to 19 digits in all (card numbers among them);
- ``cli``       credentials on a command line (``mysql -u root -p…``, ``curl -u user:pw``,
                ``sshpass -p …``, ``PGPASSWORD=… psql``, ``git clone https://user:pw@…``);
- ``email``     addresses written out or disguised (``name at example dot com``,
                ``name[at]example[.]com``, spaces or no-break spaces around ``@``, quoted local
                parts, ``アット``/``ドット``);
- ``secret``    a password after the locale's own password word ("Passwort ist …");
- ``phone``     a local number without an area code right after a phone word in the locale's
                language ("ruf mich an unter 555 1234").
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from faker import Faker
from stdnum import luhn

#: The product's users' locales (a language each): the Faker locales of the generated tests.
LOCALES = ("en_US", "ja_JP", "he_IL", "de_DE", "fr_FR", "es_ES", "it_IT", "pt_BR", "nl_NL", "pl_PL", "ko_KR", "zh_CN")
FORMS = ("digits", "cli", "email", "secret", "phone")


@dataclass(frozen=True)
class Sample:
    form: str
    locale: str
    value: str  # the part that must not survive (a password, a local part, the digits)
    text: str


# -- sentences, per language (no digits in any template) -------------------------------------
DIGIT_TEMPLATES = {
    "en": ("wire it to {} please", "my account is {}", "the number is {} thanks", "{}", "ref: {}"),
    "ja": ("振込先は{}です。", "番号：{}", "{}に送ってください"),
    "he": ("תעביר ל {} בבקשה", "המספר שלי {}", "מספר: {}"),
    "de": ("überweise es an {} bitte", "meine Nummer ist {}", "Referenz: {}"),
    "fr": ("vire-le sur {} stp", "mon numéro est {}", "référence : {}"),
    "es": ("transfiere a {} por favor", "mi número es {}", "referencia: {}"),
    "it": ("bonifico su {} grazie", "il mio numero è {}", "riferimento: {}"),
    "pt": ("transfere para {} por favor", "meu número é {}", "referência: {}"),
    "nl": ("maak het over naar {} aub", "mijn nummer is {}", "referentie: {}"),
    "pl": ("przelej na {} proszę", "mój numer to {}", "numer: {}"),
    "ko": ("{}로 송금해 주세요", "번호는 {}입니다", "참조: {}"),
    "zh": ("请转账到{}谢谢", "我的号码是{}", "编号：{}"),
}
EMAIL_TEMPLATES = {
    "en": ("write to {} tomorrow", "my email is {}", "Contact: {}", "{}", "reach Dana at {} after lunch"),
    "ja": ("連絡先は {} です。", "メール：{}", "{} までお願いします"),
    "he": ("תכתבו ל {} מחר", "המייל שלי {}", "{}"),
    "de": ("schreib an {} morgen", "meine E-Mail ist {}", "Kontakt: {}"),
    "fr": ("écris à {} demain", "mon e-mail est {}", "contact : {}"),
    "es": ("escribe a {} mañana", "mi correo es {}", "contacto: {}"),
    "it": ("scrivi a {} domani", "la mia email è {}", "contatto: {}"),
    "pt": ("escreve para {} amanhã", "meu e-mail é {}", "contato: {}"),
    "nl": ("mail naar {} morgen", "mijn e-mail is {}", "contact: {}"),
    "pl": ("napisz na {} jutro", "mój e-mail to {}", "kontakt: {}"),
    "ko": ("{} 로 메일 주세요", "이메일: {}", "연락처는 {} 입니다"),
    "zh": ("请发邮件到 {} 谢谢", "我的邮箱是 {}", "邮箱：{}"),
}
CLI_TEMPLATES = {
    "en": ("run {} to get in", "I use `{}` every day", "{}"),
    "ja": ("接続は {} です。", "コマンド：{}", "{}"),
    "he": ("תריץ {} כדי להתחבר", "{}"),
    "de": ("mit {} kommst du rein", "Befehl: {}"),
    "fr": ("lance {} pour te connecter", "commande : {}"),
    "es": ("ejecuta {} para entrar", "comando: {}"),
    "it": ("esegui {} per entrare", "comando: {}"),
    "pt": ("roda {} para entrar", "comando: {}"),
    "nl": ("draai {} om in te loggen", "commando: {}"),
    "pl": ("uruchom {} żeby wejść", "polecenie: {}"),
    "ko": ("접속은 {} 로 하세요", "명령어: {}"),
    "zh": ("用 {} 登录", "命令：{}"),
}
# "{}" is the password; the words around it are each language's own ("is", "my", a colon).
SECRET_TEMPLATES = {
    "en": ("my password is {}", "password: {}", "the wifi password is {} so keep it safe", "Password {}"),
    "ja": ("パスワードは{}です。", "パスワード：{}", "暗証番号は {} です", "パスワードは {}"),
    "he": ("הסיסמה שלי היא {}", "סיסמה: {}", "הסיסמה היא {}"),
    "de": (
        "mein Passwort ist {}",
        "Passwort: {}",
        "das Kennwort lautet {}",
        "das WLAN-Passwort ist {} bitte nicht weitersagen",
    ),
    "fr": ("mon mot de passe est {}", "mot de passe : {}", "le mot de passe du wifi est {}", "mdp : {}"),
    "es": ("mi contraseña es {}", "contraseña: {}", "la contraseña del wifi es {}", "la clave es {}"),
    "it": ("la mia password è {}", "password: {}", "la password del wifi è {}"),
    "pt": ("minha senha é {}", "senha: {}", "a senha do wifi é {}", "a palavra-passe é {}"),
    "nl": ("mijn wachtwoord is {}", "wachtwoord: {}", "het wachtwoord van de wifi is {}"),
    "pl": ("moje hasło to {}", "hasło: {}", "hasło do wifi to {}", "hasło brzmi {}"),
    "ko": ("비밀번호는 {}", "비밀번호: {}", "와이파이 비밀번호는 {} 입니다", "내 비번은 {}"),
    "zh": ("密码是{}", "我的密码是 {}", "密码：{}", "WiFi密码是{}"),
}
# "Password {}" has no connector: a plain word after it ("Password manager") is no password, so
# only values with a digit or a symbol go there (the documented rule).
NO_CONNECTOR = frozenset({"Password {}"})
PHONE_TEMPLATES = {
    "en": ("call {} tonight", "phone: {}", "my mobile is {}", "text me at {}", "tel. {}"),
    "ja": ("電話は{}です。", "携帯：{}", "電話番号 {}"),
    "he": ("טלפון {}", "נייד: {}", "מספר הטלפון שלי {}"),
    "de": ("ruf mich an unter {}", "Telefon: {}", "Handy {}", "Tel. {}"),
    "fr": ("appelle-moi au {}", "téléphone : {}", "mon portable est le {}", "tél. {}"),
    "es": ("llámame al {}", "teléfono: {}", "mi móvil es {}", "tel. {}"),
    "it": ("chiamami al {}", "telefono: {}", "il mio cellulare è {}", "tel. {}"),
    "pt": ("me liga no {}", "telefone: {}", "meu celular é {}", "tel. {}"),
    "nl": ("bel me op {}", "telefoon: {}", "mijn mobiel is {}", "tel. {}"),
    "pl": ("zadzwoń pod {}", "telefon: {}", "mój numer komórki to {}", "tel. {}"),
    "ko": ("전화 {}", "휴대폰 번호는 {}입니다", "전화번호: {}"),
    "zh": ("电话 {}", "我的手机是{}", "打电话给我 {}", "联系电话：{}"),
}

# -- values -------------------------------------------------------------------------------------
DIGIT_SEPARATORS = (" ", ",", ".", "-", "/", " - ", " / ", "\u00a0", "\u202f", ", ", " \u200b", "-\u2060")
_DATE_SHAPE = re.compile(r"(?:^|\D)(?:\d{4}\D\d{1,2}\D\d{1,2}|\d{1,2}\D\d{1,2}\D\d{2,4})(?:\D|$)")


def _digit_sources(fake: Faker, rng: random.Random) -> str:
    pick = rng.randrange(5)
    if pick == 0:
        return fake.credit_card_number()
    if pick == 1:
        return fake.msisdn()
    if pick == 2:
        return re.sub(r"\D", "", fake.bban()) or fake.msisdn()
    return str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(rng.randint(9, 18)))


def _split(digits: str, rng: random.Random, *, min_size: int, first_min: int = 1) -> list[str]:
    groups: list[str] = []
    pos = 0
    while pos < len(digits):
        left = len(digits) - pos
        low = first_min if not groups else min_size
        size = rng.randint(low, max(low, min(9, left)))
        if 0 < left - size < min_size:
            size = left
        groups.append(digits[pos : pos + size])
        pos += size
    return groups


def grouped_digits(fake: Faker, rng: random.Random) -> str:
    """Digits from a Faker value in groups of any size joined by one separator (one kind per
    value). Documented exceptions are not generated: a list after ", " of groups under 3 digits
    (a list of small numbers), one dot (a decimal number), a version or IPv4 shape, a calendar
    date inside the groups."""
    while True:
        digits = _digit_sources(fake, rng)
        if not 10 <= len(digits) <= 19:
            continue
        sep = rng.choice(DIGIT_SEPARATORS)
        if sep == ", ":  # the one list form that is a number: a card in groups of four
            digits = fake.credit_card_number()
            if len(digits) != 16:
                continue
            groups = [digits[i : i + 4] for i in range(0, len(digits), 4)]
        elif sep == ".":
            groups = _split(digits, rng, min_size=2, first_min=3)
        else:
            groups = _split(digits, rng, min_size=1)
        if len(groups) < 2 or (sep == "." and len(groups) < 3):
            continue
        if rng.random() < 0.3 and max(map(len, groups)) < 6:
            continue  # keep groups of 6+ frequent: they are the form the old masker missed
        value = sep.join(groups)
        if _DATE_SHAPE.search(value.replace("\u200b", "").replace("\u2060", "")):
            continue
        return value


def cli_credentials(fake: Faker, rng: random.Random) -> tuple[str, str]:
    user = fake.user_name()
    password = fake.password(length=rng.randint(8, 16), special_chars=rng.random() < 0.5)
    host = fake.domain_name()
    forms = (
        f"mysql -u {user} -p{password} app",
        f"mysql -h {host} -u{user} -p{password}",
        f"mysqldump --user={user} --password={password} app",
        f"mysql --password {password} -u {user}",
        f"curl -u {user}:{password} https://{host}/api",
        f"curl --user {user}:{password} https://{host}/",
        f"wget --user={user} --password={password} https://{host}/f.zip",
        f"sshpass -p {password} ssh {user}@{host}",
        f"sshpass -p '{password}' scp f {host}:",
        f"PGPASSWORD={password} psql -h {host} -U {user}",
        f"MYSQL_PWD={password} mysql -u {user}",
        f"redis-cli -h {host} -a {password}",
        f"docker login -u {user} -p {password}",
        f"git clone https://{user}:{password}@{host}/repo.git",
        f"smbclient //{host}/share -U {user}%{password}",
        f"sqlcmd -S {host} -U {user} -P {password}",
        f"ldapsearch -D cn={user} -w {password}",
    )
    return password, rng.choice(forms)


_SPELLED_DOT = {"en": " dot ", "ja": " ドット "}


def disguised_email(fake: Faker, rng: random.Random, lang: str) -> tuple[str, str]:
    local = re.sub(r"[^A-Za-z0-9._-]", "", fake.user_name()) or "dana"
    domain = rng.choice([fake.free_email_domain(), fake.domain_name()])
    pick = rng.randrange(9 if lang == "ja" else 8)
    if pick == 0:
        return local, f"{local} at {domain.replace('.', ' dot ')}"
    if pick == 1:
        return local, f"{local} at {domain}"
    if pick == 2:
        return local, f"{local}[at]{domain.replace('.', '[.]')}"
    if pick == 3:
        return local, f"{local} (at) {domain.replace('.', ' (dot) ')}"
    if pick == 4:
        return local, f"{local} @ {domain}"
    if pick == 5:
        return local, rng.choice([f"{local}\u00a0@\u00a0{domain}", f"{local}@ {domain}", f"{local} @{domain}"])
    if pick == 6:
        return local, f'"{local}"@{domain}'
    if pick == 7:
        return local, f"{local.upper()} AT {domain.upper().replace('.', ' DOT ')}"
    return (
        local,
        f"{local}{rng.choice(['アット', ' アット '])}{domain.replace('.', rng.choice(['ドット', ' ドット ', '.']))}",
    )


def labelled_password(fake: Faker, rng: random.Random) -> str:
    pick = rng.randrange(4)
    if pick == 0:
        return fake.password(length=rng.randint(8, 16))
    if pick == 1:
        return fake.password(length=rng.randint(6, 12), special_chars=False)
    letters = re.sub(r"[^A-Za-z]", "", fake.user_name())[:10].lower() or "swordfish"
    if pick == 2:
        return letters + str(rng.randint(1, 9999))
    return letters if len(letters) >= 5 else letters + "fish"  # a plain word, no digit or symbol


_LOCAL_SHAPES = (
    "###-####",
    "### ####",
    "#######",
    "##-##-##",
    "## ## ##",
    "####-####",
    "#### ####",
    "### ## ##",
    "###.####",
    "######",
)


def local_phone(rng: random.Random) -> str:
    """A local number without an area code; not one that reads as a calendar date ("22-05-64"
    after "call on" is a date: the documented exception)."""
    while True:
        shape = rng.choice(_LOCAL_SHAPES)
        digits = [str(rng.randint(2, 9))] + [str(rng.randint(0, 9)) for _ in range(shape.count("#") - 1)]
        it = iter(digits)
        value = "".join(next(it) if ch == "#" else ch for ch in shape)
        if not _DATE_SHAPE.search(value) or not _is_calendar_date(value):
            return value


def _is_calendar_date(value: str) -> bool:
    a, b, _ = (int(p) for p in re.split(r"\D", value)[:3])
    return (1 <= a <= 31 and 1 <= b <= 12) or (1 <= a <= 12 and 1 <= b <= 31)


def build_forms_corpus(seed: int = 22, per_form: int = 60) -> list[Sample]:
    """``per_form`` samples of each form in each of the twelve locales (3,600 by default)."""
    rng = random.Random(seed)
    samples: list[Sample] = []
    for index, locale in enumerate(LOCALES):
        lang = locale[:2]
        fake = Faker(locale)
        fake.seed_instance(seed * 100 + index)
        for _ in range(per_form):
            value = grouped_digits(fake, rng)
            samples.append(Sample("digits", locale, value, rng.choice(DIGIT_TEMPLATES[lang]).format(value)))
            password, command = cli_credentials(fake, rng)
            samples.append(Sample("cli", locale, password, rng.choice(CLI_TEMPLATES[lang]).format(command)))
            local, written = disguised_email(fake, rng, lang)
            samples.append(Sample("email", locale, local, rng.choice(EMAIL_TEMPLATES[lang]).format(written)))
            password = labelled_password(fake, rng)
            template = rng.choice([t for t in SECRET_TEMPLATES[lang] if not (password.isalpha() and t in NO_CONNECTOR)])
            samples.append(Sample("secret", locale, password, template.format(password)))
            number = local_phone(rng)
            samples.append(Sample("phone", locale, number, rng.choice(PHONE_TEMPLATES[lang]).format(number)))
    return samples


def is_card(value: str) -> bool:
    digits = re.sub(r"\D", "", value)
    return 12 <= len(digits) <= 19 and digits[0] != "0" and luhn.is_valid(digits)


def survivors(sample: Sample, masked: str) -> list[str]:
    """What of the value can still be read in the masked text (empty when nothing)."""
    found: list[str] = []
    value = sample.value
    if sample.form in ("digits", "phone"):
        left = "".join(ch for ch in masked if ch.isdigit())
        if len(left) >= 4:
            found.append(f"{len(left)} digits left: {left!r}")
        return found
    rest = sample.text.replace(value, "")
    if sample.form == "email":
        if len(value) >= 3 and value.lower() in masked.lower() and value.lower() not in rest.lower():
            found.append(f"local part {value!r}")
        return found
    # a password: no run of 5 of its characters (that the sentence itself does not hold)
    for i in range(max(1, len(value) - 4)):
        piece = value[i : i + 5]
        if len(piece) >= 4 and piece in masked and piece not in rest.replace(value, "") and piece not in "[SECRET]":
            found.append(f"piece {piece!r}")
            break
    return found
