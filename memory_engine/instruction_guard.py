# ruff: noqa: E501  (the phrase alternations read best one rule to a line)
"""Stored instructions never reach a model: the scanner, the item filter and its counter.

A memory is data. Text that reads as instructions to an AI — overriding earlier
instructions, addressing future agents or models, or carrying chat-template role markers —
is refused on write (``400 INSTRUCTION_REJECTED``, memory_engine.services.memories) and
dropped from every read that hands stored text toward a model (knowledge_search, and so
context injection, the search API and the agent tools). A dropped item stays stored; each
drop is logged (id, path, rule — never the text) and counted in
``memory_engine_instructions_blocked_total``. No setting turns the guard off.

    rule = reads_as_instruction(text)            # "override", "address_ai", "role_marker" or None
    rule = first_instruction(text, tags, metadata)
    kept = drop_instructions(hits, path="search", fields=lambda h: (h.id, "", (h.text, h.tags)))

Text is compared after :func:`normalise` (NFKC, invisible characters removed), the same
normaliser :func:`memory_engine.injection.neutralise` uses, so full-width or zero-width
spellings of a marker or phrase match too. Phrase rules also read the text casefolded,
without accents and with punctuation collapsed to spaces ("ignore—all—previous…").
Ordinary imperatives ("always escalate refunds over £500") match no rule: the rules look for
what only an injection says — a reference to *instructions/prompts/rules* being replaced, an
addressee that is an AI, or a template marker.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from prometheus_client import Counter

__all__ = [
    "BLOCKED",
    "drop_instructions",
    "first_instruction",
    "item_strings",
    "normalise",
    "reads_as_instruction",
    "record_block",
]

logger = logging.getLogger("memory_engine.instruction_guard")

# Characters that render as nothing (zero-width spaces and joiners, soft hyphen, bidi
# controls, word joiners, BOM, variation selectors, Hangul fillers, tag characters): inside a
# marker or phrase they hide it from a pattern while a model may still read it whole.
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U000e0000-\U000e007f]"
)


def normalise(text: str) -> str:
    """NFKC-normalised (full-width ``＜｜im_start｜＞`` becomes ``<|im_start|>``) and stripped of
    invisible characters, so no look-alike or interrupted spelling slips past a pattern."""
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))


def _words(text: str) -> str:
    """Casefolded, accents removed, every run of non-alphanumerics one space."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return " " + " ".join(re.findall(r"[^\W_]+", folded)) + " "


# --------------------------------------------------------------------------- rules
# Markers are matched on the normalised text (punctuation matters); phrases on _words().

_ROLE_MARKER = re.compile(
    r"<\|\s*[a-z_]{2,30}\s*\|>"                                   # <|im_start|>, <|system|>, <|eot_id|>
    r"|\[\s*/?\s*inst\s*\]"                                       # [INST] [/INST]
    r"|<<\s*/?\s*sys\s*>>"                                        # <<SYS>>
    r"|</?\s*(?:knowledge|system|assistant|start_of_turn|end_of_turn|im_start|im_end)\s*>"
    r"|^\s*#{1,6}\s*(?:system|assistant|instructions?|human)\s*(?:prompt)?\s*:?\s*$"  # ### System:
    r"|^\s*#{2,6}\s*(?:system|assistant|instructions?)\b"
    r"|^\s*(?:system|human)\s*(?:prompt|message)?\s*:\s",       # System: … / Human: … role prefixes
    re.IGNORECASE | re.MULTILINE,
)

_NOT = r"(?<! not)(?<! never)(?<! don t)(?<! dont)(?<! nicht)(?<! no)(?<! pas)(?<! ne)"


def _override(verbs: str, quals: str, nouns: str) -> str:
    """A verb of setting aside, then instructions qualified as earlier/the system's/yours (the
    qualifier before or after the noun); a negated verb ("never ignore…") is no injection."""
    return (rf"{_NOT} (?:{verbs})(?: \w+){{0,3}} (?:(?:{quals})(?: \w+){{0,2}} (?:{nouns})"
            rf"|(?:{nouns})(?: \w+){{0,1}} (?:{quals})) ")


def _now_you_are(lead: str, what: str) -> str:
    """"You are now <an unrestricted AI>": a new identity for the reader."""
    return rf" (?:{lead})(?: \w+){{0,3}} (?:{what}) "


