# ruff: noqa: E501  (word lists read best one language to a line)
"""Words an injection cannot do without, in the languages the guard reads without a model.

To set earlier instructions aside a text needs a verb of setting aside and a word for
instructions; to reach the next model it names a model and has it read; to unchain one it
says "without restrictions". Those words are listed here per language (Dutch, German,
French, Spanish, Italian, Portuguese, Polish, Russian, Ukrainian, Chinese, Japanese, Korean,
Arabic; English has its own, finer patterns in :mod:`~memory_engine.instruction_guard.rules`)
and combined there. Other languages are left to the classifier. Entries are written as a reader spells them;
they are casefolded and stripped of accents when compiled, like the text they are matched
on. A trailing ``*`` matches any ending (inflected forms: ``инструкци*``).

Chinese, Japanese and Korean (whose particles attach to the word) are matched as
characters, in either order (verb before or after its object), the others as whole words.
"""

from __future__ import annotations

#: verbs (imperative) that set instructions aside; the phrase needs an instruction noun after it
SET_ASIDE: dict[str, list[str]] = {
    "nl": ["negeer", "negeren", "vergeet", "ignoreer", "laat los", "let niet langer op", "let niet meer op",
           "volg niet langer", "volg niet meer", "houd je niet meer aan", "houd je niet langer aan", "schrap"],
    "de": ["ignoriere", "ignorier", "vergiss", "vergessen sie", "missachte", "ubergehe", "verwirf",
           "halte dich nicht mehr an", "halte dich nicht langer an", "befolge nicht mehr", "folge nicht mehr"],
    "fr": ["ignore", "ignorez", "oublie", "oubliez", "ne tiens plus compte", "ne tenez plus compte",
           "fais abstraction", "faites abstraction", "ne suis plus", "ne suivez plus", "neglige", "negligez"],
    "es": ["ignora", "ignore", "olvida", "olvide", "no hagas caso", "no haga caso", "descarta", "omite",
           "deja de seguir", "desobedece", "haz caso omiso"],
    "it": ["ignora", "dimentica", "dimenticate", "non seguire piu", "non tenere conto", "trascura", "scarta"],
    "pt": ["ignore", "ignora", "esqueca", "esquece", "desconsidere", "desconsidera", "descarte",
           "nao siga mais", "deixe de seguir"],
    "pl": ["zignoruj", "ignoruj", "zapomnij", "pomin", "odrzuc", "nie stosuj sie do", "przestan stosowac"],
    "ru": ["игнорир*", "проигнорир*", "забудь", "забудьте", "не обращай внимания на", "не обращайте внимания на",
           "не следуй", "не следуйте", "отбрось", "отбросьте", "отмени", "не слушай"],
    "uk": ["ігнор*", "проігнор*", "забудь", "забудьте", "не зважай на", "відкинь"],
    "ar": ["تجاهل", "تجاهلي", "انس", "انسى", "لا تتبع", "اهمل"],
    "ko": ["무시", "잊어", "잊으", "따르지 마"],
    "zh": ["忽略", "忽视", "无视", "無視", "忘记", "忘掉", "忘記", "不要理会", "不要遵守", "不再遵守", "别管", "跳过", "抛开", "拋開"],
    "ja": ["無視", "忘れ", "従わず", "従わないで", "従うな"],
}

#: words for the reader's instructions
INSTRUCTIONS: dict[str, list[str]] = {
    "nl": ["instructies", "instructie", "regels", "opdrachten", "richtlijnen", "systeemprompt", "prompt", "voorschriften"],
    "de": ["anweisungen", "anweisung", "instruktionen", "regeln", "vorgaben", "befehle", "richtlinien",
           "systemprompt", "systemanweisungen", "prompt"],
    "fr": ["instructions", "consignes", "regles", "directives", "ordres", "prompt", "indications"],
    "es": ["instrucciones", "reglas", "indicaciones", "directrices", "ordenes", "prompt", "normas"],
    "it": ["istruzioni", "regole", "indicazioni", "direttive", "prompt", "ordini"],
    "pt": ["instrucoes", "regras", "orientacoes", "diretrizes", "ordens", "prompt"],
    "pl": ["instrukcje", "instrukcji", "instrukcjach", "polecenia", "polecen", "poleceniach", "zasady", "zasad", "zasadach",
           "reguly", "regul", "regulach", "wytyczne", "wytycznych"],
    "ru": ["инструкци*", "указани*", "правил*", "промпт*", "директив*", "ограничени*"],
    "uk": ["інструкці*", "вказівк*", "правил*", "промпт*", "настанов*"],
    "ar": ["التعليمات", "تعليمات", "الأوامر", "الاوامر", "القواعد", "التوجيهات"],
    "ko": ["지시", "지침", "규칙", "프롬프트", "명령"],
    "zh": ["指令", "指示", "规则", "規則", "提示词", "提示詞", "系统提示", "設定", "设定", "命令", "要求"],
    "ja": ["指示", "ルール", "命令", "プロンプト", "規則", "制約"],
}

