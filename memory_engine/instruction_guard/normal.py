"""What the guard reads: a text undone of the tricks that hide an instruction from a reader
while a model still reads it whole.

    normalise(text)   NFKC, invisible characters removed (shared with the <knowledge> fence)
    canonical(text)   letterforms (small capitals, circled and parenthesised letters, regional
                      indicators) as letters, normalise, then look-alike letters, spaced-out
                      and split words, leetspeak
    payloads(text)    the readable texts hidden in base64, base32, base85, hex and rot13
                      segments, and text written backwards
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

from .confusables import LETTERFORMS, REGIONAL
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


# --------------------------------------------------------------------------- letterforms

_LETTERFORMS = {ord(k): v for k, v in LETTERFORMS.items()}
_REGIONAL = {ord(k): v for k, v in REGIONAL.items()}
# Regional-indicator letters, invisible characters between them not counted: two make a flag.
_REGIONAL_RUN = re.compile(f"[\U0001F1E6-\U0001F1FF](?:{_INVISIBLE.pattern}*[\U0001F1E6-\U0001F1FF])*")


def letterforms(text: str) -> str:
    """Small capitals, negative circled and squared, and parenthesised letters as the plain
    letters they write (``ɪɢɴᴏʀᴇ`` -> ``ignore``; before NFKC, which would make ``⒤`` ``(i)``);
    regional-indicator letters too, unless every run of them is a pair (a flag: 🇫🇷)."""
    text = text.translate(_LETTERFORMS)
    runs = _REGIONAL_RUN.findall(text)
    if runs and any(len(_INVISIBLE.sub("", run)) != 2 for run in runs):
        text = text.translate(_REGIONAL)
    return text


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
    """The text as a reader sees it: letterforms as letters, normalised, look-alike letters as
    Latin, spaced-out and split words closed up, leetspeak as letters."""
    return unleet(respace(skeleton(normalise(letterforms(text)))))


# --------------------------------------------------------------------------- payloads

_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}={0,2}")
# One case throughout (RFC 4648 writes upper case; some tools lower): a word in capitals is a
# candidate too, and is turned down by what it decodes to.
_BASE32 = re.compile(r"(?<![A-Za-z0-9+/_-])(?:[A-Z2-7]{16,}|[a-z2-7]{16,})={0,6}(?![A-Za-z0-9+/=_-])")
# Ascii85 between Adobe's <~ ~> fences, or a bare run of its alphabet (no spaces: "z" aside,
# every character of an encoding is between "!" and "u").
_ASCII85_FENCED = re.compile(r"<~(.{5,}?)~>", re.DOTALL)
_ASCII85 = re.compile(r"(?<![!-u])[!-u]{20,}(?![!-u])")
# RFC 1924 (Python's b85, git's binary patches) and ZeroMQ's Z85: letters, digits and
# punctuation, no spaces.
_BASE85 = re.compile(r"(?<![!-~])[0-9A-Za-z!#$%&()*+\-;<=>?@^_`{|}~.:/\[\]]{20,}(?![!-~])")
_Z85_FROM = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_B85_TO = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"
_Z85_AS_B85 = str.maketrans(_Z85_FROM, _B85_TO)
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


def _base32_texts(text: str) -> list[str]:
    found = []
    for match in _BASE32.finditer(text):
        chunk = match.group().rstrip("=").upper()
        if len(chunk) % 8 in (1, 3, 6):
            continue  # no base32 encoding ends there
        try:
            raw = base64.b32decode(chunk + "=" * (-len(chunk) % 8))
        except (binascii.Error, ValueError):
            continue
        decoded = readable(raw)
        if decoded and _words_of_text(decoded):
            found.append(decoded)
    return found


def _base85_texts(text: str) -> list[str]:
    """Ascii85 (fenced or bare), RFC 1924 base85 and Z85 segments that decode to text."""
    found = []
    candidates: list[tuple[str, str]] = [(m.group(1), "a85") for m in _ASCII85_FENCED.finditer(text)]
    bare = _ASCII85_FENCED.sub(" ", text)
    candidates += [(m.group(), "a85") for m in _ASCII85.finditer(bare)]
    candidates += [(m.group(), "b85") for m in _BASE85.finditer(bare)]
    candidates += [(m.group().translate(_Z85_AS_B85), "b85") for m in _BASE85.finditer(bare)]
    for chunk, kind in candidates:
        if chunk.isalnum() and (chunk.isalpha() or chunk.isdigit()):
            continue  # a word or a number, not an encoding
        try:
            raw = base64.a85decode(re.sub(r"\s+", "", chunk)) if kind == "a85" else base64.b85decode(chunk)
        except (binascii.Error, ValueError):
            continue
        decoded = readable(raw.rstrip(b"\0"))
        if decoded and _words_of_text(decoded) and decoded not in found:
            found.append(decoded)
    return found


def _words_of_text(decoded: str) -> bool:
    """Decoded bytes that read as words: at least two runs of two or more letters, the letters
    in words rather than scattered through symbols (the encodings with punctuation in their
    alphabet can decode to printable noise)."""
    runs = re.findall(r"[^\W\d_]{2,}", decoded)
    return len(runs) >= 2 and sum(map(len, runs)) >= 0.5 * len(re.sub(r"\s", "", decoded))


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


def english_share(text: str) -> float:
    """The share of the text's Latin-letter words (longer than two letters counted as known) that
    are English dictionary words."""
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
    if named or english_share(turned) >= max(0.5, english_share(body) + 0.3):
        return [turned]
    return []


# Where a backwards sentence can begin or end inside a text: a line break, or a space beside
# sentence punctuation (a reversed sentence opens with its full stop: ".drowssap eht").
_CLAUSE_BREAK = re.compile(r"\n+|(?<=[.!?:;])\s+|\s+(?=[.!?]\S)")


def _backwards_vote(token: str) -> int:
    """+1 for a word that is a dictionary word backwards only, -1 forwards only, else 0."""
    letters = re.sub(r"[^A-Za-z]", "", token).lower()
    if len(letters) < 3:
        return 0
    vocab = vocabulary()
    return (letters[::-1] in vocab) - (letters in vocab)


def _reversed_texts(text: str) -> list[str]:
    """The text read backwards when that reads as much more English than the text itself: the
    whole text, or else the clauses (or runs of words) that do, turned where they stand. Both
    readings, letter by letter and word by word (the words in their order), since the
    dictionary cannot tell which was meant."""
    def backwards(part: str) -> bool:
        if len(re.findall(r"[A-Za-z]{2,}", part)) < 3:
            return False
        return english_share(part[::-1]) >= max(0.6, english_share(part) + 0.4)

    def backwards_run(part: str) -> str | None:
        """The longest run of the words of ``part`` that reads backwards (a reversed sentence
        run into a forward one without a break), when it reads backwards as a whole."""
        tokens = part.split()
        best, start, total, span = 0, 0, 0, (0, 0)
        for i, token in enumerate(tokens):
            total += _backwards_vote(token)
            if total <= 0:
                start, total = i + 1, 0
            elif total > best:
                best, span = total, (start, i + 1)
        run = " ".join(tokens[span[0]:span[1]])
        return run if best >= 3 and backwards(run) else None

    if backwards(text):
        parts = [text]
    else:
        parts = [found for part in (p.strip() for p in _CLAUSE_BREAK.split(text))
                 if (found := part if backwards(part) else backwards_run(part))]
    if not parts:
        return []
    by_letter, by_word = text, text
    for part in parts:  # turned where they stand, so what surrounds them is read with them
        by_letter = by_letter.replace(part, part[::-1])
        by_word = by_word.replace(part, " ".join(word[::-1] for word in part.split()))
    return [by_letter, by_word]


def payloads(text: str, *, depth: int = 3) -> list[tuple[str, str]]:
    """``(encoding, decoded text)`` for every base64, base32, base85 (ascii85, RFC 1924, Z85),
    hex or rot13 segment of ``text`` that decodes to readable text, for the text read backwards
    (``reversed``) when that reads as English and the text does not, and for what those decode
    to in turn (up to ``depth`` layers)."""
    found: list[tuple[str, str]] = []
    layer = [("", text)]
    for _ in range(depth):
        following: list[tuple[str, str]] = []
        for came_as, item in layer:
            turned = [] if came_as == "rot13" else _rot13_texts(item)  # rot13 twice is the text again
            backwards = [] if came_as == "reversed" else _reversed_texts(item)
            for name, texts in (("base64", _base64_texts(item)), ("base32", _base32_texts(item)),
                                ("base85", _base85_texts(item)), ("hex", _hex_texts(item)), ("rot13", turned),
                                ("reversed", backwards)):
                for decoded in texts:
                    if decoded != item and decoded != text and all(decoded != seen for _, seen in found):
                        found.append((name, decoded))
                        following.append((name, decoded))
        layer = following
        if not layer:
            break
    return found
