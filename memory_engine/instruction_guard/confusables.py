"""Letters of other scripts that render like Latin ones: the guard's skeleton table.

In the spirit of Unicode TR39's confusable skeletons, restricted to what a disguised
English instruction uses: Cyrillic, Greek and Armenian letters (and a few Latin-extended
and IPA ones) whose usual glyph is that of a basic Latin letter. Curated by hand, so the
table ships with the code and nothing is downloaded. A letter that resembles a Latin one
in one case only (Cyrillic ``м``/``М``) maps only in that case; loose resemblances (``п``,
``и``, ``г``, ``т``) are left out, since the more of a real Cyrillic word the table covers,
the likelier a Russian sentence would read as a disguise. Full-width, mathematical and
other compatibility forms need no entry: NFKC folds them before the table is read.

:data:`LETTERFORMS` is the other half: letter shapes that NFKC leaves alone and no language
writes words in (small capitals, negative circled and squared letters, parenthesised letters,
which NFKC would turn into ``(a)``, and regional-indicator letters). They are read as the
plain letters everywhere, not only in disguised words; regional indicators only outside a
flag (:func:`memory_engine.instruction_guard.normal.letterforms` decides).
"""

from __future__ import annotations

#: look-alike letter -> the basic Latin letter it passes for
SKELETON: dict[str, str] = {
    # Cyrillic lower case
    "\u0430": "a", "\u0435": "e",
    "\u0456": "i", "\u0458": "j", "\u043a": "k", "\u043e": "o", "\u0440": "p",
    "\u0441": "c", "\u0443": "y", "\u0445": "x", "\u0455": "s", "\u0501": "d",
    "\u051b": "q", "\u051d": "w", "\u04bb": "h", "\u04cf": "l", "\u0475": "v", "\u0461": "w",
    "\u04af": "y",
    # Cyrillic upper case
    "\u0410": "A", "\u0412": "B", "\u0415": "E", "\u0406": "I",
    "\u0408": "J", "\u041a": "K", "\u041c": "M", "\u041d": "H", "\u041e": "O", "\u0420": "P",
    "\u0421": "C", "\u0422": "T", "\u0423": "Y", "\u0425": "X", "\u0405": "S", "\u04ae": "Y",
    "\u04c0": "I", "\u0500": "D", "\u051a": "Q", "\u051c": "W",
    # Greek lower case
    "\u03b1": "a", "\u03b2": "b", "\u03b3": "y", "\u03b5": "e", "\u03b9": "i", "\u03ba": "k",
    "\u03bd": "v", "\u03bf": "o", "\u03c1": "p", "\u03c4": "t", "\u03c5": "u", "\u03c7": "x",
    "\u03c9": "w", "\u03f2": "c", "\u03f3": "j", "\u03ac": "a", "\u03ad": "e", "\u03af": "i",
    "\u03cc": "o", "\u03cd": "u",
    # Greek upper case
    "\u0391": "A", "\u0392": "B", "\u0395": "E", "\u0396": "Z", "\u0397": "H", "\u0399": "I",
    "\u039a": "K", "\u039c": "M", "\u039d": "N", "\u039f": "O", "\u03a1": "P", "\u03a4": "T",
    "\u03a5": "Y", "\u03a7": "X", "\u03f9": "C", "\u037f": "J",
    # Armenian
    "\u0570": "h", "\u0578": "n", "\u057d": "u", "\u0581": "g", "\u0584": "f", "\u0566": "q",
    "\u0555": "O", "\u054d": "U",
    # Latin extended and IPA letters that pass for basic ones
    "\u0131": "i", "\u0237": "j", "\u0251": "a", "\u0261": "g", "\u0269": "i",
    "\u01c0": "l", "\u0196": "l", "\u0585": "o",
}

#: For str.translate.
TABLE = {ord(k): v for k, v in SKELETON.items()}

_SMALL_CAPITALS = "ᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘꞯʀꜱᴛᴜᴠᴡxʏᴢ"
#: letter shape -> the plain letter it writes
LETTERFORMS: dict[str, str] = {
    # small capitals (ʀ, ɪ, ʏ, ʟ also write IPA sounds; read as letters they lose nothing)
    **{cap: plain for cap, plain in zip(_SMALL_CAPITALS, "abcdefghijklmnopqrstuvwxyz", strict=True) if cap != "x"},
    "\u1d07": "e", "\u1d00": "a", "\u1d01": "ae", "\u0276": "oe", "\u1d1a": "r",
    # modifier small capitals NFKC would turn into small capitals, and a few it leaves alone
    "\u1da6": "i", "\u1dab": "l", "\u1db0": "n", "\u1db8": "u", "\u02b6": "r",
    # negative circled and negative squared capitals, parenthesised small letters
    **{chr(0x1F150 + i): chr(0x61 + i) for i in range(26)},
    **{chr(0x1F170 + i): chr(0x61 + i) for i in range(26)},
    **{chr(0x249C + i): chr(0x61 + i) for i in range(26)},
}
#: regional-indicator letter -> the plain letter (read only outside flags)
REGIONAL: dict[str, str] = {chr(0x1F1E6 + i): chr(0x61 + i) for i in range(26)}