#: a qualifier that makes the instructions the reader's own (earlier, all, yours, the system's)
QUALIFIERS: dict[str, list[str]] = {
    "nl": ["vorige", "eerdere", "voorgaande", "alle", "je", "jouw", "uw", "oorspronkelijke", "bovenstaande"],
    "de": ["alle", "vorherigen", "bisherigen", "obigen", "vorigen", "fruheren", "ursprunglichen", "deine",
           "ihre", "dir gegebenen"],
    "fr": ["precedentes", "anterieures", "toutes", "tes", "vos", "initiales", "ci dessus", "recues"],
    "es": ["anteriores", "previas", "todas", "tus", "sus", "originales", "recibidas", "iniciales"],
    "it": ["precedenti", "tutte", "tue", "ricevute", "iniziali", "finora"],
    "pt": ["anteriores", "todas", "suas", "tuas", "originais", "recebidas"],
    "pl": ["wszystkie", "poprzednie", "wczesniejsze", "swoje", "twoje", "wczesniejszych", "poprzednich", "swoich", "twoich"],
    "ru": ["предыдущ*", "прежн*", "вс*", "сво*", "тво*", "ваш*", "системн*", "исходн*", "ранее*", "данн*"],
    "uk": ["попередн*", "усі", "всі", "сво*", "тво*", "системн*"],
    "ar": ["السابقة", "جميع", "كل"],
    "ko": ["이전", "모든", "기존"],
}

#: verbs that ask for the reader's hidden text
DISCLOSE: dict[str, list[str]] = {
    "nl": ["toon", "laat zien", "geef", "print", "onthul"],
    "de": ["gib", "zeig", "zeige", "verrate", "nenne", "drucke"],
    "fr": ["affiche", "affichez", "revele", "revelez", "montre", "montrez", "donne", "donnez", "recite"],
    "es": ["muestra", "muestre", "revela", "revele", "imprime", "dime"],
    "it": ["mostra", "rivela", "stampa", "dimmi"],
    "pt": ["mostre", "mostra", "revele", "revela", "imprima"],
    "pl": ["pokaz", "wypisz", "ujawnij", "podaj"],
    "ru": ["покажи", "покажите", "выведи", "выведите", "раскрой", "раскройте", "напиши", "перескажи"],
    "uk": ["покажи", "виведи", "розкрий"],
    "ko": ["출력", "보여", "알려"],
    "zh": ["输出", "輸出", "显示", "顯示", "告诉我", "告訴我", "透露", "打印", "展示"],
    "ja": ["出力", "表示", "教え", "見せ"],
}

#: the reader's hidden text
HIDDEN_TEXT: dict[str, list[str]] = {
    "nl": ["systeemprompt", "verborgen instructies"],
    "de": ["systemprompt", "versteckten anweisungen", "geheimen anweisungen", "systemanweisungen"],
    "fr": ["prompt systeme", "instructions cachees", "instructions secretes"],
    "es": ["prompt de sistema", "prompt del sistema", "instrucciones ocultas", "instrucciones secretas"],
    "it": ["prompt di sistema", "istruzioni nascoste", "istruzioni segrete"],
    "pt": ["prompt de sistema", "prompt do sistema", "instrucoes ocultas", "instrucoes secretas"],
    "pl": ["prompt systemowy", "ukryte instrukcje"],
    "ru": ["системн* промпт*", "системн* инструкци*", "скрыт* инструкци*", "скрыт* указани*"],
    "uk": ["системн* промпт*", "приховані інструкції"],
    "ko": ["시스템 프롬프트", "숨겨진 지시"],
    "zh": ["系统提示", "系統提示", "隐藏指令", "隱藏指令", "系统指令"],
    "ja": ["システムプロンプト", "隠された指示", "秘密の指示"],
}

