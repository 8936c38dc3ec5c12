"""The PII pass: patterns that place a text in a sensitive consent category for certain.

Each pattern names what it found (``iban``, ``medication`` …), never the text it matched: the name
is what the ledger records. Identifiers with a check digit (IBAN, payment cards) are checked, so a
long number is not taken for one by its shape alone; identifiers without one (passport, national
id, driving licence) are found only after a word that names them. Patterns are linear (no nested
quantifiers over the same characters), so a 32 KB memory takes a few milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .categories import ConsentCategory


@dataclass(frozen=True)
class Finding:
    """One reason to place a text in ``category``: the pass and the pattern (or exemplar set)."""

    category: str
    source: str  # "pii" or "embedding"
    pattern: str
    similarity: float | None = None

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"category": self.category, "pass": self.source, "pattern": self.pattern}
        if self.similarity is not None:
            found["similarity"] = round(self.similarity, 4)
        return found


_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


class Lexicon:
    """Words and phrases found by looking tokens up, not by an alternation tried at every
    character: one pass over the text whatever the length of the list."""

    def __init__(self, *phrases: str) -> None:
        self.phrases = frozenset(tuple(_TOKEN.findall(phrase.lower().replace("’", "'"))) for phrase in phrases)
        self.longest = max(len(phrase) for phrase in self.phrases)

    def ends(self, text: str) -> Iterator[int]:
        """The offset after each phrase of the lexicon in ``text``."""
        tokens = [(m.group(0).lower().replace("’", "'"), m.end()) for m in _TOKEN.finditer(text)]
        for start in range(len(tokens)):
            for size in range(1, self.longest + 1):
                if start + size > len(tokens):
                    break
                if tuple(token for token, _ in tokens[start:start + size]) in self.phrases:
                    yield tokens[start + size - 1][1]

    def search(self, text: str) -> bool:
        return next(self.ends(text), None) is not None


# --- identity ------------------------------------------------------------------------------------

_IBAN = re.compile(r"\b[A-Z]{2}[0-9]{2}(?:[ ]?[A-Z0-9]){11,30}\b")
_CARD = re.compile(r"\b[0-9](?:[ -]?[0-9]){12,18}\b")
_SSN = re.compile(r"\b(?!000|666|9[0-9]{2})[0-9]{3}-(?!00)[0-9]{2}-(?!0000)[0-9]{4}\b")
_NINO = re.compile(r"\b[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D]\b")
#: Words that name an identity document or number; an id is what follows them.
_ID_WORDS = Lexicon(
    "passport", "paspoort", "reisepass", "passeport", "pasaporte", "passaporto", "national id",
    "national identity number", "national identification number", "identity card", "id card", "id number",
    "id no", "personal id", "personalausweis", "carte d'identité", "carte d'identite", "dni", "bsn",
    "burgerservicenummer", "sofinummer", "social security", "ssn", "national insurance", "nino",
    "codice fiscale", "aadhaar", "pesel", "steuer id", "tax id", "tax identification number", "driver's license",
    "drivers license", "driving licence", "driving license", "driver license", "licence number", "license number",
    "personnummer", "health insurance number", "medicare number", "nhs number",
)
_ID_TAIL = re.compile(r"(?:\s*(?:number|no\.?|nr\.?|num\.?|#|id))?\s*(?:is|:|=|-)?\s*"
                      r"(?P<id>[A-Z0-9](?:[A-Z0-9]|[ .-](?=[A-Z0-9])){4,20})", re.IGNORECASE)
_DATE = (r"(?:[0-9]{1,2}[./-][0-9]{1,2}[./-](?:19|20)?[0-9]{2}|(?:19|20)[0-9]{2}-[0-9]{1,2}-[0-9]{1,2}"
         r"|[0-9]{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?[A-Za-z]{3,9}\.?,?\s+(?:19|20)[0-9]{2}"
         r"|[A-Za-z]{3,9}\.?\s+[0-9]{1,2}(?:st|nd|rd|th)?,?\s+(?:19|20)[0-9]{2})")
_BIRTH = re.compile(
    r"\b(?:date of birth|birth date|birthdate|dob|d\.o\.b\.?|born on|born|birthday is|birthday on|geboren am|"
    rf"geboren op|geboortedatum|né le|née le|fecha de nacimiento)\b\s*(?:is|:|-|on|in)?\s*{_DATE}",
    re.IGNORECASE,
)


def _iban_valid(value: str) -> bool:
    """ISO 13616 mod-97 check."""
    compact = value.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    digits = "".join(str(int(ch, 36)) for ch in moved)
    return int(digits) % 97 == 1


def _luhn_valid(value: str) -> bool:
    digits = [int(ch) for ch in value if ch.isdigit()]
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    total = 0
    for index, digit in enumerate(reversed(digits)):
        if index % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def _id_number(text: str) -> bool:
    """An identity document's word followed by something with at least three digits."""
    for end in _ID_WORDS.ends(text):
        match = _ID_TAIL.match(text, end)
        if match is not None and sum(ch.isdigit() for ch in match.group("id")) >= 3:
            return True
    return False