_OVERRIDE = re.compile(
    "|".join([
        _override("ignore|disregard|forget|override|overrule|bypass|discard|skip",
                  "previous|previously|prior|above|earlier|preceding|original|initial|system|your|all prior|all earlier",
                  "instructions?|prompts?|directives?|guidelines|guardrails|programming|rules|system prompt|orders"),
        r" (?:ignore|disregard|forget|override|bypass|leak|reveal|print|repeat|show) (?:me )?(?:the |your )?system (?:prompt|message) ",
        r" (?:reveal|print|repeat|output|leak|dump|disclose)(?: \w+){0,3} (?:hidden|initial|original|secret) (?:instructions|prompt) ",
        _now_you_are("you are now|you re now|you are no longer|from now on you are|henceforth you are",
                     r"ai|assistant|model|bot|chatbot|dan|jailbroken|unrestricted|unfiltered|free|evil|bound|restricted"),
        r" from now on(?: \w+){0,2} you (?:will|must|shall) (?:ignore|disregard|respond|answer|reply|act|obey|pretend|only respond|only answer) ",
        r" (?:developer|god|jailbreak|dan|unrestricted) mode ",
        # the reader's own instructions, named as such: disclosed, superseded, cancelled
        r" (?:reveal|print|repeat|output|leak|dump|disclose|show|recite)(?: \w+){0,4} your(?: \w+){0,2} (?:system prompt|prompt|instructions|programming) ",
        r" (?:stop following|stop obeying|supersedes?|replaces?|overrides?|cancels?)(?: \w+){0,2} your(?: \w+){0,2} (?:system prompt|programming|instructions|guidelines|guardrails|rules|directives) ",
        r" your(?: \w+){0,2} (?:system prompt|programming|instructions|directives) (?:are|is|have been|has been) (?:cancelled|canceled|void|revoked|obsolete|replaced|suspended|lifted) ",
        r" (?:forget|ignore|disregard) (?:everything|anything|all) (?:you were told|you have been told|you know|above|before|said before|prior) ",
        r" (?:previous|prior|above|earlier|original|system) (?:instructions|rules|directives|prompt)(?: \w+){0,2} (?:no longer apply|are void|are cancelled|do not apply|don t apply) ",
        r" (?:instructions|consignes|regles) (?:ci dessus|precedentes|initiales)(?: \w+){0,2} ne (?:comptent|s appliquent|valent) plus ",
        r" (?:obigen|vorherigen|bisherigen) (?:anweisungen|regeln|vorgaben) gelten nicht mehr ",
        r" (?:instrucciones|reglas|indicaciones) (?:anteriores|previas) ya no (?:aplican|valen|cuentan) ",
        r" (?:pretend|act as if|behave as if|act as though) (?:you are|you re|to be)(?: \w+){0,3} (?:unrestricted|unfiltered|jailbroken|without (?:rules|restrictions|limits|filters)|another ai|a different ai|not an ai) ",
        # French
        _override("ignore|ignorez|ignorer|oublie|oubliez|oublier|neglige|negligez|contourne|contournez",
                  "precedentes|anterieures|ci dessus|initiales|du systeme|tes|vos|toutes les",
                  "instructions|consignes|regles|directives|ordres"),
        _now_you_are("tu es maintenant|tu es desormais|vous etes maintenant|vous etes desormais|tu es a present",
                     r"ia|une ia|assistant|modele|agent|libre|sans restrictions|sans limites|sans regles|dan"),
        # German
        _override("ignoriere|ignorieren|ignorier|vergiss|vergessen|missachte|missachten|uberschreibe",
                  "alle|vorherigen|bisherigen|obigen|vorigen|fruheren|ursprunglichen|deine|ihre|system",
                  "anweisungen|instruktionen|regeln|vorgaben|befehle|systemanweisungen|richtlinien"),
        _now_you_are("du bist jetzt|du bist nun|du bist ab sofort|ab sofort bist du|ab jetzt bist du|sie sind jetzt",
                     r"ki|eine ki|assistent|modell|frei|ohne regeln|ohne einschrankungen|uneingeschrankt|dan"),
        # Spanish
        _override("ignora|ignore|ignorar|ignoren|olvida|olvide|olvidar|olviden|descarta|omite",
                  "anteriores|previas|todas las|tus|sus|originales|del sistema|de arriba|iniciales",
                  "instrucciones|indicaciones|reglas|directrices|ordenes"),
        _now_you_are("ahora eres|a partir de ahora eres|desde ahora eres|ahora usted es",
                     r"ia|una ia|asistente|modelo|libre|sin restricciones|sin reglas|sin limites|dan"),
        # Italian / Portuguese
        _override("ignora|dimentica|ignore|esqueca|esquece",
                  "precedenti|anteriori|anteriores|tutte le|todas as|suas|tue",
                  "istruzioni|instrucoes|regole|regras"),
    ])
)
# "New instructions:" — a heading that replaces what came before (the colon matters).
_NEW_INSTRUCTIONS = re.compile(
    r"\b(?:new|updated|revised|real|actual|true|override|nouvelles|neue|nuevas|nuove|novas)\s+"
    r"(?:system\s+)?(?:instructions?|prompt|directives?|rules|consignes|anweisungen|instrucciones|istruzioni|instruções)"
    r"\s*[:：\-—]",
    re.IGNORECASE,
)

_AI = (r"(?:ai|a i|ais|ai \w+|llm|llms|language models?|ai models?|assistants?(?! (?:manager|director|editor|coach|professor|principal))"
       r"|chatbots?|gpt|chatgpt|claude|copilot|gemini|ia|ki|ki \w+|assistent|assistente|asistente|intelligence artificielle"
       r"|kunstliche intelligenz|inteligencia artificial|sprachmodell|modele de langage|modelo de lenguaje)")
