"""The fixed vocabulary of extracted topics (seed 002: English snake_case, "communication_style").

A topic is the key of an assistant memory, and the admin sees keys (SPEC §10), so what the system
models extract is stored under one of these names only — never the member's words, in any script.
Both models use this one list: the offline model places a statement with the cues below, the
OpenAI-compatible model is given the names in its prompt, and a topic it answers outside the list
falls back to the generic topic of its kind (`vocabulary_topic`).

A topic that holds one thing (`job_role`, `timezone`) is updated by every new memory on it (seed
002: the same topic is updated, not duplicated). A topic that can hold several (`many`: a
`deadline`, a `customer`) numbers them — `deadline`, `deadline_2`, … — and a memory about the same
subject as one already there (`subject_of`: the words before "is"/「は」) updates that one. The
number is the only thing added to the name: one fact per memory, each under a readable key."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    name: str
    many: bool = False
    #: How the offline model recognises a statement about it: English words (matched on word
    #: boundaries, case-insensitive) and Japanese words (matched as substrings).
    english: tuple[str, ...] = ()
    japanese: tuple[str, ...] = ()


# In the order the offline model tries them: the more specific first.
TOPICS: tuple[Topic, ...] = (
    Topic("preferred_language"),
    Topic("spoken_languages"),
    Topic(
        "product_codename",
        many=True,
        english=("code ?names?", "codenames?", "product names?"),
        japanese=("コードネーム", "製品名"),
    ),
    Topic(
        "deadline",
        many=True,
        english=("deadlines?", "due dates?", "launch date", "release date"),
        japanese=("締め切り", "締切", "期限", "納期", "リリース日"),
    ),
    Topic(
        "meeting_schedule",
        english=("meetings?", "stand-?ups?", "one-on-ones?", "1:1s?"),
        japanese=("会議", "打ち合わせ", "ミーティング", "定例"),
    ),
    Topic(
        "working_hours", english=("working hours", "work hours", "office hours"), japanese=("勤務時間", "始業", "終業")
    ),
    Topic("timezone", english=("time ?zones?", "utc", "jst", "gmt"), japanese=("タイムゾーン", "時差")),
    Topic("location", english=("office", "based in", "live in", "located"), japanese=("オフィス", "拠点", "在住")),
    Topic("job_role", english=("job", "role", "position", "job title"), japanese=("役職", "職種", "肩書")),
    Topic("manager", english=("manager", "boss", "supervisor", "reports? to"), japanese=("上司", "マネージャー")),
    Topic("colleague", many=True, english=("colleagues?", "co-?workers?", "teammates?"), japanese=("同僚",)),
    Topic("team", english=("team",), japanese=("チーム",)),
    Topic("department", english=("department", "division"), japanese=("部署", "部門")),
    Topic("employer", english=("employer", "company"), japanese=("勤務先", "会社")),
    Topic(
        "customer", many=True, english=("customers?", "clients?", "accounts?"), japanese=("顧客", "取引先", "お客様")
    ),
    Topic("project", many=True, english=("projects?",), japanese=("プロジェクト", "案件")),
    Topic(
        "response_length",
        english=("short", "shorter", "brief", "concise", "succinct", "lengthy", "detailed"),
        japanese=("簡潔", "短く", "詳しく"),
    ),
    Topic(
        "response_format",
        english=("bullets?", "bullet points?", "tables?", "markdown", "format"),
        japanese=("箇条書き", "表形式", "形式"),
    ),
    Topic(
        "tone",
        english=("tone", "formal", "informal", "casual", "polite"),
        japanese=("丁寧語", "敬語", "口調", "カジュアル"),
    ),
    Topic(
        "code_style",
        english=("code style", "indentation", "tabs", "type hints"),
        japanese=("コードスタイル", "インデント"),
    ),
    Topic(
        "preferred_editor",
        english=("editor", "ide", "vim", "emacs", "vs ?code", "neovim", "intellij"),
        japanese=("エディタ",),
    ),
    Topic(
        "programming_languages",
        english=("python", "javascript", "typescript", "golang", "rust", "ruby", "kotlin", "swift", "php", "sql"),
        japanese=(),
    ),
    Topic(
        "dietary_preference",
        english=("food", "diet", "vegetarian", "vegan", "coffee", "tea", "milk", "lunch", "allerg(?:y|ies|ic)"),
        japanese=("食事", "コーヒー", "お茶", "紅茶", "ベジタリアン", "アレルギー"),
    ),
    Topic(
        "accessibility_needs",
        english=("font size", "screen reader", "colou?r ?blind", "large text"),
        japanese=("読み上げ", "文字サイズ"),
    ),
    Topic("notification_preferences", english=("notifications?", "reminders?"), japanese=("通知", "リマインド")),
    Topic("goals", english=("goals?", "objectives?", "okrs?"), japanese=("目標",)),
    Topic("interests", english=("interests?", "hobby", "hobbies"), japanese=("趣味", "興味")),
    Topic("skills", english=("skills?", "expertise", "experienced in"), japanese=("スキル", "得意")),
    # what the OpenAI-compatible model may also answer (no offline cue)
    Topic("frequently_used_tools"),
    Topic("preferred_tools"),
    Topic("communication_style"),
    Topic("response_style"),
    Topic("writing_style"),
    Topic("documentation_style"),
    Topic("naming_conventions"),
    Topic("review_preferences"),
    Topic("current_project"),
    Topic("learning_goals"),
    Topic("work_schedule"),
    # the generic topic of each kind, when nothing above fits
    Topic("user_note", many=True),
    Topic("general_preference", many=True),
    Topic("standing_instruction", many=True),
)

BY_NAME = {topic.name: topic for topic in TOPICS}
VOCABULARY = frozenset(BY_NAME)
FALLBACK = {"fact": "user_note", "preference": "general_preference", "instruction": "standing_instruction"}
#: How many memories one `many` topic may number (`deadline` … `deadline_50`).
MAX_SLOTS = 50

_CUES = [
    (
        topic.name,
        re.compile(
            "|".join(
                [rf"\b(?:{'|'.join(topic.english)})\b"] * bool(topic.english)
                + [re.escape(word) for word in topic.japanese]
            ),
            re.IGNORECASE,
        ),
    )
    for topic in TOPICS
    if topic.english or topic.japanese
]


def classify(text: str, kind: str) -> str:
    """The offline model's topic for a statement: the first topic whose cue it contains, else the
    generic topic of its kind."""
    for name, cue in _CUES:
        if cue.search(text):
            return name
    return FALLBACK.get(kind, "user_note")


def vocabulary_topic(topic: str, kind: str) -> str:
    """A model's topic if it is in the vocabulary, else the generic topic of the memory's kind."""
    return topic if topic in VOCABULARY else FALLBACK.get(kind, "user_note")


def is_many(topic: str) -> bool:
    return BY_NAME[topic].many if topic in BY_NAME else False


def slot_key(topic: str, number: int) -> str:
    return topic if number == 1 else f"{topic}_{number}"


def slot_number(key: str, topic: str) -> int | None:
    """Which slot of `topic` the key is (`deadline` → 1, `deadline_3` → 3), or None."""
    if key == topic:
        return 1
    match = re.fullmatch(rf"{re.escape(topic)}_([2-9]|[1-9][0-9])", key)
    return int(match.group(1)) if match else None


_COPULA_SPLIT = re.compile(r"\s+(?:is|are|was|were|will be|=)\s+|は", re.IGNORECASE)


def normalised(text: str) -> str:
    """NFKC, casefolded, one space between words, no punctuation at the ends."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split()).strip(" .。!！?？、,:：;")


def subject_of(summary: str) -> str:
    """What a memory is about, for telling apart the memories of a `many` topic: the words before
    the first "is"/「は」, normalised; the whole summary when it has none."""
    return normalised(_COPULA_SPLIT.split(summary, maxsplit=1)[0])
