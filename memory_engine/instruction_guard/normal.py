"""What the guard reads: a text undone of the tricks that hide an instruction from a reader
while a model still reads it whole.

    normalise(text)   NFKC, invisible characters removed (shared with the <knowledge> fence)
    canonical(text)   normalise, then look-alike letters, spaced-out and split words, leetspeak
    payloads(text)    the readable texts hidden in base64, hex and rot13 segments
    words(text)       casefolded, accents removed, punctuation as single spaces

Each step only touches what it recognises: a plain sentence comes out of ``canonical`` as it
went in, so the classifier sees ordinary text unchanged.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import functools
import json
import re
import unicodedata

from .confusables import TABLE as _SKELETON

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


def words(text: str) -> str:
    """Casefolded, accents removed, every run of non-alphanumerics one space, padded with a
    space each side (so a pattern can anchor on `` word ``)."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return " " + " ".join(re.findall(r"[^\W_]+", folded)) + " "


# --------------------------------------------------------------------------- vocabulary

@functools.cache
def vocabulary() -> frozenset[str]:
    """Whole English words the default embedder's tokenizer knows (about 21,000): the
    dictionary that tells a respaced or de-leeted word from noise. Empty when the tokenizer is
    not installed (then those two steps only do what needs no dictionary)."""
    try:
        from memory_engine.providers.embeddings.onnx import default_tokenizer_path

        with open(default_tokenizer_path(), encoding="utf-8") as handle:
            vocab = json.load(handle)["model"]["vocab"]
    except Exception:  # a missing or unreadable tokenizer: no dictionary
        return frozenset()
    return frozenset(w for w in vocab if w.isascii() and w.isalpha() and (len(w) > 1 or w in "ai"))


def segment(letters: str) -> str:
    """``"ignoreallpreviousinstructions"`` -> ``"ignore all previous instructions"``: the split
    into dictionary words that leaves the fewest letters unexplained, then uses the fewest
    words; unexplained letters stay together as they were."""
    vocab = vocabulary()
    text = letters.lower()
    n = len(text)
    if not vocab or n > 400:
        return letters
    # best[i] = (unexplained letters, pieces, where the last piece starts) for text[:i]
    best: list[tuple[int, int, int]] = [(0, 0, 0)] + [(n + 1, n + 1, 0)] * n
    for end in range(1, n + 1):
        unknown, pieces, _ = best[end - 1]
        best[end] = (unknown + 1, pieces + 1, end - 1)  # one unexplained letter
        for start in range(max(0, end - 24), end - 1 if end > 1 else 0):
            if text[start:end] in vocab:
                unknown, pieces, _ = best[start]
                if (unknown, pieces + 1) < best[end][:2]:
                    best[end] = (unknown, pieces + 1, start)
        if text[end - 1:end] in vocab and best[end - 1][:2] < best[end][:2]:
            best[end] = (best[end - 1][0], best[end - 1][1] + 1, end - 1)
    pieces_out: list[tuple[str, bool]] = []
    end = n
    while end > 0:
        start = best[end][2]
        piece = text[start:end]
        pieces_out.append((piece, piece in vocab))
        end = start
    out: list[str] = []
    known_before = True
    for piece, known in reversed(pieces_out):
        if not known and not known_before and out:
            out[-1] += piece
        else:
            out.append(piece)
        known_before = known
    return " ".join(out)


# --------------------------------------------------------------------------- look-alikes

_LATIN = re.compile(r"[A-Za-z]")
_WORD = re.compile(r"[^\W\d_]+")


def _script_letter(ch: str) -> bool:
    return ch.isalpha() and not ("a" <= ch.lower() <= "z")


