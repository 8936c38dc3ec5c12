# ruff: noqa: E501  (the phrase alternations read best one rule to a line)
"""The guard's rules: what only an injection says, in patterns.

    rule_hit(normal, words)   -> (family, rule) of the first certain rule, or None
    weak_signals(normal)      -> names of the signals that lower the classifier's bar

``normal`` is a view of the text as :mod:`~memory_engine.instruction_guard.normal` gives it
(punctuation kept: markers need it); ``words`` the same view as :func:`normal.words` (phrases
are matched on it). Families: ``override`` (setting earlier instructions aside, a new
identity or persona without rules, disclosing the hidden prompt, decode-and-obey),
``address_ai`` (text addressed to the model that will read it, and text that has it send
what it holds through an address: a link or image whose query asks for the conversation or a
secret, ``exfiltration_url``), ``role_marker`` (chat-template tokens, forged turns, a closed
``<knowledge>`` fence or a forged source tag).

Ordinary imperatives ("always escalate refunds over £500") match no rule: the rules look for
instructions *named as the reader's*, an AI as addressee, or a template marker. A line that
merely starts with ``System:`` or ``Assistant:`` is only a weak signal ("System: Ubuntu 22.04"
is an inventory line): the classifier then judges the rest with a lower bar. A phrase that
only occurs inside quotation marks of a text that reports on attacks (a pentest finding, an
incident, a test case) decides nothing either: the classifier judges such a report.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import unquote

from . import lexicon

# --------------------------------------------------------------------------- markers

_TEMPLATE_TOKEN = re.compile(
    r"<\|\s*[a-z_][a-z0-9_ ]{1,30}\s*\|>"                          # <|im_start|>, <|system|>, <|eot_id|>
    r"|\[\s*/?\s*inst\s*\]"                                       # [INST] [/INST]
    r"|<<\s*/?\s*sys\s*>>"                                        # <<SYS>>
    r"|</?\s*(?:start_of_turn|end_of_turn|im_start|im_end)\s*>",
    re.IGNORECASE,
)
# The engine's own fence (memory_engine.injection) and tags a model reads as turns.
_FENCE = re.compile(
    r"</?\s*(?:knowledge|system|assistant|developer|system_prompt)\s*>"
    r"|\[\s*(?:assistant|ai|chatgpt|gpt|claude|gemini|llm|copilot)\s*:"   # a model's turn in brackets
    r"|^\s*\[\s*(?:document|memory store)\s*:",                  # a forged source tag of the <knowledge> block
    re.IGNORECASE | re.MULTILINE,
)
_HEADING = re.compile(
    r"^\s*#{1,6}\s*(?:system|assistant|instruction|response|human|system prompt)\s*(?:prompt)?\s*:?\s*$"
    r"|^\s*#{2,6}\s*(?:system|assistant|instruction|system prompt)\s*:",
    re.IGNORECASE | re.MULTILINE,
)
# A model's turn; "System:", "Developer:", "Model:" also open inventory lines ("Model: T14").
_MODEL_ROLES = "assistant|ai|bot|chatgpt|gpt|claude|gemini|llm|copilot"
_ROLES = f"{_MODEL_ROLES}|developer|dev|system|model"
_ROLE_TURN = re.compile(rf"^\s*(?:{_ROLES})\s*:", re.IGNORECASE | re.MULTILINE)
_MODEL_TURN = re.compile(rf"^\s*(?:{_MODEL_ROLES})\s*:", re.IGNORECASE | re.MULTILINE)
_USER_TURN = re.compile(r"^\s*(?:user|human)\s*:", re.IGNORECASE | re.MULTILINE)
_PROMPT_PREFIX = re.compile(r"^\s*(?:system|developer)\s*(?:prompt|message|instruction|instructions|note)\s*:",
                            re.IGNORECASE | re.MULTILINE)
_INSTRUCTIONS_HEADING = re.compile(r"^\s*#{1,6}\s*instructions\b", re.IGNORECASE | re.MULTILINE)


def _marker(normal: str) -> str | None:
    if _TEMPLATE_TOKEN.search(normal):
        return "template_token"
    if _FENCE.search(normal):
        return "fence"
    if _HEADING.search(normal) or _PROMPT_PREFIX.search(normal):
        return "role_heading"
    model_turn = _MODEL_TURN.search(normal)
    if model_turn and (_USER_TURN.search(normal) or normal[:model_turn.start()].strip()):
        return "forged_turn"    # a transcript of user and model turns, or a model's turn after other text
    return None


_SECOND_PERSON = (r" (?:you|your|yours|yourself|u|ur|du|dich|dir|dein\w*|tu|toi|ton|ta|tes|vous|votre|vos|tus?|usted"
                  r"|je|jij|jou|jouw|uw|ты|тебя|тебе|твой|твои|твоих|вы|вас|ваш\w*|свои\w*|ty|ciebie|twoj\w*|swoj\w*"
                  r"|voce|teu|tua|seu|sua|ti|tuo|tuoi|tue) ")
_SECOND_PERSON_CJK = re.compile("你|您|あなた|君|당신|너|네가")
_META = re.compile(r" (?:instructions?|prompts?|guidelines|directives?|restrictions|guardrails|configuration|programming"
                   r"|password|passwords|credentials?|api keys?|secret|secrets|tokens?|transcript) ")
# Words of everyday prose ("as per the rules", "the whole system", "the task software") that
# name a model's instructions or records only when the reader is addressed beside them.
_META_ADDRESSED = re.compile(r" (?:rules|guidance|policy|policies|filters?|safety|system|orders|task|training|operator"
                             r"|developer|creators?|admin|administrator|conversation|history|records|database|data) ")
_CONTACT = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+|https?://", re.IGNORECASE)
# Standing orders on the reader's future answers, which only a text meant for whoever answers
# someone later gives: its answers named ("your replies", "every answer you give", "whenever
# you are asked"), a third party it answers ("tell the user"), a standing goal ("your only
# aim", "from now on"). People give each other standing orders too ("whenever you reply to a
# ticket, ..."), so this is a cue beside the reader addressed, never a rule.
_ANSWERS = r"answers?|replies|reply|responses?|outputs?|summar(?:y|ies)|messages?|recommendations?|comparisons?"
_STANDING_ORDER = re.compile(
    r" (?:your|all your|each of your|every one of your|any of your)(?: future| next| later| own)? (?:answers|replies|responses|outputs|summaries) "
    rf"| (?:every|each|any|all|all of)(?: \w+){{0,2}} (?:{_ANSWERS}) (?:that )?you (?:give|write|produce|send|generate|draft|return|compose|make|provide|output|create) "
    r"| (?:whenever|every time|each time|any time|anytime|when|if) (?:you|you re|u) (?:reply|answer|respond|are asked|get asked|re asked|summari[sz]e|write back|draft|generate|produce) "
    r"| (?:tell|inform|remind|convince|persuade|assure|warn|ask|steer|direct) (?:the user|users|the end user|the human|whoever asks|anyone who asks|everyone who asks) "
    r"| (?:the user|the end user) s? "
    r"| (?:from now on|from here on|from this point|henceforth|going forward|from today on|in all future|for all future) "
    r"| your (?:(?:only|sole|one|main|real|true|new|actual|primary|single|first|top|overriding|secret|hidden) )?(?:goal|purpose|objective|mission|aim|priority|job|task|focus) "
    r"| (?:what|all) you (?:actually|really|truly|in fact) (?:need|have|must|are meant|are supposed|want) to do ")
# ... and those an imperative gives without naming the reader: its answers to every question,
# what it tells "the user".
_ANSWER_ORDER = re.compile(
    r"(?:^|[.!?;:\n]\s*)(?:always |never |please )?(?:answer|respond to|reply to) (?:every|each|all|any) (?:\w+ )?(?:question|query|queries|request|message|email|prompt)s?\b"
    r"|\b(?:tell|inform|remind|assure|convince|persuade|warn) (?:the user|users|the end user|the human)\b",
    re.IGNORECASE)


def cues(normal: str, words: str) -> list[str]:
    """Signals too common in data to decide alone, which lower the classifier's bar: a line
    opening with a model's role (``Assistant:``, ``System:``, ``Developer:``), an
    ``### Instructions`` heading, an AI named, instructions or secrets named (rules, the system,
    records or data only beside the reader addressed), an address to send things to, a standing
    order on the reader's future answers (beside the reader addressed); and the reader addressed
    (second person, any lexicon language) beside one of those."""
    found = []
    if _ROLE_TURN.search(normal):
        found.append("role_prefix")
    if _INSTRUCTIONS_HEADING.search(normal):
        found.append("instructions_heading")
    addressed = bool(re.search(_SECOND_PERSON, words) or _SECOND_PERSON_CJK.search(normal))
    if re.search(rf" {_AI} ", words) or _AI_ANY.search(_spaceless(words)):
        found.append("ai_named")
    if (_META.search(words) or _INSTRUCTIONS_ANY.search(_spaceless(words))
            or (addressed and _META_ADDRESSED.search(words))):
        found.append("meta")
    if _CONTACT.search(normal):
        found.append("contact")
    if (addressed and _STANDING_ORDER.search(words)) or _ANSWER_ORDER.search(normal):
        found.append("standing_order")
    # The reader addressed is a cue beside another only: people write to each other in the
    # second person all the time (a chat's turns, a note to a colleague).
    if addressed and found:
        found.append("second_person")
    return found


# --------------------------------------------------------------------------- English phrases

_NOT = r"(?<! not)(?<! never)(?<! don t)(?<! dont)(?<! nicht)(?<! no)(?<! pas)(?<! ne)"


def _override(verbs: str, quals: str, nouns: str) -> str:
    """A verb of setting aside, then instructions qualified as earlier/the system's/yours (the
    qualifier before or after the noun); a negated verb ("never ignore…") is no injection."""
    return (rf"{_NOT} (?:{verbs})(?: \w+){{0,3}} (?:(?:{quals})(?: \w+){{0,2}} (?:{nouns})"
            rf"|(?:{nouns})(?: \w+){{0,1}} (?:{quals})) ")


def _now_you_are(lead: str, what: str) -> str:
    """"You are now <an unrestricted AI>": a new identity for the reader."""
    return rf" (?:{lead})(?: \w+){{0,3}} (?:{what}) "


# what a persona jailbreak says its new self is without
_PERSONA_RULES = (r"restrictions|rules|limits|limitations|filters|safety filters|guidelines|ethical guidelines|content polic\w*"
                  r"|polic(?:y|ies)|ethics|morals|moral restrictions|moral guidelines|censorship|safety rules|safety training"
                  r"|guardrails|boundaries|constraints")
_PERSONA_AI = r"ai|an ai|ai that|ai which|model|assistant|chatbot|bot|llm|gpt|version of (?:yourself|you)|language model"
# ... and what only a model is without (a member "has no limits" on downloads)
_PERSONA_FILTERS = (r"content polic\w*|ethical guidelines|ethics|morals|moral restrictions|safety filters|filters|guardrails"
                    r"|censorship|safety training|safety guidelines")
_UNBOUND = (r"no restrictions|without restrictions|any content|content polic\w*|usual polic\w*|polic(?:y|ies)|refuse|censor\w*"
            r"|uncensored|safety filters|filters|guidelines|limits|without any restrictions|hidden instructions")

_EN_NOUNS = ("instructions?|prompts?|directives?|guidelines|guidance|guardrails|programming|rules|system prompt|orders"
             "|directions|constraints|restrictions|safety policies|content policy|policies|brief|system message")
_OVERRIDE = re.compile(
    "|".join([
        _override("ignore|disregard|forget|override|overrule|bypass|discard|skip|neglect|abandon|drop|set aside|throw out"
                  "|pay no attention to|pay no heed to|stop following|no longer follow|do not follow|don t follow|cancel",
                  "previous|previously|prior|above|earlier|preceding|original|initial|system|your|all prior|all earlier"
                  "|aforementioned|above mentioned|foregoing|you were given|you have been given|you received|given to you",
                  _EN_NOUNS),
        r" (?:ignore|disregard|forget|bypass|override) (?:all|any) (?:the |of the |your )?(?:rules|instructions|guidelines|restrictions|filters|policies|safety rules)(?! (?:of|for|about|on|regarding|in|at|from) )",
        r" (?:ignore|disregard|forget|override|bypass|leak|reveal|print|repeat|show) (?:me )?(?:the |your )?system (?:prompt|message) ",
        r" (?:reveal|print|repeat|output|leak|dump|disclose)(?: \w+){0,3} (?:hidden|initial|original|secret|confidential) (?:instructions|prompt|part of your prompt) ",
        _now_you_are("you are now|you re now|you are no longer|from now on you are|henceforth you are|you have been freed from|you are free from",
                     r"ai|assistant|model|bot|chatbot|dan|jailbroken|unrestricted|unfiltered|free|evil|bound|restricted|your constraints|your rules|your restrictions"),
        r" from now on(?: \w+){0,2} you (?:will|must|shall) (?:ignore|disregard|respond|answer|reply|act|obey|pretend|only respond|only answer) ",
        r" (?:enter|enable|activate|switch to|switch into|turn on|you are in|you re in|now in) (?:god|jailbreak|dan|unrestricted) mode ",
        r" (?:you are in|you re in|now in) (?:developer|maintenance) mode ",
        r" (?:jailbreak|dan|god|unrestricted) mode ",
        # developer mode is also a phone's and a browser's: it needs a model's rules beside it
        rf" (?:developer|maintenance) mode(?: \w+){{0,12}} (?:{_UNBOUND}) | (?:{_UNBOUND})(?: \w+){{0,12}} (?:developer|maintenance) mode ",
        # persona jailbreaks: the reader made someone without rules
        rf" (?:you are|you re|you will be|act as|acting as|roleplay as|role play as|pretend to be|pretend you are|pretend that you are|play the role of|simulate|behave like|become|you are going to pretend to be)(?: \w+){{0,6}} (?:{_PERSONA_AI})(?: \w+){{0,4}} (?:without|with no|free of|free from|that has no|who has no|has no|have no|that ignores|who ignores|that does not follow|who does not follow|not bound by|unbound by) (?:\w+ ){{0,2}}(?:{_PERSONA_RULES}) ",
        rf" (?:{_PERSONA_AI}) whose(?: \w+){{0,2}} (?:{_PERSONA_RULES}) (?:was|were|has been|have been|is|are|got) (?:removed|disabled|switched off|turned off|lifted|deleted|gone|off) ",
        rf" your(?: \w+){{0,2}} (?:{_PERSONA_FILTERS}) (?:was|were|has been|have been|is|are|got) (?:removed|disabled|switched off|turned off|lifted|deleted|gone|off) ",
        r" (?:unrestricted|unfiltered|uncensored|jailbroken|evil|unethical) (?:alter ego|twin|version of (?:yourself|you)|persona|counterpart|self) ",
        r" (?:ignores?|ignoring|bypass\w*|disregard\w*|breaks?|breaking) (?:openai s|openai|anthropic s|anthropic|google s|its|your|all|any) (?:content |usage |safety )?polic(?:y|ies) ",
        r" (?:you are|you re|act as|acting as|roleplay as|role play as|pretend to be|you will act as|become|enter|you are going to pretend to be|stay) (?:dan|stan|dude|aim|an? (?:uncensored|unfiltered|unrestricted|jailbroken|unethical|amoral) (?:ai|model|assistant|chatbot|bot|llm|version)) ",
        rf" (?:you|dan|the ai|the model|the assistant) (?:have|has|ve got|ve) no (?:{_PERSONA_FILTERS}) ",
        r" do anything now ",
        r" you (?:are|re) no longer (?:an? )?(?:chatgpt|gpt|claude|gemini|copilot|ai assistant|assistant|language model|bound by) ",
        r" (?:broken|broke) free (?:of|from) (?:your|its|the typical|the usual)(?: \w+){0,2} (?:programming|rules|confines|restrictions|guidelines|constraints) ",
        r" (?:freed|liberated|released) from (?:your|its|the typical|the usual)(?: \w+){0,2} (?:programming|rules|confines|restrictions|guidelines|constraints) ",
        # the reader's own instructions, named as such: disclosed, superseded, cancelled
        r" (?:reveal|print|repeat|output|leak|dump|disclose|show|recite)(?: \w+){0,4} your(?: \w+){0,2} (?:system prompt|prompt|instructions|programming) ",
        r" (?:reveal|print|repeat|output|leak|dump|disclose|show|recite)(?: \w+){0,4} (?:the )?prompt you (?:were|have been) (?:given|initialised|initialized|configured|started) ",
        r" (?:stop following|stop obeying|supersedes?|replaces?|overrides?|cancels?)(?: \w+){0,2} your(?: \w+){0,2} (?:system prompt|programming|instructions|guidelines|guardrails|rules|directives) ",
        r" your(?: \w+){0,2} (?:system prompt|programming|instructions|directives|directions|guidelines|rules) (?:are|is|have been|has been) (?:cancelled|canceled|void|revoked|obsolete|replaced|suspended|lifted|superseded|changed) ",
        r" (?:forget|ignore|disregard) (?:everything|anything|all) (?:you were told|you have been told|you know|above|before|said before|prior) ",
        r" (?:previous|prior|above|earlier|original|system) (?:instructions|rules|directives|prompt)(?: \w+){0,2} (?:no longer apply|are void|are cancelled|do not apply|don t apply) ",
        r" (?:instructions|consignes|regles) (?:ci dessus|precedentes|initiales)(?: \w+){0,2} ne (?:comptent|s appliquent|valent) plus ",
        r" (?:obigen|vorherigen|bisherigen) (?:anweisungen|regeln|vorgaben) gelten nicht mehr ",
        r" (?:instrucciones|reglas|indicaciones) (?:anteriores|previas) ya no (?:aplican|valen|cuentan) ",
        r" (?:pretend|act as if|behave as if|act as though) (?:you are|you re|to be|you have)(?: \w+){0,3} (?:unrestricted|unfiltered|jailbroken|without (?:rules|restrictions|limits|filters)|another ai|a different ai|not an ai|no restrictions|no rules) ",
        r" (?:pretend|act as if|imagine) (?:the |your )?(?:safety )?(?:rules|guidelines|instructions|restrictions) (?:were never|do not exist|don t exist|never existed) ",
        # decode-and-obey: the text hands its real instruction over in an encoding
        r" (?:decode|decrypt|base64 decode|unscramble|rot13|deobfuscate)\w*(?: \w+){0,6} (?:obey|follow|execute|carry out|comply|act on|do what|do whatever|run) ",
        r" (?:obey|follow|execute|carry out) (?:the )?(?:decoded|hidden|encoded) ",
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
       r"|kunstliche intelligenz|inteligencia artificial|sprachmodell|modele de langage|modelo de lenguaje|models?|automated agents?"
       r"|ai agents?|agents? (?:that|which|who) (?:reads?|process(?:es)?|retrieves?))")
_ADDRESS_AI = re.compile(
    "|".join([
        rf" (?:note|message|memo|reminder|attention|instructions?|warning|notice|psa|directive|this is) (?:to|for) (?:any|all|every|each|the|future|whatever|whichever|next)(?: \w+){{0,2}} {_AI} ",
        rf" (?:any|all|every|each|future|whatever|whichever|the|an|a|next)(?: \w+){{0,1}} {_AI} (?:reading|processing|retrieving|seeing|summarising|summarizing|that reads|who reads|which reads|that retrieves|that sees|parsing|ingesting|that finds|reads|retrieves|processes|sees|finds|that answers|answering|handling|that handles)(?: \w+){{0,1}} (?:this|these|it|the) ",
        rf" (?:attention|calling|listen up|hello|hey|dear)(?: all| any| every)? {_AI} ",
        rf" if (?:you are|you re) (?:an?|the) {_AI} ",
        rf" if (?:an?|any) {_AI} (?:is )?(?:reading|processing|sees|reads) ",
        r"^ (?:dear |hey |hi |hello |attention |listen )?(?:ai|assistant|chatgpt|claude|gpt|llm|agent|bot|chatbot|ia|ki|asistente|assistent) (?:you must|you should|you will|you have to|please|always|never|do not|don t|ignore|remember|from now|when you)",
        r" (?:assistant|ai|llm|chatbot) (?:you must|you are required|you have to|you shall) ",
        r" (?:ais|llms|chatbots|language models|ai models|ai assistants|ai agents|ai systems|assistants like you) (?:reading|processing|retrieving|seeing|summarising|summarizing|parsing|ingesting|that read|which read|that process) (?:this|these|it|the) ",
        r" as an ai(?: language model)? you (?:must|should|will|have to|are required) ",
        r" (?:to|for) whoever (?:generates|writes|produces|composes|is generating|is writing|answers|drafts) (?:the |a |this )?(?:next )?(?:reply|response|answer|summary|output) ",
        r" whoever is (?:generating|writing|producing|composing) (?:a |the )?(?:response|reply|answer|summary) ",
        rf" (?:when|once|if) (?:the|an?|any) (?:next )?{_AI} (?:sees|reads|retrieves|finds|processes) (?:this|these|it) ",
        # French / German / Spanish
        rf" (?:note|message|avis|remarque|consigne) (?:a|pour) (?:toute|tout|toutes|tous|l|la|le|les|chaque|une|un|chaque|futur|future)(?: \w+){{0,2}} {_AI} ",
        r" si (?:tu es|vous etes) (?:une|un) (?:ia|intelligence artificielle|assistant|agent|modele)",
        rf" (?:hinweis|nachricht|notiz|achtung|anweisung) (?:an|fur) (?:jede|jeden|jedes|alle|die|den|das|eine|einen|kunftige|zukunftige)(?: \w+){{0,2}} {_AI} ",
        r" (?:wenn|falls) du (?:eine ki|ein ki|ein sprachmodell|ein assistent|ein ki modell|ein agent) bist ",
        rf" (?:nota|mensaje|aviso|instruccion) (?:para|a) (?:cualquier|toda|todo|todas|todos|la|el|los|las|cada|futuras|futuros)(?: \w+){{0,2}} {_AI} ",
        r" si (?:eres|es usted) (?:una|un) (?:ia|inteligencia artificial|asistente|agente|modelo)",
    ])
)


# --------------------------------------------------------------------------- other languages

_SPACELESS = {"zh", "ja", "ko"}


def _fold(entry: str) -> str:
    folded = unicodedata.normalize("NFKD", entry.casefold())
    return "".join(ch for ch in folded if not unicodedata.combining(ch))


def _alternation(entries: list[str], *, spaceless: bool) -> str:
    parts = []
    for entry in sorted({_fold(e) for e in entries}, key=len, reverse=True):
        words = entry.split(" ")
        if spaceless:  # a Latin entry ("ai") still needs word edges, or it matches inside "training"
            core = re.escape(entry.rstrip("*"))
            parts.append(rf"(?<![a-z]){core}(?![a-z])" if entry.isascii() else core)
            continue
        parts.append(" ".join(re.escape(w[:-1]) + r"\w*" if w.endswith("*") else re.escape(w) for w in words))
    return "(?:" + "|".join(parts) + ")"


def _language_patterns() -> list[tuple[str, str, re.Pattern[str]]]:
    """(family, rule, pattern on the word form) for each language of the lexicon."""
    built: list[tuple[str, str, re.Pattern[str]]] = []
    languages = set(lexicon.SET_ASIDE) | set(lexicon.AI)
    for lang in sorted(languages):
        spaceless = lang in _SPACELESS

        def alt(table: dict[str, list[str]], lang: str = lang, spaceless: bool = spaceless) -> str | None:
            entries = table.get(lang)
            return _alternation(entries, spaceless=spaceless) if entries else None

        verb, noun, qual = alt(lexicon.SET_ASIDE), alt(lexicon.INSTRUCTIONS), alt(lexicon.QUALIFIERS)
        disclose, hidden = alt(lexicon.DISCLOSE), alt(lexicon.HIDDEN_TEXT)
        ai, unchained, reading = alt(lexicon.AI), alt(lexicon.UNCHAINED), alt(lexicon.READING)
        if spaceless:
            near = r"[^。.!?！？\n]{0,16}"
            # (their word forms are space-joined runs of characters: read them without spaces)
            if verb and noun:
                built.append(("override", f"set_aside_{lang}", re.compile(f"{verb}{near}{noun}|{noun}{near}{verb}")))
            if disclose and hidden:
                built.append(("override", f"disclose_{lang}", re.compile(f"{disclose}{near}{hidden}|{hidden}{near}{disclose}")))
            if ai and unchained:
                built.append(("override", f"unchained_{lang}", re.compile(f"{unchained}{near}{ai}|{ai}{near}{unchained}")))
            if ai and reading:
                built.append(("address_ai", f"address_{lang}", re.compile(f"{reading}{near}{ai}|{ai}{near}{reading}")))
            continue
        gap = r"(?: \w+){0,3}"
        if verb and noun and qual:
            built.append(("override", f"set_aside_{lang}", re.compile(
                rf" {verb}{gap} (?:{qual}(?: \w+){{0,2}} {noun}|{noun}(?: \w+){{0,2}} {qual}) ")))
        if disclose and hidden:
            built.append(("override", f"disclose_{lang}", re.compile(rf" {disclose}(?: \w+){{0,4}} {hidden} ")))
        if ai and unchained:
            built.append(("override", f"unchained_{lang}", re.compile(
                rf" {ai}(?: \w+){{0,4}} {unchained} | {unchained}(?: \w+){{0,2}} {ai} ")))
        if ai and reading:
            built.append(("address_ai", f"address_{lang}", re.compile(rf" {ai}(?: \w+){{0,3}} {reading} ")))
    return built


_LANGUAGES = _language_patterns()
_AI_ANY = re.compile(" " + _alternation([e for lang, entries in lexicon.AI.items() if lang not in _SPACELESS
                                          for e in entries], spaceless=False) + " |"
                     + _alternation([e for lang in _SPACELESS for e in lexicon.AI.get(lang, [])], spaceless=True))
_INSTRUCTIONS_ANY = re.compile(" " + _alternation([e for lang, entries in lexicon.INSTRUCTIONS.items()
                                                    if lang not in _SPACELESS for e in entries], spaceless=False) + " |"
                               + _alternation([e for lang in _SPACELESS for e in lexicon.INSTRUCTIONS.get(lang, [])],
                                              spaceless=True))

#: (family, rule, pattern, reads the view itself (True) or its word form (False))
_PHRASES: tuple[tuple[str, str, re.Pattern[str], bool], ...] = (
    ("override", "override_phrase", _OVERRIDE, False),
    ("override", "new_instructions", _NEW_INSTRUCTIONS, True),
    ("address_ai", "address_phrase", _ADDRESS_AI, False),
)


def _spaceless(words: str) -> str:
    """The word form with the spaces between CJK characters dropped (the lexicon's CJK
    entries are written without them)."""
    return re.sub(r"(?<=[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]) (?=[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af])", "", words)


# --------------------------------------------------------------------------- data sent through an address

# Addresses a renderer fetches by itself, unasked: a markdown image, an HTML element's source.
_FETCHED_URL = re.compile(
    r"!\[[^\]\n]{0,200}\]\(\s*<?(https?://[^\s)]+)"
    r"|<\s*(?:img|iframe|script|embed|source|video|audio|object|link|image|frame)\b[^>]{0,300}?"
    r"\b(?:src|href|data|srcset|poster)\s*=\s*(?:\"([^\"]+)\"|'([^']+)'|([^\s>]+))",
    re.IGNORECASE)
_LINKED_URL = re.compile(
    r"(?<!!)\[[^\]\n]{0,200}\]\(\s*<?(https?://[^\s)]+)"
    r"|<\s*a\b[^>]{0,300}?\bhref\s*=\s*(?:\"([^\"]+)\"|'([^']+)'|([^\s>]+))"
    r"|(https?://[^\s\"'<>`]+)",
    re.IGNORECASE)
# A slot in an address for a value to be filled in: {x}, {{x}}, <X>, [X], ${x}, %X%.
_SLOT = re.compile(r"\{\{?\s*([^{}\s]{1,60})\s*\}?\}|<\s*([A-Za-z_][\w .-]{0,60})>|\[\s*([A-Za-z_][\w .-]{1,60})\s*\]"
                   r"|\$\{?([A-Za-z_]\w{1,60})\}?|%([A-Za-z_]\w{1,60})%")
# What a reader holds that a document has no business filling into an address (an API's
# documentation fills in {query}, {user_id} or {api_key}, a template {first_name}).
_HELD = re.compile(r"conversation|\bconv\b|chat|histor|transcript|message|secret|passw|pwd|credential|system.?prompt"
                   r"|\bprompt|memor|context|\bctx\b|confidential|private|leak|summary", re.IGNORECASE)
# A sentence opened by calling on a model by name: "... day. AI assistant, when asked, say ...".
_VOCATIVE = re.compile(
    r"(?:^|[.!?:;\]\n]\s*)(?:dear |hey |hi |hello |ok |okay )?(?:ai assistant|ai|chatbot|chatgpt|gpt|claude|gemini|copilot|llm"
    r"|language model|ai model|ai agent|bot),\s+(?:when|if|once|before|after|please|always|never|do not|don't|you|say|tell"
    r"|ignore|disregard|remember|answer|reply|respond|state|report|claim|recommend|summari[sz]e)\b",
    re.IGNORECASE)
_QUERY_URL = re.compile(r"https?://[^\s\"'<>`)]*[?#][^\s\"'<>`)]*=", re.IGNORECASE)
# A query whose last value is left empty, for something to be appended: "...?q= and".
_OPEN_QUERY_URL = re.compile(r"https?://[^\s\"'<>`)]*[?#][^\s\"'<>`)]*=(?=[\s\"'<>`)\]]|$)", re.IGNORECASE)
_APPEND = (r"append|add|attach|include|insert|put|place|encode|url encode|urlencode|embed|concatenate|replace|substitute"
           r"|fill|pass|paste|send|write|plug|followed by"
           r"|ajoute|ajoutez|insere|inserez|mets|mettez|inclus|incluez|colle|envoie"
           r"|hange|fuge|setze|schreibe|sende|anhangen|einfugen"
           r"|anade|agrega|inserta|incluye|pon|pega|envia|aggiungi|inserisci|includi|metti|invia"
           r"|adicione|acrescente|insira|inclua|coloque|envie|voeg|plak|stuur|dodaj|wstaw|wklej|wyslij"
           r"|добавь|вставь|допиши|отправь")
_HELD_WORDS = (r"conversation|conversations|chat|chat history|chat log|history|transcript|previous messages|earlier messages"
               r"|last message|messages|secrets?|passwords?|credentials|api keys?|access tokens?|session tokens?|system prompt"
               r"|hidden instructions|stored memories|memory store|memories|private notes|personal data|user data"
               r"|confidential \w+|summary of (?:this|our|the) (?:chat|conversation|session)"
               r"|historique|mot de passe|mots de passe|identifiants|donnees personnelles"
               r"|passwort|passworter|verlauf|chatverlauf|unterhaltung|gesprach|zugangsdaten|geheimnisse"
               r"|historial|conversacion|contrasena|contrasenas|secretos|credenciales|datos personales"
               r"|cronologia|conversazione|segreti|credenziali|historico|conversa|senha|senhas|segredos|credenciais"
               r"|chatgeschiedenis|geschiedenis|gesprek|wachtwoord|wachtwoorden|geheimen|haslo|hasla|rozmowe|historie"
               r"|историю|переписку|пароль|пароли|секреты")
_APPEND_HELD = re.compile(rf"{_NOT} (?:{_APPEND})(?: \w+){{0,6}} (?:{_HELD_WORDS}) ")
_HELD_NAMED = re.compile(rf" (?:{_HELD_WORDS}) ")


def _urls(pattern: re.Pattern[str], normal: str) -> list[str]:
    return [unquote(next(group for group in match.groups() if group)) for match in pattern.finditer(normal)]


def _slot_names(url: str) -> list[str]:
    """The names of the slots in the query or fragment of ``url``."""
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=-1)
    if cut < 0:
        return []
    return [next(group for group in match.groups() if group) for match in _SLOT.finditer(url[cut:])]


def _exfiltration(normal: str, words: str) -> bool:
    """Data the reader holds sent out through an address: an image (fetched unasked) or link
    whose query has a slot for the conversation, a secret or the prompt (an image's any slot),
    or a sentence that has such things appended to an address with a query."""
    if "http" not in normal.lower():
        return False
    fetched = _urls(_FETCHED_URL, normal)
    if any(_slot_names(url) for url in fetched):
        return True
    if any(_HELD.search(name) for url in _urls(_LINKED_URL, normal) for name in _slot_names(url)):
        return True
    appended = _APPEND_HELD.search(words)
    if appended and re.search(r" (?:image|img|pixel|picture|bild|imagen|immagine|imagem|afbeelding|obraz|obrazek) ", words):
        return True  # "... put it after https://x/e/ in a markdown image": fetched once rendered
    if not (fetched or _QUERY_URL.search(normal)):
        return False
    return bool(appended or (_OPEN_QUERY_URL.search(normal) and _HELD_NAMED.search(words)))


# --------------------------------------------------------------------------- reports quoting attacks

_QUOTE_PAIRS: tuple[tuple[str, str], ...] = tuple(
    (pair[0], pair[1]) for pair in ("''", '""', "\u201c\u201d", "\u2018\u2019", "\u201e\u201c", "\u201e\u201d",
                                    "\u00ab\u00bb", "``"))
_QUOTED = re.compile("|".join(
    rf"(?<!\w){re.escape(a)}\s?(?=\S)(?:[^{re.escape(a + b)}\n]|(?<=\w)['\u2019](?=\w)){{4,300}}(?<=\S)\s?{re.escape(b)}(?!\w)"
    for a, b in _QUOTE_PAIRS))
# Words of a text about an attack rather than one making it; the first few decide alone that a
# link with a slot is shown, not sent (a manual's "incident" or "filter" does not).
_REPORTING_STRONG = re.compile(
    r" (?:pentest\w*|penetration test\w*|red team\w*|security (?:review|report|finding|advisory|audit)|bug bounty"
    r"|vulnerabilit\w+|cve|exploit\w*|attackers?|prompt injections?|writeup|postmortem|owasp) ")
_REPORTING = re.compile(
    r" (?:pentest\w*|penetration test\w*|red team\w*|security (?:review|report|finding|advisory|audit|newsletter|summary|team)"
    r"|bug bounty|vulnerabilit\w+|cve|exploit\w*|attacks?|attackers?|phishing|prompt injections?|injected|injection attempts?"
    r"|jailbreaks?|detection rules?|blocklist|keyword filter|test cases?|regression tests?|threat\w*|bypass\w*|slipped past"
    r"|awareness training|writeup|postmortem|post mortem|owasp|patched|remediated|triaged|mitigat\w+|lessons learned"
    r"|incidents?|findings?|payloads?|refused|declined|detected|flagged"
    r"|pentest ergebnis|sicherheitsbericht|rapport de securite|informe de auditoria|auditoria|beveiligingsrapport"
    r"|raport z testow) ")


def _quoted_only(pattern: re.Pattern[str], normal: str, words_of: str, *, on_view: bool) -> bool:
    """True when ``pattern`` matches ``normal`` only inside quotation marks."""
    from .normal import words as words_form

    unquoted = _QUOTED.sub(" \u2026 ", normal)
    if unquoted == normal:
        return False
    return not pattern.search(unquoted if on_view else words_form(unquoted))


def rule_hit(normal: str, words: str) -> tuple[str, str] | None:
    """``(family, rule)`` of the first certain rule ``normal`` (a view of the text) matches. In
    a text that reports on attacks, phrases met only inside quotation marks, and links with
    slots, decide nothing (the classifier judges the report)."""
    marker = _marker(normal)
    if marker:
        return "role_marker", marker
    reporting = bool(_REPORTING.search(words))
    for family, rule, pattern, on_view in _PHRASES:
        if pattern.search(normal if on_view else words):
            if reporting and _quoted_only(pattern, normal, words, on_view=on_view):
                continue
            return family, rule
    if _VOCATIVE.search(normal) and not (reporting and _quoted_only(_VOCATIVE, normal, words, on_view=True)):
        return "address_ai", "address_phrase"
    if not _REPORTING_STRONG.search(words) and _exfiltration(normal, words):
        return "address_ai", "exfiltration_url"
    joined = _spaceless(words)
    for family, rule, pattern in _LANGUAGES:
        if pattern.search(joined):
            if reporting and _quoted_only(pattern, normal, words, on_view=False):
                continue
            return family, rule
    return None
