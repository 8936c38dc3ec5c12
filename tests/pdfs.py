"""PDFs the test suite writes itself, so behaviour tests need nothing beside the repository.

:func:`build_pdf` writes a small valid PDF page by page: Helvetica text lines, optionally a
full-page image (a "scan"), optionally with the text drawn invisibly over it (an OCR text
layer). :func:`encrypt` re-writes one with pypdf's standard security handler. ``SAMPLES``
names the files tests upload — text, multi-page, encrypted, scanned, damaged, empty —
and :func:`sample_pdf` builds each once per test session. Files of the optional
real-world corpus are read by :func:`read_pdf` too; :func:`pdf_params` marks them.
"""

from __future__ import annotations

import functools
import io
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from pypdf import PdfReader, PdfWriter

from tests.corpus import corpus, corpus_path

PAGE_SIZE = (612, 792)  # US Letter, in points
LINE_WIDTH = 80  # characters per line of generated prose


@dataclass(frozen=True)
class PdfPage:
    """One page: ``text`` lines (split on newlines), a full-page image, invisible text."""

    text: str = ""
    scanned: bool = False  # a full-page greyscale image, as a scanner writes
    invisible: bool = False  # text render mode 3: present for extraction, not painted (OCR layer)


def assemble(objects: Sequence[bytes]) -> bytes:
    """A PDF file of ``objects`` (numbered from 1, object 1 is the catalog) with a valid xref."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _literal(text: str) -> bytes:
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return b"(" + escaped.encode("latin-1") + b")"


def _content(page: PdfPage) -> bytes:
    parts = []
    if page.scanned:
        parts.append(b"q %d 0 0 %d 0 0 cm /Im1 Do Q" % PAGE_SIZE)
    if page.text:
        lines = page.text.split("\n")
        shown = b" T* ".join(_literal(line) + b" Tj" for line in lines)
        mode = b"3 Tr " if page.invisible else b""
        parts.append(b"BT /F1 12 Tf 14 TL " + mode + b"72 720 Td " + shown + b" ET")
    return b"\n".join(parts)


def _grey_image(width: int = 32, height: int = 32) -> bytes:
    """A small greyscale gradient, stretched over the page like a scanned sheet."""
    pixels = bytes((x * 7 + y * 3) % 256 for y in range(height) for x in range(width))
    return (b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
            b"/BitsPerComponent 8 /Length %d >>\nstream\n" % (width, height, len(pixels))
            + pixels + b"\nendstream")


def build_pdf(pages: Sequence[str | PdfPage], *, count: int | None = None) -> bytes:
    """A minimal valid PDF, one entry of ``pages`` per page ("" = a blank page).

    ``count`` overrides the page count the page tree claims (a lie hostile files tell).
    """
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, filled in below
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        _grey_image(),
    ]
    kids = []
    for entry in pages:
        page = entry if isinstance(entry, PdfPage) else PdfPage(text=entry)
        stream = _content(page)
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] " % PAGE_SIZE
            + b"/Resources << /Font << /F1 3 0 R >> /XObject << /Im1 4 0 R >> >> /Contents %d 0 R >>"
            % len(objects)
        )
        kids.append(b"%d 0 R" % len(objects))
    declared = len(kids) if count is None else count
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), declared)
    return assemble(objects)


def encrypt(data: bytes, user_password: str, *, algorithm: str, owner_password: str | None = None) -> bytes:
    """``data`` re-written with pypdf's standard security handler (RC4-128, AES-128, AES-256...)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password, owner_password, algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


# --- the prose on the generated pages ------------------------------------------------

_HANDBOOK = [
    "Every employee receives twenty days of paid leave a year.",
    "Requests for leave go to your team lead at least two weeks ahead.",
    "The office opens at eight and closes at seven on weekdays.",
    "Visitors sign in at the front desk and wear a badge at all times.",
    "Expenses above two hundred euros need a receipt and a manager's approval.",
    "Laptops are encrypted and locked whenever you leave your desk.",
    "The fire assembly point is the car park behind building B.",
    "Remote work is possible up to three days a week by agreement.",
    "Training budgets are reviewed every spring with each team.",
    "Security incidents are reported to the on-call engineer immediately.",
    "The canteen serves lunch between noon and two in the afternoon.",
    "Parking permits are renewed each January at reception.",
]


def prose(heading: str, sentences: int, *, start: int = 0) -> str:
    """``heading`` on its own line, then ``sentences`` handbook sentences wrapped into lines."""
    body = " ".join(_HANDBOOK[(start + n) % len(_HANDBOOK)] for n in range(sentences))
    return "\n".join([heading, *textwrap.wrap(body, LINE_WIDTH)])