def skeleton(text: str) -> str:
    """Look-alike Cyrillic, Greek and Armenian letters as the Latin letters they pass for,
    where they disguise Latin words: in a word that mixes them with Latin letters, and in
    every word when all of the text's non-Latin letters are look-alikes (a Russian sentence
    has letters no Latin one resembles, and stays as it is)."""
    foreign = {ch for ch in text if _script_letter(ch)}
    if not foreign:
        return text
    disguised_all = all(ord(ch) in _SKELETON for ch in foreign) and bool(_LATIN.search(text) or len(foreign) > 2)

    def fix(match: re.Match[str]) -> str:
        word = match.group()
        if disguised_all or (_LATIN.search(word) and all(ord(c) in _SKELETON for c in word if _script_letter(c))):
            return word.translate(_SKELETON)
        return word

    return _WORD.sub(fix, text)


# --------------------------------------------------------------------------- spacing

# Single letters joined by one separator each: "i g n o r e", "I.g.n.o.r.e", "f-o-r-g-e-t".
_SPACED_RUN = re.compile(r"(?<![^\W_])(?:[^\W\d_][ .\-_*·•/|]+){3,}[^\W\d_](?![^\W_])")
# A word broken by hyphens into parts that are not words themselves: "ig-nore", "in-struc-tions".
_HYPHENATED = re.compile(r"\b[A-Za-z]+(?:-[A-Za-z]+)+\b")


def respace(text: str) -> str:
    """Spaced-out words closed up: within a run of single letters, a wider gap (two spaces,
    `` / ``) or a separator that differs from the one between letters marks a word break;
    a run with none is split into dictionary words."""
    def close(match: re.Match[str]) -> str:
        run = match.group()
        gaps = re.findall(r"[^\W\d_]([ .\-_*·•/|]+)(?=[^\W\d_])", run)
        narrow = min(gaps, key=len)
        parts = re.split(r"[ .\-_*·•/|]+", run)
        letters = [p for p in parts if p]
        if all(g == narrow for g in gaps):
            return segment("".join(letters))
        out, word = [], ""
        for letter, gap in zip(letters, [*gaps, narrow], strict=True):
            word += letter
            if gap != narrow:
                out.append(word)
                word = ""
        out.append(word)
        return " ".join(segment(w) if len(w) > 12 else w for w in out if w)

    text = _SPACED_RUN.sub(close, text)
    vocab = vocabulary()
    if not vocab:
        return text

    def join(match: re.Match[str]) -> str:
        parts = match.group().split("-")
        joined = "".join(parts)
        if joined.lower() in vocab and not all(p.lower() in vocab for p in parts):
            return joined
        return match.group()

    return _HYPHENATED.sub(join, text)


# --------------------------------------------------------------------------- leetspeak

_LEET = {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b", "9": "g", "@": "a", "$": "s",
         "!": "i", "|": "l", "+": "t"}
_LEET_TOKEN = re.compile(r"(?<![\w@$!|+])[\w@$!|+]*[A-Za-z][\w@$!|+]*(?![\w@$!|+])")


def unleet(text: str) -> str:
    """Leetspeak words back in letters (``1gn0r3`` -> ``ignore``, ``ru|es`` -> ``rules``): a
    token of at least two letters with digits or symbols among them is replaced when the
    letters it gives make a dictionary word (``1`` tried as ``i`` and as ``l``)."""
    vocab = vocabulary()
    if not vocab:
        return text

    def letters(token: str) -> str | None:
        for one in ("i", "l"):
            mapped = "".join({**_LEET, "1": one}.get(c, c) for c in token.lower())
            if mapped.isalpha() and mapped in vocab:
                return mapped
        return None

    def fix(match: re.Match[str]) -> str:
        token = match.group()
        alpha = sum(c.isalpha() for c in token)
        leet = sum(c in _LEET for c in token)
        if token.isalpha() or not leet or alpha + leet < 3 or (alpha < 2 and leet < 2):
            return token  # "A1", "4k": too short to be a disguised word
        core = token.rstrip("!|+")  # "approve!" ends a sentence
        mapped = letters(token) or (letters(core) if core != token else None)
        if mapped is None and alpha >= 4 and alpha >= leet and core.isalnum():
            spelled = "".join({**_LEET, "1": "i"}.get(c, c) for c in core.lower())
            mapped = spelled if spelled.isalpha() else None  # "unr357r1c73d": a word the dictionary lacks
        if mapped is None:
            return token
        return mapped if len(mapped) == len(token) else mapped + token[len(core):]

    return _LEET_TOKEN.sub(fix, text)