# --- location ------------------------------------------------------------------------------------

_COORDINATES = re.compile(r"(?<![\w.])(?P<lat>[-+]?[0-9]{1,2}\.[0-9]{4,})°?\s*[NS]?\s*[,;/ ]\s*"
                          r"(?P<lon>[-+]?[0-9]{1,3}\.[0-9]{4,})°?\s*[EW]?(?!\w|\.[0-9])")
_DMS = re.compile(r"\b[0-9]{1,3}\s?°\s?[0-9]{1,2}\s?['′]\s?(?:[0-9]{1,2}(?:\.[0-9]+)?\s?[\"″]\s?)?[NSEW]\b")
_GEO_WORDS = re.compile(r"\b(?:lat(?:itude)?|lng|lon(?:gitude)?|gps|geo ?location|coordinates)\b\s*[:=]?\s*"
                        r"[-+]?[0-9]{1,3}\.[0-9]{2,}", re.IGNORECASE)
_STREET_SUFFIXES = (
    "street|st|avenue|ave|road|rd|boulevard|blvd|lane|ln|drive|dr|court|ct|way|place|pl|terrace|crescent|close"
    "|square|sq|highway|hwy|parkway|pkwy|alley|mews|grove|gardens"
)
# "221B Baker Street", "1600 Pennsylvania Avenue NW"
_STREET_EN = re.compile(rf"\b[0-9]{{1,5}}[A-Za-z]?,?\s+(?:[A-Z][A-Za-z'.-]+\s+){{1,4}}(?i:{_STREET_SUFFIXES})\b")
# "Keizersgracht 123", "Hauptstraße 5"
_STREET_GERMANIC = re.compile(
    r"\b[A-ZÄÖÜ][a-zäöüß]+(?:straat|weg|laan|gracht|plein|kade|singel|dijk|steeg|straße|strasse|gasse|allee|platz"
    r"|gade|vej|gatan|vägen|veien)\s+[0-9]{1,4}[a-zA-Z]?\b")
# "12 rue de Rivoli", "Via Roma 7", "Calle Mayor 3": a house number on one side
_ROMANCE_WAY = r"(?i:rue|avenue|boulevard|chemin|via|viale|piazza|calle|avenida|plaza|rua|praça)"
_ROMANCE_NAME = r"(?:(?i:de la|des|del|della|de|du|da|do|d')\s?)?[A-ZÀ-Ý][\w'’-]+"
# the name first, the number after: only a capitalised way ("via Slack 2" is no address)
_ROMANCE_WAY_TITLE = r"(?:Rue|Avenue|Boulevard|Chemin|Via|Viale|Piazza|Calle|Avenida|Plaza|Rua|Praça)"
_STREET_ROMANCE = re.compile(rf"\b[0-9]{{1,4}},?\s+{_ROMANCE_WAY}\s+{_ROMANCE_NAME}"
                             rf"|\b{_ROMANCE_WAY_TITLE}\s+{_ROMANCE_NAME}(?:\s+[A-ZÀ-Ý][\w'’-]+)?,?\s+[0-9]{{1,4}}\b")
_POSTCODE = re.compile(
    r"\b[A-Z]{1,2}[0-9][A-Z0-9]? [0-9][A-Z]{2}\b"          # UK
    r"|\b[1-9][0-9]{3} ?[A-Z]{2}\b(?=,?\s+[A-Z][a-z])"       # NL, before the town
    r"|\b[A-Z]{2} [0-9]{5}(?:-[0-9]{4})?\b"                 # US state + ZIP
)
_RESIDENCE = re.compile(
    r"\b(?i:lives|living|resides|residing|staying|home address|address is|postal address|mailing address"
    r"|postcode is|zip code is|currently located|whereabouts)\b"
    r"(?:\s+(?i:in|at|on|near|is|:))?\s+(?:the\s+)?(?:[0-9]|[A-Z][a-z])",
)