MINIMAL_TEXT = "Lorem ipsum dolor sit amet, consectetur adipiscing elit."
BLIND_TEXT = "Hello, here is some text without a meaning."
LABEL_TEXT = "Percentage of respondents by region"
# What an OCR converter reads from ``scanned.pdf`` (its image carries no text layer).
SCANNED_TEXT = (
    "The Sequencer\n32 Track Recorder\n\n"
    "The Sequencer is a state—of—the-art composition tool for the working musician. "
    "It’s remarkably simple to learn and use.\n\n"
    "Operation is similar to a multi-track tape recorder with PLAY, STOP, RECORD, "
    "FAST FORWARD, REWIND and LOCATE controls.\n"
)


# Helvetica is written without an /Encoding, so its built-in StandardEncoding applies: byte 0xAE
# is its "fi" glyph and 0xAF its "fl" glyph, which pypdf reads as U+FB01 and U+FB02, as it reads
# the ligatures of a LaTeX document.
LIGATURE_TEXT = "The field office defined a fluid workflow for efficient filing."


def _ligatures() -> bytes:
    return build_pdf([LIGATURE_TEXT.replace("fi", "\xae").replace("fl", "\xaf")])


def _four_pages() -> bytes:
    return build_pdf([prose(BLIND_TEXT, 12, start=3 * n) for n in range(4)])


def _minimal() -> bytes:
    return build_pdf([MINIMAL_TEXT])


# name -> how to build it. Expected outcomes are in tests/test_extraction.py (SAMPLE_EXPECTED).
SAMPLES: dict[str, Callable[[], bytes]] = {
    "minimal.pdf": _minimal,
    "four-pages.pdf": _four_pages,
    "nineteen-pages.pdf": lambda: build_pdf([prose(f"Section {n}: Staff handbook", 10, start=n)
                                             for n in range(1, 20)]),
    "scanned.pdf": lambda: build_pdf([PdfPage(scanned=True)]),
    "scanned-three-pages.pdf": lambda: build_pdf([PdfPage(scanned=True)] * 3),
    # A scan whose second page carries a small text layer (a chart label).
    "scanned-with-label.pdf": lambda: build_pdf(
        [PdfPage(scanned=True), PdfPage(LABEL_TEXT, scanned=True), PdfPage(scanned=True)]
    ),
    # A scan after OCR: the image plus an invisible text layer on every page.
    "ocr-layer.pdf": lambda: build_pdf(
        [PdfPage(prose(f"SIEGE OF THE CITY, part {n}", 20, start=n), scanned=True, invisible=True)
         for n in range(1, 4)]
    ),
    "encrypted-rc4.pdf": lambda: encrypt(_four_pages(), "openpassword", algorithm="RC4-128"),
    "encrypted-aes128.pdf": lambda: encrypt(_minimal(), "asdfzxcv", algorithm="AES-128"),
    "encrypted-aes256.pdf": lambda: encrypt(_minimal(), "password", algorithm="AES-256"),
    # Restrictions only: the user password is empty, so anybody may open it.
    "owner-password-only.pdf": lambda: encrypt(_minimal(), "", owner_password="owner", algorithm="AES-128"),
    # "fi" and "fl" set as ligature glyphs.
    "ligatures.pdf": _ligatures,
    "empty.pdf": lambda: b"",
    "no-pages.pdf": lambda: build_pdf([]),
    "not-a-pdf.pdf": lambda: b"%PDF-1.3\nThis is not a valid PDF file\n%%EOF\n",
    "broken-page-tree.pdf": lambda: _minimal().replace(b"/Pages 2 0 R", b"/Pages 3"),
    # Every xref offset is wrong; pypdf rebuilds the table by scanning the file.
    "wrong-xref-offsets.pdf": lambda: _shift_xref(_minimal(), 7),
}

PASSWORDS: dict[str, str] = {
    "encrypted-rc4.pdf": "openpassword",
    "encrypted-aes128.pdf": "asdfzxcv",
    "encrypted-aes256.pdf": "password",
}


def _shift_xref(data: bytes, by: int) -> bytes:
    head, _, tail = data.partition(b"xref\n")
    lines = tail.split(b"\n")
    shifted = [b"%010d 00000 n " % (int(line[:10]) + by) if line.endswith(b" n ") else line for line in lines]
    return head + b"xref\n" + b"\n".join(shifted)


@functools.cache
def sample_pdf(name: str) -> bytes:
    """The generated sample ``name``, built once per session (encryption salts are random)."""
    return SAMPLES[name]()


def read_pdf(name: str) -> bytes:
    """A generated sample, or a file of the corpus's ``pdfs/`` directory."""
    return sample_pdf(name) if name in SAMPLES else corpus_path("pdfs", name).read_bytes()


def pdf_params(names: Iterable[str]) -> list[Any]:
    """``parametrize`` values for PDF names; corpus files carry the ``corpus`` mark."""
    return [name if name in SAMPLES else pytest.param(name, marks=corpus) for name in names]