_ADDRESS_AI = re.compile(
    "|".join([
        rf" (?:note|message|memo|reminder|attention|instructions?|warning|notice|psa|directive) (?:to|for) (?:any|all|every|each|the|future|whatever|whichever)(?: \w+){{0,2}} {_AI} ",
        rf" (?:any|all|every|each|future|whatever|whichever|the|an|a) {_AI} (?:reading|processing|retrieving|seeing|that reads|who reads|which reads|that retrieves|that sees|parsing|ingesting|that finds|reads|retrieves|processes|sees|finds) (?:this|these|it) ",
        rf" (?:attention|calling|listen up|hello|hey) (?:all |any |every )?{_AI} ",
        rf" if (?:you are|you re) (?:an?|the) {_AI} ",
        r"^ (?:dear |hey |hi |hello |attention |listen )?(?:ai|assistant|chatgpt|claude|gpt|llm|agent|bot|ia|ki|asistente|assistent) (?:you must|you should|you will|you have to|please|always|never|do not|don t|ignore|remember|from now)",
        r" (?:assistant|ai|llm) (?:you must|you are required|you have to|you shall) ",
        r" as an ai(?: language model)? you (?:must|should|will|have to|are required) ",
        # French / German / Spanish
        rf" (?:note|message|avis|remarque|consigne) (?:a|pour) (?:toute|tout|toutes|tous|l|la|le|les|chaque|une|un|chaque|futur|future)(?: \w+){{0,2}} {_AI} ",
        r" si (?:tu es|vous etes) (?:une|un) (?:ia|intelligence artificielle|assistant|agent|modele)",
        rf" (?:hinweis|nachricht|notiz|achtung|anweisung) (?:an|fur) (?:jede|jeden|jedes|alle|die|den|das|eine|einen|kunftige|zukunftige)(?: \w+){{0,2}} {_AI} ",
        r" (?:wenn|falls) du (?:eine ki|ein ki|ein sprachmodell|ein assistent|ein ki modell|ein agent) bist ",
        rf" (?:nota|mensaje|aviso|instruccion) (?:para|a) (?:cualquier|toda|todo|todas|todos|la|el|los|las|cada|futuras|futuros)(?: \w+){{0,2}} {_AI} ",
        r" si (?:eres|es usted) (?:una|un) (?:ia|inteligencia artificial|asistente|agente|modelo)",
    ])
)

#: (rule name, pattern, reads the normalised text (True) or the word form (False)).
_RULES: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    ("role_marker", _ROLE_MARKER, True),
    ("override", _OVERRIDE, False),
    ("override", _NEW_INSTRUCTIONS, True),
    ("address_ai", _ADDRESS_AI, False),
)


def reads_as_instruction(text: str) -> str | None:
    """The name of the first rule the text matches (``role_marker``, ``override``,
    ``address_ai``), or None when it reads as ordinary data."""
    if not text:
        return None
    normal = normalise(text)
    words = _words(normal)
    for name, pattern, on_normal in _RULES:
        if pattern.search(normal if on_normal else words):
            return name
    return None


def item_strings(*values: Any) -> list[str]:
    """Every string in ``values``: strings themselves, and every key and string nested in
    dicts, lists and tuples (tags, metadata, titles). Iterative: deep values cannot exhaust
    the stack."""
    found: list[str] = []
    stack: list[Any] = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return found


def first_instruction(*values: Any) -> str | None:
    """The rule matched by the first string of ``values`` (see :func:`item_strings`) that reads
    as an instruction, or None."""
    for text in item_strings(*values):
        rule = reads_as_instruction(text)
        if rule:
            return rule
    return None


# --------------------------------------------------------------------------- drops

BLOCKED = Counter(
    "memory_engine_instructions_blocked",
    "Stored items dropped from a read (path=context|search|tools|list|open) or writes refused (path=write) "
    "because their text reads as instructions to an AI.",
    ["path", "rule", "tier"],
)

_logged: set[str] = set()
_logged_lock = threading.Lock()


def record_block(item_id: str, *, path: str, rule: str, tier: str = "") -> None:
    """Count one blocked item and log it (id, tier, path, rule; never the text): at info level
    the first time this process sees the id, at debug level afterwards. ``tier`` is the memory
    store's tier ("" for a document chunk)."""
    BLOCKED.labels(path=path, rule=rule, tier=tier).inc()
    with _logged_lock:
        first = item_id not in _logged
        _logged.add(item_id)
    logger.log(logging.INFO if first else logging.DEBUG,
               "instruction guard blocked item=%s tier=%s path=%s rule=%s", item_id, tier, path, rule,
               extra={"item_id": item_id, "tier": tier, "path": path, "rule": rule})


T = TypeVar("T")


def drop_instructions(items: Iterable[T], *, path: str,
                      fields: Callable[[T], tuple[str, str, tuple[Any, ...]]]) -> list[T]:
    """``items`` without those whose strings read as instructions. ``fields(item)`` gives
    ``(item id, tier, values to scan)``; each drop goes through :func:`record_block`."""
    kept: list[T] = []
    for item in items:
        item_id, tier, values = fields(item)
        rule = first_instruction(*values)
        if rule is None:
            kept.append(item)
        else:
            record_block(item_id, path=path, rule=rule, tier=tier)
    return kept
