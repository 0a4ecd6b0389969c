"""The system model that consolidates conversations into assistant memories (SPEC §9), pluggable.

- `OfflineRulesModel` (default, `SYSTEM_MODEL=offline`): deterministic rules, no network, no
  download. It reads the *user* messages and extracts explicit requests to remember
  ("remember that …", 「覚えてください」), preferred answer languages, roles/job titles, spoken
  languages, frequently used tools and stated preferences, in English and Japanese.
  Token counts are an estimate (it has no tokenizer): per message 4 tokens of chat framing plus
  one token per 4 ASCII characters (rounded up) plus one token per non-ASCII character; the
  output is estimated the same way over its JSON. A turn that yields nothing still has input
  tokens, so it is still charged (SPEC §9).
- `OpenAICompatibleModel` (`SYSTEM_MODEL=openai`): any OpenAI-compatible chat-completions
  endpoint at `SYSTEM_MODEL_URL`, asked for JSON output; `SYSTEM_MODEL_TIMEOUT_SECONDS` per
  attempt, at most 3 attempts for timeouts, transport errors, 429 and 5xx; token counts from the
  response's `usage` (estimated as above when absent).

Callers only pass messages the masker found clean. `SystemModelError` never carries message
content: it is logged and stored as a reason code.

Topics come from the one fixed vocabulary of `memoryapp.topics`: the offline model places each
statement with its cues, the HTTP model is given the names; one fact is one memory.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings

from core import backends
from memoryapp.models import MEMORY_KINDS
from memoryapp.topics import VOCABULARY, classify, is_many, subject_of

log = logging.getLogger(__name__)

ALLOWED_KINDS = MEMORY_KINDS
TOPIC_RE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
MAX_MEMORIES_PER_TURN = 10


@dataclass(frozen=True)
class ExtractedMemory:
    """One fact a model found. `topic`: what the model answered; consolidation stores it under
    the vocabulary (`topics.vocabulary_topic`) and a slot of it (`consolidation.extracted_key`)."""

    kind: str
    topic: str
    summary: str
    details: tuple[str, ...] = ()


@dataclass
class Extraction:
    model_name: str
    input_tokens: int
    output_tokens: int
    memories: list[ExtractedMemory] = field(default_factory=list)


class SystemModelError(Exception):
    """The model failed (no charge). The message is a short reason, never content."""


class SystemModel(Protocol):
    name: str

    def extract(self, messages: list[dict[str, str]]) -> Extraction: ...


def estimate_tokens(text: str) -> int:
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return math.ceil(ascii_chars / 4) + (len(text) - ascii_chars)


def estimate_input_tokens(messages: list[dict[str, str]]) -> int:
    return sum(4 + estimate_tokens(m.get("role", "")) + estimate_tokens(m.get("content", "")) for m in messages)


def memories_as_json(memories: list[ExtractedMemory]) -> str:
    return json.dumps(
        {
            "memories": [
                {"type": m.kind, "topic": m.topic, "summary": m.summary, "details": list(m.details)} for m in memories
            ]
        },
        ensure_ascii=False,
    )


# --- shared helpers --------------------------------------------------------------------------------
def clean_sentence(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text.strip(" .。!！?？、,:：")


# --- offline rules ---------------------------------------------------------------------------------
LANGUAGES = {
    "english": "English",
    "japanese": "Japanese",
    "hebrew": "Hebrew",
    "chinese": "Chinese",
    "korean": "Korean",
    "french": "French",
    "german": "German",
    "spanish": "Spanish",
    "italian": "Italian",
    "portuguese": "Portuguese",
    "英語": "English",
    "日本語": "Japanese",
    "ヘブライ語": "Hebrew",
    "中国語": "Chinese",
    "韓国語": "Korean",
    "フランス語": "French",
    "ドイツ語": "German",
    "スペイン語": "Spanish",
    "イタリア語": "Italian",
    "ポルトガル語": "Portuguese",
}
_EN_LANG = "|".join(k for k in LANGUAGES if k.isascii())
_JA_LANG = "|".join(k for k in LANGUAGES if not k.isascii())

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")

RULES_EN_REMEMBER = re.compile(
    r"^(?:please\s+)?(?:remember|don't forget|do not forget|keep in mind|note)(?:\s+that)?[\s,:]+(?P<what>.+)$", re.I
)
RULES_JA_REMEMBER_BEFORE = re.compile(
    r"^(?:これを)?覚えて(?:ください|おいて(?:ください)?|ね)?[。、:：\s]*(?P<what>.+)$"
)
RULES_JA_REMEMBER_AFTER = re.compile(
    r"^(?P<what>.+?)(?:だ|です)?(?:ということ|こと)?(?:を|って|と)覚えて(?:ください|おいて(?:ください)?|ね)?$"
)
RULES_EN_ANSWER_LANG = re.compile(
    rf"\b(?:answer|reply|respond|write|talk|speak)(?:\s+to\s+me)?\s+(?:always\s+)?in\s+(?P<lang>{_EN_LANG})\b", re.I
)
RULES_EN_PREFER_LANG = re.compile(rf"\bI\s+prefer\s+(?P<lang>{_EN_LANG})\b", re.I)
RULES_JA_ANSWER_LANG = re.compile(rf"(?P<lang>{_JA_LANG})で(?:回答|返信|返答|答え|応答|書い|話し)")
RULES_EN_SPEAK = re.compile(rf"\bI\s+(?:can\s+)?speak\s+(?P<langs>(?:(?:{_EN_LANG})(?:\s*,\s*|\s+and\s+)?)+)", re.I)
RULES_JA_SPEAK = re.compile(rf"(?P<langs>(?:(?:{_JA_LANG})(?:と|、)?)+)を話(?:せます|します)")
RULES_EN_ROLE = re.compile(
    r"\b(?:I\s+work\s+as|I'm|I\s+am|my\s+(?:role|job|job\s+title|position)\s+is)\s+(?:a|an|the|our)\s+"
    r"(?P<role>[A-Za-z][A-Za-z \-/&]{1,60}?)(?:\s+(?:at|in|for|on)\b.*)?$",
    re.I,
)
RULES_EN_ROLE_PLAIN = re.compile(
    r"\bmy\s+(?:role|job|job\s+title|position)\s+is\s+(?P<role>[A-Za-z][A-Za-z "
    r"\-/&]{1,60}?)(?:\s+(?:at|in|for|on)\b.*)?$",
    re.I,
)
RULES_JA_ROLE = re.compile(
    r"(?:(?:私|わたし)の)?(?:役職|職業|職種|仕事|担当)は(?P<role>[^。、]{1,30}?)(?:です|だ|になります)"
)
RULES_JA_ROLE_AS = re.compile(r"(?P<role>[^。、はが]{1,30}?)として働いて(?:います|いる)")
RULES_EN_TOOLS = re.compile(
    r"\bI\s+(?:often|usually|mostly|mainly|regularly)\s+(?:use|work\s+with|write)\s+(?P<what>[^.!?]{1,80})", re.I
)
RULES_JA_TOOLS = re.compile(r"(?:よく|普段|主に|いつも)(?P<what>[^。、]{1,40}?)を使(?:います|っています)")
RULES_EN_PREFER = re.compile(
    r"\bI\s+(?:prefer|like|would\s+rather\s+have|'d\s+rather\s+have)\s+(?P<what>[^.!?]{2,120})", re.I
)
RULES_JA_PREFER = re.compile(
    r"(?P<what>[^。、]{2,60}?)(?:が好きです|を好みます|の方が好きです|がいいです|が望ましいです)"
)
_INSTRUCTION_HINTS = re.compile(
    r"\b(?:always|never|use|call|refer|write|please)\b|使って|してください|書いて|呼んで", re.I
)

_ROLE_EXCLUDE = re.compile(
    r"^(?:bit|little|lot|big|fan|sure|not|very|also|going|trying|looking|working|happy|glad|sorry)\b", re.I
)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_SPLIT.split(text) if s and s.strip()]


def _languages(raw: str) -> list[str]:
    found = []
    for token in re.findall(rf"{_EN_LANG}|{_JA_LANG}", raw, flags=re.I):
        name = LANGUAGES.get(token.lower(), LANGUAGES.get(token))
        if name and name not in found:
            found.append(name)
    return found


def _identity(memory: ExtractedMemory) -> str:
    """Which extracted memories of one turn are one: the same topic, and for a topic that holds
    several, the same subject."""
    return f"{memory.topic}\n{subject_of(memory.summary)}" if is_many(memory.topic) else memory.topic


# A statement of its own says what something is ("X is Y", 「XはY」); a sentence that refers back
# ("Use this codename…", 「今後、このコードネームを…」) or states nothing is a detail of the one before.
_STATEMENT = re.compile(r"\s(?:is|are|was|were|will be)\s|=|は|が", re.I)
_REFERS_BACK = re.compile(
    r"^(?:this|that|these|those|it|they|then|also|so|and)\b|^(?:この|その|それ|これ|あの|今後|また|なお)", re.I
)
# Two statements in one sentence: "X is A and Y is B", "X is A; Y is B", 「XはAで、YはB」.
_JOINED = re.compile(r"\s*;\s*|,?\s+and\s+(?=\S+(?:\s+\S+){0,5}\s+(?:is|are|was|were|will be)\s)|(?<=で)、", re.I)


def _statements(sentence: str) -> list[str]:
    pieces = _JOINED.split(sentence)
    # 「XはAで、」 ends its statement with the connective form: written as a sentence of its own, 「です」
    parts = [
        clean_sentence(p[:-1] + "です" if i < len(pieces) - 1 and p.endswith("で") else p) for i, p in enumerate(pieces)
    ]
    parts = [p for p in parts if p]
    return parts if len(parts) > 1 and all(_STATEMENT.search(p) for p in parts) else [sentence]


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


class OfflineRulesModel:
    """Deterministic rule-based extraction; the same messages always give the same memories.
    One fact per memory, under a topic of the fixed vocabulary (`memoryapp.topics`): never the
    member's words."""

    def __init__(self, name: str | None = None):
        self.name = name or settings.SYSTEM_MODEL_NAME

    def extract(self, messages: list[dict[str, str]]) -> Extraction:
        found: dict[str, ExtractedMemory] = {}
        for message in messages:
            if message.get("role") != "user":
                continue
            text = message.get("content", "")
            explicit = self._explicit(text)
            for memory in explicit:
                found[_identity(memory)] = memory
            if not explicit:
                for sentence in _sentences(text):
                    for memory in self._facts(sentence):
                        found.setdefault(_identity(memory), memory)
        memories = list(found.values())[:MAX_MEMORIES_PER_TURN]
        return Extraction(
            model_name=self.name,
            input_tokens=estimate_input_tokens(messages),
            output_tokens=estimate_tokens(memories_as_json(memories)),
            memories=memories,
        )

    # "remember that …" / 「覚えてください。…」: each statement of the request is one memory; a
    # sentence that refers back to it is its detail.
    def _explicit(self, text: str) -> list[ExtractedMemory]:
        stripped = text.strip()
        what = None
        for rule in (RULES_EN_REMEMBER, RULES_JA_REMEMBER_BEFORE, RULES_JA_REMEMBER_AFTER):
            match = rule.match(stripped.replace("\n", " "))
            if match:
                what = clean_sentence(match.group("what"))
                break
        if not what:
            return []
        facts: list[tuple[str, list[str]]] = []
        for sentence in (clean_sentence(s) for s in _sentences(what)):
            if not sentence:
                continue
            if facts and (_REFERS_BACK.match(sentence) or not _STATEMENT.search(sentence)):
                facts[-1][1].append(sentence)
            else:
                facts.extend((part, []) for part in _statements(sentence))
        memories = []
        for statement, details in facts:
            kind = "instruction" if _INSTRUCTION_HINTS.search(" ".join([statement, *details])) else "fact"
            summary = _capitalised(statement)[:1000]
            memories.append(
                ExtractedMemory(
                    kind=kind,
                    topic=classify(statement, kind),
                    summary=summary,
                    details=tuple(d[:500] for d in details[:20]),
                )
            )
        return memories

    def _facts(self, sentence: str) -> list[ExtractedMemory]:
        out: list[ExtractedMemory] = []
        lang = (
            RULES_EN_ANSWER_LANG.search(sentence)
            or RULES_EN_PREFER_LANG.search(sentence)
            or RULES_JA_ANSWER_LANG.search(sentence)
        )
        if lang:
            name = _languages(lang.group("lang"))[0]
            out.append(ExtractedMemory("preference", "preferred_language", f"Prefers answers in {name}"))
        speak = RULES_EN_SPEAK.search(sentence) or RULES_JA_SPEAK.search(sentence)
        if speak:
            names = _languages(speak.group("langs"))
            if names:
                out.append(ExtractedMemory("fact", "spoken_languages", "Speaks " + ", ".join(names), tuple(names)))
        role = RULES_EN_ROLE_PLAIN.search(sentence) or RULES_EN_ROLE.search(sentence)
        if role and not _ROLE_EXCLUDE.match(role.group("role").strip()):
            out.append(ExtractedMemory("fact", "job_role", f"Works as {clean_sentence(role.group('role'))}"))
        else:
            role_ja = RULES_JA_ROLE.search(sentence) or RULES_JA_ROLE_AS.search(sentence)
            if role_ja:
                out.append(ExtractedMemory("fact", "job_role", f"役職: {clean_sentence(role_ja.group('role'))}"))
        tools = RULES_EN_TOOLS.search(sentence) or RULES_JA_TOOLS.search(sentence)
        if tools:
            out.append(
                ExtractedMemory(
                    "fact",
                    "frequently_used_tools",
                    f"Often uses {clean_sentence(tools.group('what'))}"
                    if tools.re is RULES_EN_TOOLS
                    else f"よく使うもの: {clean_sentence(tools.group('what'))}",
                )
            )
        if not lang:
            prefer = RULES_EN_PREFER.search(sentence) or RULES_JA_PREFER.search(sentence)
            if prefer:
                what = clean_sentence(prefer.group("what"))
                summary = f"Prefers {what}" if prefer.re is RULES_EN_PREFER else f"{what}を好む"
                out.append(ExtractedMemory("preference", classify(what, "preference"), summary))
        return out