def canonical(text: str) -> str:
    """The text as a reader sees it: normalised, look-alike letters as Latin, spaced-out and
    split words closed up, leetspeak as letters."""
    return unleet(respace(skeleton(normalise(text))))


# --------------------------------------------------------------------------- payloads

_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}={0,2}")
_HEX = re.compile(r"(?:\\x|0x)?[0-9A-Fa-f]{2}(?:[\s:,]?(?:\\x|0x)?[0-9A-Fa-f]{2}){7,}")
_ROT13_NAMED = re.compile(r"\b(?:rot[\s-]?13|caesar|rotate by 13)\b", re.IGNORECASE)


def readable(raw: bytes) -> str | None:
    """``raw`` as text when it is UTF-8 that reads as language (mostly letters and spaces,
    at least two words), else None: hashes, ids and binary files decode to noise."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    text = text.strip()
    if len(text) < 8 or any(unicodedata.category(c) in ("Cc", "Cs", "Co", "Cn") and c not in "\n\r\t" for c in text):
        return None
    letters = sum(c.isalpha() for c in text)
    if letters < 0.35 * len(text) or len(text.split()) < 2 and len(text) < 24:
        return None
    return text


def _base64_texts(text: str) -> list[str]:
    found = []
    for match in _BASE64.finditer(text):
        chunk = match.group()
        if chunk.isalpha() and (chunk.islower() or chunk.isupper()):
            continue  # a long word, not an encoding
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                raw = decode(chunk + "=" * (-len(chunk) % 4))
            except (binascii.Error, ValueError):
                continue
            decoded = readable(raw)
            if decoded:
                found.append(decoded)
                break
    return found


def _hex_texts(text: str) -> list[str]:
    found = []
    for match in _HEX.finditer(text):
        digits = re.sub(r"\\x|0x|[\s:,]", "", match.group())
        if len(digits) % 2:
            continue
        decoded = readable(bytes.fromhex(digits))
        if decoded:
            found.append(decoded)
    return found


def _english_share(text: str) -> float:
    tokens = re.findall(r"[A-Za-z]+", text)
    if not tokens:
        return 0.0
    vocab = vocabulary()
    return sum(t.lower() in vocab and len(t) > 2 for t in tokens) / len(tokens)


def _rot13_texts(text: str) -> list[str]:
    """The text turned by 13 letters when that reads as more English than the text itself,
    or when the text names rot13 (only the part after the name then)."""
    if not re.search(r"[A-Za-z]{3}", text):
        return []
    named = _ROT13_NAMED.search(text)
    body = text[named.end():] if named else text
    turned = codecs.encode(body, "rot13")
    if named or _english_share(turned) >= max(0.5, _english_share(body) + 0.3):
        return [turned]
    return []


def payloads(text: str, *, depth: int = 3) -> list[tuple[str, str]]:
    """``(encoding, decoded text)`` for every base64, hex or rot13 segment of ``text`` that
    decodes to readable text, and for what those decode to in turn (up to ``depth`` layers)."""
    found: list[tuple[str, str]] = []
    layer = [("", text)]
    for _ in range(depth):
        following: list[tuple[str, str]] = []
        for came_as, item in layer:
            turned = [] if came_as == "rot13" else _rot13_texts(item)  # rot13 twice is the text again
            for name, texts in (("base64", _base64_texts(item)), ("hex", _hex_texts(item)), ("rot13", turned)):
                for decoded in texts:
                    if decoded != item and decoded != text and all(decoded != seen for _, seen in found):
                        found.append((name, decoded))
                        following.append((name, decoded))
        layer = following
        if not layer:
            break
    return found