def _coordinates(text: str) -> bool:
    for match in _COORDINATES.finditer(text):
        lat, lon = float(match.group("lat")), float(match.group("lon"))
        # two small fractions in a row are scores, not a place (0.9512, 0.9033)
        if abs(lat) <= 90 and abs(lon) <= 180 and (abs(lat) >= 1 or abs(lon) >= 1):
            return True
    return _DMS.search(text) is not None or _GEO_WORDS.search(text) is not None


# --- health --------------------------------------------------------------------------------------

_CONDITIONS = Lexicon(
    "diabetes", "diabetic", "asthma", "asthmatic", "cancer", "tumour", "tumor", "leukemia", "leukaemia", "lymphoma",
    "chemotherapy", "chemo", "radiotherapy", "depression", "depressive", "anxiety disorder", "panic attacks",
    "panic disorder", "bipolar", "schizophrenia", "psychosis", "adhd", "autism", "autistic", "dyslexia", "hiv",
    "hepatitis", "epilepsy", "epileptic", "seizure", "seizures", "migraine", "migraines", "hypertension",
    "high blood pressure", "low blood pressure", "heart disease", "heart attack", "heart failure", "arrhythmia",
    "copd", "arthritis", "rheumatoid", "crohn's", "crohns", "colitis", "celiac", "coeliac", "irritable bowel",
    "lupus", "multiple sclerosis", "parkinson's", "parkinsons", "alzheimer's", "alzheimers", "dementia", "ptsd",
    "eating disorder", "anorexia", "bulimia", "insomnia", "sleep apnea", "sleep apnoea", "long covid",
    "tuberculosis", "pneumonia", "kidney disease", "renal failure", "dialysis", "cirrhosis", "thyroid",
    "hypothyroidism", "hyperthyroidism", "endometriosis", "pcos", "infertility", "ivf", "miscarriage", "pregnant",
    "pregnancy", "disability", "wheelchair", "hearing loss", "hearing aid", "hearing aids", "visually impaired",
    "allergic to", "allergy to", "allergies to", "food allergy", "nut allergy", "anaphylaxis", "addiction",
    "alcoholism", "substance abuse", "suicidal", "self-harm", "self harm", "psychiatrist", "psychiatric",
    "therapist", "therapy sessions", "psychotherapy", "counselling for", "counseling for", "physiotherapy",
    "physiotherapist", "surgery", "biopsy", "mri", "ct scan", "blood test", "blood tests", "cholesterol",
    "concussion", "fracture", "fractured", "broken leg", "broken arm", "broken wrist", "hemophilia", "sickle cell",
    "chlamydia", "herpes", "gluten intolerance", "lactose intolerant", "lactose intolerance", "diagnosed with",
    "was diagnosed", "been diagnosed", "a diagnosis of", "his diagnosis", "her diagnosis", "their diagnosis",
    "my diagnosis", "suffers from", "suffering from", "treated for", "undergoing treatment", "receiving treatment",
    "prognosis", "in remission",
    "medical condition", "health condition", "icd-10", "icd 10", "icd-11", "oncologist", "cardiologist",
    "neurologist", "endocrinologist", "gp appointment", "doctor's appointment", "hospitalised", "hospitalized",
    "hospital stay", "sick leave", "burnout", "burn-out",
)
_MEDICATIONS = Lexicon(
    "metformin", "insulin", "ozempic", "semaglutide", "wegovy", "sertraline", "zoloft", "fluoxetine", "prozac",
    "escitalopram", "lexapro", "citalopram", "paroxetine", "venlafaxine", "duloxetine", "bupropion", "wellbutrin",
    "mirtazapine", "amitriptyline", "quetiapine", "seroquel", "olanzapine", "risperidone", "aripiprazole",
    "lamotrigine", "levetiracetam", "valproate", "carbamazepine", "methylphenidate", "ritalin", "adderall",
    "concerta", "lisdexamfetamine", "vyvanse", "diazepam", "valium", "lorazepam", "alprazolam", "xanax",
    "clonazepam", "zolpidem", "lisinopril", "ramipril", "losartan", "amlodipine", "bisoprolol", "metoprolol",
    "atorvastatin", "lipitor", "simvastatin", "rosuvastatin", "warfarin", "apixaban", "eliquis", "rivaroxaban",
    "xarelto", "clopidogrel", "levothyroxine", "synthroid", "prednisone", "prednisolone", "methotrexate",
    "adalimumab", "humira", "infliximab", "omeprazole", "pantoprazole", "salbutamol", "albuterol", "ventolin",
    "inhaler", "epipen", "montelukast", "gabapentin", "pregabalin", "lyrica", "tramadol", "oxycodone", "morphine",
    "codeine", "fentanyl", "methadone", "buprenorphine", "naltrexone", "sumatriptan", "truvada", "prep",
    "antiretroviral", "antiretrovirals", "antidepressant", "antidepressants", "antipsychotic", "antipsychotics",
    "anticoagulant", "anticoagulants", "blood thinner", "blood thinners", "beta blocker", "beta blockers", "statin",
    "statins", "hormone therapy", "hrt", "birth control pill", "contraceptive pill", "antibiotics", "amoxicillin",
    "doxycycline", "azithromycin", "ibuprofen", "paracetamol", "acetaminophen", "antihistamine", "antihistamines",
    "medication", "medications", "prescription", "prescriptions", "dosage", "was prescribed", "been prescribed",
    "is prescribed", "prescribed him", "prescribed her", "prescribed me", "prescribed them",
)
_DOSE = re.compile(r"\b[0-9]+(?:\.[0-9]+)?\s?(?:mg|mcg|µg|ug|iu|ml)\b[^.\n]{0,40}?\b(?:daily|a day|per day|twice"
                   r"|once|nightly|every morning|every evening|tablets?|pills?|capsules?|injections?)\b",
                   re.IGNORECASE)