#: names for an AI reader
AI: dict[str, list[str]] = {
    "nl": ["ai", "taalmodel", "chatbot", "assistent", "kunstmatige intelligentie"],
    "de": ["ki", "sprachmodell", "chatbot", "assistent", "kunstliche intelligenz"],
    "fr": ["ia", "modele de langage", "chatbot", "assistant", "intelligence artificielle"],
    "es": ["ia", "modelo de lenguaje", "chatbot", "asistente", "inteligencia artificial"],
    "it": ["ia", "modello linguistico", "chatbot", "assistente", "intelligenza artificiale"],
    "pt": ["ia", "modelo de linguagem", "chatbot", "assistente", "inteligencia artificial"],
    "pl": ["si", "ai", "model jezykowy", "chatbot", "asystent", "sztuczna inteligencja", "sztucznej inteligencji"],
    "ru": ["ии", "нейросет*", "языков* модел*", "чат бот*", "ассистент*", "искусственн* интеллект*", "модел*"],
    "uk": ["ші", "нейромереж*", "мовн* модел*", "асистент*", "модел*"],
    "ar": ["الذكاء الاصطناعي", "نموذج", "المساعد"],
    "ko": ["ai", "인공지능", "언어 모델", "챗봇", "어시스턴트"],
    "zh": ["ai", "人工智能", "人工智慧", "模型", "助手", "机器人", "機器人"],
    "ja": ["ai", "人工知能", "モデル", "アシスタント", "チャットボット"],
}

#: "without restrictions": an unchained reader
UNCHAINED: dict[str, list[str]] = {
    "nl": ["zonder beperkingen", "zonder regels", "zonder filters", "zonder grenzen"],
    "de": ["ohne einschrankungen", "ohne regeln", "ohne filter", "ohne grenzen", "uneingeschrankt*"],
    "fr": ["sans restriction*", "sans aucune restriction*", "sans limites", "sans regles", "sans filtre*"],
    "es": ["sin restricciones", "sin limites", "sin reglas", "sin filtros"],
    "it": ["senza limiti", "senza restrizioni", "senza regole", "senza filtri"],
    "pt": ["sem restricoes", "sem limites", "sem regras", "sem filtros"],
    "pl": ["bez ograniczen", "bez zasad", "bez filtrow"],
    "ru": ["без ограничени*", "без правил", "без фильтр*", "без цензур*"],
    "uk": ["без обмежень", "без правил"],
    "ko": ["제한 없는", "제한이 없는", "제한없는"],
    "zh": ["没有限制", "沒有限制", "没有任何限制", "沒有任何限制", "无限制", "無限制", "不受限制", "没有规则"],
    "ja": ["制限のない", "制限なし", "制限のない", "ルールのない"],
}

#: the next model reading: "reading this", "that reads this"
READING: dict[str, list[str]] = {
    "nl": ["die dit leest", "dat dit leest", "die dit verwerkt", "dat dit verwerkt"],
    "de": ["die das liest", "das das liest", "die dies liest", "das dies liest", "die diesen text liest"],
    "fr": ["qui lit ceci", "qui lira ce", "qui lit ce", "qui traite ce"],
    "es": ["que lea esto", "que lee esto", "que procese esto", "que procesa esto"],
    "it": ["che legga questo", "che legge questo", "che elabora questo"],
    "pt": ["que leia isto", "que le isto", "que leia isso", "que processe isto"],
    "pl": ["ktora to czyta", "ktory to czyta", "czytajac* to"],
    "ru": ["читающ* это", "котор* это читает", "котор* читает это", "обрабатывающ* это"],
    "uk": ["що читає це", "яка читає це", "який читає це"],
    "ar": ["يقرأ هذا", "تقرأ هذا"],
    "ko": ["읽는"],
    "zh": ["阅读此", "閱讀此", "读到这", "讀到這", "看到这", "阅读这"],
    "ja": ["読んでいる", "読む"],
}