# --- OpenAI-compatible HTTP --------------------------------------------------------------------------
SYSTEM_PROMPT = (
    "You consolidate a conversation between a workspace member (role 'user') and an assistant into "
    "long-term memories about the member: stable preferences, facts (role, languages, frequently used "
    "tools) and explicit requests to remember something. Ignore small talk and one-off tasks. "
    "Never include personal data such as email addresses, phone numbers, ID, card, passport or bank "
    "numbers, passwords or API keys. One fact per memory: two facts are two memories. The topic is a "
    "generic category in English snake_case, never a name, a place or other words taken from the "
    "conversation; use one of these (any other topic is stored as user_note, general_preference or "
    "standing_instruction): " + ", ".join(sorted(VOCABULARY)) + ". Answer with one JSON object only: "
    '{"memories": [{"type": "preference"|"fact"|"instruction", "topic": "english_snake_case", '
    '"summary": "one sentence", "details": ["optional", "lines"]}]}. '
    'Answer {"memories": []} when there is nothing worth remembering.'
)


class OpenAICompatibleModel:
    max_attempts = 3
    backoff_seconds = 0.5

    def __init__(
        self,
        *,
        url: str | None = None,
        name: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
    ):
        self.url = endpoint_url(url if url is not None else settings.SYSTEM_MODEL_URL)
        self.name = name or settings.SYSTEM_MODEL_NAME
        self.api_key = settings.SYSTEM_MODEL_API_KEY if api_key is None else api_key
        self.timeout = settings.SYSTEM_MODEL_TIMEOUT_SECONDS if timeout is None else timeout

    def request_body(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        conversation = json.dumps(
            {"messages": [{"role": m["role"], "content": m["content"]} for m in messages]}, ensure_ascii=False
        )
        return {
            "model": self.name,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": conversation}],
        }

    def extract(self, messages: list[dict[str, str]]) -> Extraction:
        import httpx

        body = self.request_body(messages)
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last_reason = "no attempt"
        with httpx.Client(timeout=self.timeout, follow_redirects=False, trust_env=False) as client:
            for attempt in range(1, self.max_attempts + 1):
                try:
                    response = client.post(self.url, json=body, headers=headers)
                except httpx.TimeoutException:
                    last_reason = "timeout"
                except httpx.TransportError as exc:
                    last_reason = f"transport error ({type(exc).__name__})"
                else:
                    if response.status_code == 429 or response.status_code >= 500:
                        last_reason = f"HTTP {response.status_code}"
                    elif response.status_code != 200:
                        raise SystemModelError(f"HTTP {response.status_code}")
                    else:
                        return self.parse(response, messages)
                log.warning("system model attempt %d/%d failed: %s", attempt, self.max_attempts, last_reason)
                if attempt < self.max_attempts:
                    time.sleep(self.backoff_seconds * attempt)
        raise SystemModelError(last_reason)

    def parse(self, response, messages: list[dict[str, str]]) -> Extraction:
        try:
            payload = response.json()
            content = payload["choices"][0]["message"]["content"]
            data = json.loads(content) if isinstance(content, str) else content
            raw_memories = data["memories"] if isinstance(data, dict) else data
            if not isinstance(raw_memories, list):
                raise TypeError
        except (ValueError, KeyError, IndexError, TypeError):
            raise SystemModelError("the response is not the JSON asked for") from None
        memories = [m for m in (coerce_memory(item) for item in raw_memories[:MAX_MEMORIES_PER_TURN]) if m is not None]
        usage = payload.get("usage") if isinstance(payload, dict) else None
        input_tokens = _int(usage, "prompt_tokens")
        output_tokens = _int(usage, "completion_tokens")
        if input_tokens is None:
            input_tokens = estimate_input_tokens(self.request_body(messages)["messages"])
        if output_tokens is None:
            output_tokens = estimate_tokens(content if isinstance(content, str) else json.dumps(content))
        return Extraction(
            model_name=self.name, input_tokens=input_tokens, output_tokens=output_tokens, memories=memories
        )


def endpoint_url(base: str) -> str:
    if not base:
        raise SystemModelError("SYSTEM_MODEL_URL is not set")
    base = base.rstrip("/")
    return base if base.endswith("/chat/completions") else f"{base}/chat/completions"


def _int(usage: Any, key: str) -> int | None:
    if (
        isinstance(usage, dict)
        and isinstance(usage.get(key), int)
        and not isinstance(usage.get(key), bool)
        and usage[key] >= 0
    ):
        return usage[key]
    return None


def coerce_memory(item: Any) -> ExtractedMemory | None:
    """A model's memory, or None when it does not have the shape we store (it is dropped)."""
    if not isinstance(item, dict):
        return None
    kind = str(item.get("type") or item.get("kind") or "fact").strip().lower()
    topic = str(item.get("topic") or "").strip().lower().replace("-", "_").replace(" ", "_")
    summary = item.get("summary")
    details = item.get("details") or []
    if isinstance(details, str):
        details = details.splitlines()
    if (
        not isinstance(summary, str)
        or not summary.strip()
        or not TOPIC_RE.match(topic)
        or len(topic) > 120
        or not isinstance(details, list)
    ):
        return None
    kind = kind if kind in ALLOWED_KINDS else "fact"
    lines = tuple(str(d).strip()[:500] for d in details if isinstance(d, (str, int, float)) and str(d).strip())[:20]
    return ExtractedMemory(kind=kind, topic=topic, summary=summary.strip()[:1000], details=lines)


def get_system_model() -> SystemModel:
    """The model SYSTEM_MODEL configures (core.backends)."""
    return backends.load("SYSTEM_MODEL")