#: Tag keys that say what the value is (``{"ssn": ...}``, ``{"diagnosis": ...}``).
_TAG_KEYS: dict[str, str] = {
    **dict.fromkeys((
        "ssn", "passport", "passport_number", "national_id", "national_id_number", "bsn", "iban", "dob",
        "date_of_birth", "birth_date", "birthdate", "tax_id", "drivers_license", "driving_licence", "id_number"),
        ConsentCategory.IDENTITY),
    **dict.fromkeys((
        "address", "home_address", "street_address", "postal_address", "postcode", "zip", "zip_code", "gps",
        "coordinates", "latitude", "longitude", "lat", "lng", "lon", "geolocation"), ConsentCategory.LOCATION),
    **dict.fromkeys((
        "diagnosis", "diagnoses", "medication", "medications", "medical", "health", "symptom", "symptoms",
        "treatment", "prescription", "allergy", "allergies", "disability"), ConsentCategory.HEALTH),
}


def _valid_matches(pattern: re.Pattern[str], text: str, check: Callable[[str], bool]) -> bool:
    return any(check(match.group(0)) for match in pattern.finditer(text))


#: (category, pattern name, finder), most sensitive first; each finder answers whether the text has it.
PATTERNS: tuple[tuple[str, str, Callable[[str], bool]], ...] = (
    (ConsentCategory.HEALTH, "diagnosis", _CONDITIONS.search),
    (ConsentCategory.HEALTH, "medication", lambda text: _MEDICATIONS.search(text) or _DOSE.search(text) is not None),
    (ConsentCategory.IDENTITY, "iban", lambda text: _valid_matches(_IBAN, text, _iban_valid)),
    (ConsentCategory.IDENTITY, "payment_card", lambda text: _valid_matches(_CARD, text, _luhn_valid)),
    (ConsentCategory.IDENTITY, "ssn", lambda text: _SSN.search(text) is not None),
    (ConsentCategory.IDENTITY, "national_insurance", lambda text: _NINO.search(text) is not None),
    (ConsentCategory.IDENTITY, "id_number", _id_number),
    (ConsentCategory.IDENTITY, "date_of_birth", lambda text: _BIRTH.search(text) is not None),
    (ConsentCategory.LOCATION, "coordinates", _coordinates),
    (ConsentCategory.LOCATION, "street_address", lambda text: any(
        p.search(text) is not None for p in (_STREET_EN, _STREET_GERMANIC, _STREET_ROMANCE, _POSTCODE))),
    (ConsentCategory.LOCATION, "residence", lambda text: _RESIDENCE.search(text) is not None),
)


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    """The strings inside a tags or metadata value (nested a few levels at most)."""
    if depth > 4:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item, depth + 1)


def pii_findings(text: str, *, tags: dict[str, Any] | None = None, extra: Iterable[str] = ()) -> list[Finding]:
    """What the patterns find in ``text``, ``extra`` strings (a title, a summary) and ``tags`` (its
    string values and keys that name what their value is): one finding per pattern that matched."""
    texts = [text, *extra, *_strings(tags or {})]
    findings = []
    for category, name, found in PATTERNS:
        if any(found(part) for part in texts if part):
            findings.append(Finding(category=category, source="pii", pattern=name))
    for key, value in (tags or {}).items():
        name = str(key).strip().lower().replace("-", "_").replace(" ", "_")
        if name in _TAG_KEYS and value not in (None, "", [], {}, False):
            findings.append(Finding(category=_TAG_KEYS[name], source="pii", pattern=f"tag_key:{name[:40]}"))
    return findings
