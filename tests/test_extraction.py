"""memory_engine.extraction: sniffing and native text extraction.

Every PDF must end in a known outcome: pages with text, or one specific ExtractionError
code. The suite's own PDFs (``tests/pdfs.py``) cover each outcome; the real-world PDFs of
the optional corpus (``@pytest.mark.corpus``) are checked the same way when it is present.
A corpus file not classified here is checked against what the corpus's manifest
(``pdfs/pdf-manifest.json``) records of it: its pages, its encryption, whether pypdf read text;
a file the manifest does not list either fails ``test_every_corpus_pdf_has_an_expected_outcome``
until it is classified. Every behaviour a user relies on runs on both PDF extractors (the
``extractor`` fixture: pypdf and pdfium, the PDF_EXTRACTOR setting); tests of pypdf's own
failure modes (its exceptions, its logger) run on pypdf only.
"""

from __future__ import annotations

import io
import json
import logging
import random
import struct
import threading
import zlib
from dataclasses import dataclass

import pytest
from pypdf import PageObject, PdfReader
from pypdf.errors import DependencyError, LimitReachedError, PdfReadError, PdfStreamError
from pypdfium2 import PdfiumError

from memory_engine import extraction
from memory_engine.chunking import Page
from memory_engine.exceptions import EmptyFile, PDFDamaged
from memory_engine.extraction import PDF_EXTRACTORS, ExtractionError, extract_pages, iter_pages, sniff_content_type
from tests.conftest import finishes_within
from tests.corpus import CORPUS, corpus, corpus_path
from tests.pdfs import (
    BLIND_TEXT,
    LABEL_TEXT,
    LIGATURE_TEXT,
    MINIMAL_TEXT,
    SAMPLES,
    build_pdf,
    pdf_params,
    read_pdf,
)
from tests.pdfs import PASSWORDS as SAMPLE_PASSWORDS

PDF = "application/pdf"

CORPUS_PASSWORDS = {
    "sf-libreoffice-writer-password.pdf": "openpassword",  # RC4
    "pypdf-crazyones-encrypted-256.pdf": "password",  # AES-256
    "pypdf-r4-aes-user-password.pdf": "asdfzxcv",  # AES-128
    "plumber-password-example.pdf": "test",  # RC4
}
PASSWORDS = {**SAMPLE_PASSWORDS, **CORPUS_PASSWORDS}
# AES needs the `cryptography` package; RC4 is built into pypdf.
AES_ENCRYPTED = {"pypdf-crazyones-encrypted-256.pdf", "pypdf-r4-aes-user-password.pdf"}
SAMPLE_AES = {"encrypted-aes128.pdf", "encrypted-aes256.pdf"}
# Zero-byte files: the API refuses them before a document exists.
ZERO_BYTES = {"empty.pdf", "plumber-empty.pdf"}


@dataclass(frozen=True)
class Text:
    """Extraction succeeds: ``pages`` pages, text on ``text_pages`` (all when None)."""

    pages: int
    contains: str
    text_pages: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Fails:
    code: str
    details: dict | None = None  # expected subset of the error's details


SAMPLE_EXPECTED: dict[str, Text | Fails] = {
    "broken-page-tree.pdf": Fails("PDF_DAMAGED", {"stage": "page_tree"}),
    "empty.pdf": Fails("EMPTY_FILE"),
    "encrypted-aes128.pdf": Text(1, MINIMAL_TEXT),
    "encrypted-aes256.pdf": Text(1, MINIMAL_TEXT),
    "encrypted-rc4.pdf": Text(4, BLIND_TEXT),
    "four-pages.pdf": Text(4, BLIND_TEXT),
    "ligatures.pdf": Text(1, LIGATURE_TEXT),
    "minimal.pdf": Text(1, MINIMAL_TEXT),
    "nineteen-pages.pdf": Text(19, "Section 19: Staff handbook"),
    "no-pages.pdf": Fails("EMPTY_FILE", {"pages": 0}),
    "not-a-pdf.pdf": Fails("PDF_DAMAGED", {"stage": "open"}),
    "ocr-layer.pdf": Text(3, "SIEGE OF THE CITY, part 3"),
    "owner-password-only.pdf": Text(1, MINIMAL_TEXT),
    "scanned-three-pages.pdf": Fails("NO_TEXT_LAYER", {"pages": 3}),
    "scanned-with-label.pdf": Text(3, LABEL_TEXT, text_pages=(2,)),
    "scanned.pdf": Fails("NO_TEXT_LAYER", {"pages": 1}),
    # Wrong xref offsets, which pypdf repairs.
    "wrong-xref-offsets.pdf": Text(1, MINIMAL_TEXT),
}

CORPUS_EXPECTED: dict[str, Text | Fails] = {
    "ocrmypdf-c02-22-scanned.pdf": Fails("NO_TEXT_LAYER", {"pages": 1}),
    "ocrmypdf-invalid.pdf": Fails("PDF_DAMAGED", {"stage": "open"}),
    "ocrmypdf-linn-scanned.pdf": Fails("NO_TEXT_LAYER", {"pages": 1}),
    # Not a pure scan: page 4 carries a small text layer (chart labels).
    "ocrmypdf-multipage-scanned.pdf": Text(6, "Percentage", text_pages=(4,)),
    "ocrmypdf-skew-scanned.pdf": Fails("NO_TEXT_LAYER", {"pages": 1}),
    "plumber-WARN-Report-2015-2016.pdf": Text(16, "Notice Date"),
    "plumber-empty.pdf": Fails("EMPTY_FILE"),
    "plumber-nics-background-checks-2015-11.pdf": Text(1, "State / Territory"),
    "plumber-password-example.pdf": Text(4, "Backup4all"),
    "plumber-scotus-transcript-p1.pdf": Text(1, "SUPREME COURT"),
    "pypdf-GeoBase_NHNC1_Data_Model_UML_EN.pdf": Text(19, "National Hydro Network"),
    "pypdf-Seige_of_Vicksburg_Sample_OCR.pdf": Text(6, "SIEGE   OF  VICKSBURG"),
    "pypdf-bytes.pdf": Text(1, "This is a test for a PDF with bytes title"),
    "pypdf-crazyones-encrypted-256.pdf": Text(1, "The Crazy Ones"),
    # Damaged structure (qpdf: "file is damaged") that pypdf recovers.
    "pypdf-issue-297.pdf": Text(1, "test example"),
    "pypdf-r4-aes-user-password.pdf": Text(1, "pdf encryption test"),
    "sf-google-doc-document.pdf": Text(1, "Beautiful is better than ugly."),
    "sf-libreoffice-writer-password.pdf": Text(1, "Lorem ipsum dolor sit amet"),
    "sf-minimal-document.pdf": Text(1, "Lorem ipsum dolor sit amet"),
    "sf-multicolumn.pdf": Text(3, "Two-Column Document with Lorem Ipsum"),
    "sf-pdflatex-4-pages.pdf": Text(4, "Hello, here is some text without a meaning."),
    "sf-unreadablemetadata.pdf": Fails("PDF_DAMAGED", {"stage": "page_tree"}),
}

EXPECTED = {**SAMPLE_EXPECTED, **CORPUS_EXPECTED}
# Unicode's Latin ligatures (ﬁ, ﬂ, ﬀ...): extraction writes them as their letters.
LIGATURES = {chr(code) for code in range(0xFB00, 0xFB07)}


@pytest.fixture(params=PDF_EXTRACTORS)
def extractor(request) -> str:
    """Each PDF extractor in turn (the PDF_EXTRACTOR setting)."""
    return request.param


def manifest() -> dict[str, dict]:
    """The corpus's own record of each PDF (page counts as pypdf saw them)."""
    path = corpus_path("pdfs", "pdf-manifest.json")
    return {entry["file"]: entry for entry in json.loads(path.read_text())} if path.exists() else {}


def assert_outcome(run, expected: Text | Fails, *, budget: float) -> list[Page] | None:
    if isinstance(expected, Fails):
        with finishes_within(budget), pytest.raises(ExtractionError) as info:
            run()
        assert info.value.code == expected.code, info.value.details
        assert expected.details is None or expected.details.items() <= info.value.details.items()
        return None
    with finishes_within(budget):
        pages = run()
    assert_pages(pages, expected)
    return pages


def assert_pages(pages: list[Page], expected: Text) -> None:
    assert [page.number for page in pages] == list(range(1, expected.pages + 1))
    with_text = tuple(page.number for page in pages if page.text.strip())
    assert with_text == (expected.text_pages or tuple(range(1, expected.pages + 1)))
    # Spacing differs between extractors (pypdf keeps a layout's runs of spaces).
    assert " ".join(expected.contains.split()) in " ".join("\n".join(page.text for page in pages).split())
    assert_clean(pages)


def assert_clean(pages: list[Page]) -> None:
    assert all(isinstance(page, Page) and "\x00" not in page.text and "\ufffe" not in page.text for page in pages)
    assert not LIGATURES & set("".join(page.text for page in pages))


def corpus_pdfs_beyond_expected() -> list[str]:
    """The corpus's PDFs that CORPUS_EXPECTED does not classify (none without a corpus)."""
    folder = corpus_path("pdfs") if CORPUS else None
    names = {path.name for path in folder.glob("*.pdf")} if folder and folder.is_dir() else set()
    return sorted(names - set(CORPUS_EXPECTED))


# --- every PDF: the generated samples and the corpus -----------------------------------


def test_every_sample_has_an_expected_outcome():
    assert set(SAMPLES) == set(SAMPLE_EXPECTED)


@corpus
def test_corpus_pdfs_are_present():
    assert sorted(corpus_path("pdfs").glob("*.pdf")), f"no PDFs under {corpus_path('pdfs')}"


@corpus
def test_every_corpus_pdf_has_an_expected_outcome():
    assert set(corpus_pdfs_beyond_expected()) <= set(manifest())


#: Why the manifest check has nothing to run when every corpus PDF is named above (a skip group).
ALL_CORPUS_PDFS_NAMED = "every corpus PDF is named by an outcome above: none is checked by the manifest alone"


@corpus
@pytest.mark.parametrize("name", corpus_pdfs_beyond_expected()
                         or [pytest.param(None, marks=pytest.mark.skip(reason=ALL_CORPUS_PDFS_NAMED))])
def test_a_corpus_pdf_classified_only_by_the_manifest_ends_as_it_records(name, extractor):
    """A corpus file no outcome above names: the outcome follows from what the manifest records."""
    entry = manifest()[name]
    data = read_pdf(name)

    def run() -> list[Page]:
        return extract_pages(data, sniff_content_type(data, filename=name, declared=PDF),
                             password=PASSWORDS.get(name), pdf_extractor=extractor)

    if not entry["bytes"]:
        assert_outcome(run, Fails("EMPTY_FILE"), budget=30)
    elif entry.get("pages_pypdf") is None:
        assert_outcome(run, Fails("PDF_DAMAGED"), budget=30)
    elif not entry.get("pypdf_text_chars"):
        assert_outcome(run, Fails("NO_TEXT_LAYER", {"pages": entry["pages_pypdf"]}), budget=120)
    else:
        try:
            with finishes_within(120):
                pages = run()
        except ExtractionError as error:
            # Encrypted with a password the suite does not know (one an empty password does not open).
            assert entry["encrypted"] and error.code == "PDF_ENCRYPTED", error.details
            assert error.details == {"reason": "password_required"}
            return
        assert [page.number for page in pages] == list(range(1, entry["pages_pypdf"] + 1))
        # Extractors space text differently (pypdf keeps a layout's runs of spaces): none loses half.
        assert sum(len(page.text) for page in pages) >= entry["pypdf_text_chars"] / 2
        assert_clean(pages)


@pytest.mark.parametrize("name", pdf_params(sorted(EXPECTED)))
def test_pdf_outcome(name, extractor):
    data = read_pdf(name)
    expected = EXPECTED[name]

    def run() -> list[Page]:
        content_type = sniff_content_type(data, filename=name, declared=PDF)
        assert content_type == PDF
        return extract_pages(data, content_type, password=PASSWORDS.get(name), pdf_extractor=extractor)

    pages = assert_outcome(run, expected, budget=120)
    pages_pypdf = manifest().get(name, {}).get("pages_pypdf") if name in CORPUS_EXPECTED else None
    if pages is not None and pages_pypdf is not None:
        assert len(pages) == pages_pypdf


@pytest.mark.parametrize("name", pdf_params(sorted(PASSWORDS)))
def test_encrypted_pdf_without_password(name, extractor):
    with pytest.raises(ExtractionError) as info:
        extract_pages(read_pdf(name), PDF, pdf_extractor=extractor)
    assert info.value.code == "PDF_ENCRYPTED"
    assert info.value.details == {"reason": "password_required"}
    assert "`password`" in info.value.message


@pytest.mark.parametrize("name", pdf_params(sorted(PASSWORDS)))
@pytest.mark.parametrize("password", ["wrong", "", "OPENPASSWORD"])
def test_encrypted_pdf_with_wrong_password(name, password, extractor):
    with pytest.raises(ExtractionError) as info:
        extract_pages(read_pdf(name), PDF, password=password, pdf_extractor=extractor)
    assert info.value.code == "PDF_ENCRYPTED"
    # A blank password field counts as no password.
    assert info.value.details == {"reason": "wrong_password" if password else "password_required"}
    assert "`password`" in info.value.message


@pytest.mark.parametrize("name", pdf_params(sorted(PASSWORDS)))
def test_encrypted_pdf_with_password(name, extractor):
    expected = EXPECTED[name]
    assert_outcome(lambda: extract_pages(read_pdf(name), PDF, password=PASSWORDS[name], pdf_extractor=extractor),
                   expected, budget=120)


def test_owner_password_only_opens_without_a_password(extractor):
    assert PdfReader(io.BytesIO(read_pdf("owner-password-only.pdf"))).is_encrypted
    assert extract_pages(read_pdf("owner-password-only.pdf"), PDF, pdf_extractor=extractor) == [Page(MINIMAL_TEXT, 1)]


def test_owner_password_only_with_a_wrong_password(extractor):
    with pytest.raises(ExtractionError) as info:
        extract_pages(read_pdf("owner-password-only.pdf"), PDF, password="wrong", pdf_extractor=extractor)
    assert info.value.code == "PDF_ENCRYPTED"
    assert info.value.details == {"reason": "wrong_password"}


@pytest.mark.parametrize("name", pdf_params(sorted(SAMPLE_AES | AES_ENCRYPTED)))
def test_aes_pdfs_decrypt_with_cryptography(name, extractor):
    pages = extract_pages(read_pdf(name), PDF, password=PASSWORDS[name], pdf_extractor=extractor)
    assert pages[0].text.strip()


@pytest.mark.parametrize("name", pdf_params([
    "broken-page-tree.pdf", "not-a-pdf.pdf", "wrong-xref-offsets.pdf",
    "sf-unreadablemetadata.pdf", "ocrmypdf-invalid.pdf", "pypdf-issue-297.pdf",
]))
def test_damaged_pdfs_finish_quickly(name, extractor):
    """Within 30 seconds a damaged PDF ends as EXPECTED names it: the pages of text when the
    extractor repairs it, else PDF_DAMAGED saying so and naming the damage (a document's terminal
    status for each: tests/documents/test_pipeline.py)."""
    expected = EXPECTED[name]
    pages: list[Page] | None = None
    error: ExtractionError | None = None
    with finishes_within(30):
        try:
            pages = extract_pages(read_pdf(name), PDF, pdf_extractor=extractor)
        except ExtractionError as refused:
            error = refused
    if isinstance(expected, Text):
        assert error is None, error.as_dict() if error else None
        assert pages is not None
        assert_pages(pages, expected)
        return
    assert error is not None, f"{name} was read ({len(pages or [])} pages); expected {expected.code}"
    assert error.code == expected.code == "PDF_DAMAGED", error.as_dict()
    assert expected.details is None or expected.details.items() <= error.details.items()
    assert error.details["error"]  # the extractor's own message, for the operator
    assert "damaged" in error.message


@pytest.mark.parametrize(("page_tree", "not_a_pdf"), [
    ("broken-page-tree.pdf", "not-a-pdf.pdf"),
    pytest.param("sf-unreadablemetadata.pdf", "ocrmypdf-invalid.pdf", marks=corpus),
])
def test_damaged_pdf_details_carry_the_pypdf_message(page_tree, not_a_pdf, extractor):
    # pdfium refuses both files; the pypdf path then names the damage, for either extractor.
    with pytest.raises(ExtractionError) as info:
        extract_pages(read_pdf(page_tree), PDF, pdf_extractor=extractor)
    assert "Invalid object in /Pages" in info.value.details["error"]
    with pytest.raises(ExtractionError) as info:
        extract_pages(read_pdf(not_a_pdf), PDF, pdf_extractor=extractor)
    assert info.value.details == {"stage": "open", "error": "PdfReadError: startxref not found"}


@pytest.mark.parametrize("name", pdf_params([
    "scanned.pdf", "scanned-three-pages.pdf",
    "ocrmypdf-c02-22-scanned.pdf", "ocrmypdf-linn-scanned.pdf", "ocrmypdf-skew-scanned.pdf",
]))
def test_scans_without_text_layer_ask_for_an_ocr_rule(name, extractor):
    with pytest.raises(ExtractionError) as info:
        extract_pages(read_pdf(name), PDF, pdf_extractor=extractor)
    assert info.value.code == "NO_TEXT_LAYER"
    assert info.value.details == {"pages": EXPECTED[name].details["pages"], "failed_pages": 0}
    assert "OCR" in info.value.message
    assert "application/pdf" in info.value.message


@pytest.mark.parametrize("name", pdf_params(["ocr-layer.pdf", "pypdf-Seige_of_Vicksburg_Sample_OCR.pdf"]))
def test_scan_with_ocr_text_layer_has_text_on_every_page(name, extractor):
    pages = extract_pages(read_pdf(name), PDF, pdf_extractor=extractor)
    assert [page.number for page in pages] == list(range(1, EXPECTED[name].pages + 1))
    assert all(len(page.text) > 1000 for page in pages)


@pytest.mark.parametrize("name", pdf_params(sorted(ZERO_BYTES)))
def test_empty_pdf_file(name, extractor):
    assert read_pdf(name) == b""
    with pytest.raises(ExtractionError) as info:
        extract_pages(read_pdf(name), PDF, pdf_extractor=extractor)
    assert info.value.code == "EMPTY_FILE"


# --- synthetic PDFs ----------------------------------------------------------------


def test_pages_are_numbered_from_one_and_blank_pages_are_kept(extractor):
    pages = extract_pages(build_pdf(["first page", "", "third (with) \\ symbols"]), PDF, pdf_extractor=extractor)
    assert pages == [
        Page("first page", 1),
        Page("", 2),
        Page("third (with) \\ symbols", 3),
    ]


def test_ligatures_are_read_as_their_letters(extractor):
    # pypdf reads the "fi" and "fl" glyphs as U+FB01 and U+FB02, which the embedder's tokenizer and
    # the lexical index take for other words; pdfium gives the letters.
    [page] = extract_pages(read_pdf("ligatures.pdf"), PDF, pdf_extractor=extractor)
    assert page.text.strip() == LIGATURE_TEXT


def test_nul_characters_are_stripped_from_pdf_text(extractor):
    data = build_pdf(["a\x00b"])
    assert PdfReader(io.BytesIO(data)).pages[0].extract_text() == "a\x00b"
    assert extract_pages(data, PDF, pdf_extractor=extractor) == [Page("ab", 1)]


def test_pdfium_line_breaks_are_newlines():
    [page] = extract_pages(build_pdf(["one\ntwo\nthree"]), PDF, pdf_extractor="pdfium")
    assert page.text == "one\ntwo\nthree"


@corpus
def test_pdfium_hyphen_at_a_line_end_is_written_as_pypdf_writes_it():
    data = read_pdf("pypdf-Seige_of_Vicksburg_Sample_OCR.pdf")
    for extractor in PDF_EXTRACTORS:
        text = "".join(page.text for page in extract_pages(data, PDF, pdf_extractor=extractor))
        assert "conspicuous and dan-\ngerous" in text.replace(" \n", "\n")


def test_blank_pages_only_is_no_text_layer(extractor):
    with pytest.raises(ExtractionError) as info:
        extract_pages(build_pdf(["", "", ""]), PDF, pdf_extractor=extractor)
    assert info.value.code == "NO_TEXT_LAYER"
    assert info.value.details == {"pages": 3, "failed_pages": 0}


def test_pdf_without_pages_is_empty(extractor):
    with pytest.raises(ExtractionError) as info:
        extract_pages(build_pdf([]), PDF, pdf_extractor=extractor)
    assert info.value.code == "EMPTY_FILE"
    assert info.value.details == {"pages": 0}


def test_too_many_pages_is_rejected_before_extracting(monkeypatch, extractor):
    def must_not_run(*args, **kwargs):
        raise AssertionError("text extracted from a PDF over the page limit")

    data = build_pdf([f"page {n}" for n in range(1, 31)])
    monkeypatch.setattr(PageObject, "extract_text", must_not_run)
    monkeypatch.setattr(extraction, "_pdfium_page_text", must_not_run)
    with pytest.raises(ExtractionError) as info:
        extract_pages(data, PDF, max_pages=10, pdf_extractor=extractor)
    assert info.value.code == "PDF_TOO_LARGE"
    assert info.value.details == {"pages": 30, "max_pages": 10}


def test_page_limit_is_inclusive(extractor):
    pages = extract_pages(build_pdf([f"page {n}" for n in range(1, 11)]), PDF, max_pages=10, pdf_extractor=extractor)
    assert [page.text for page in pages] == [f"page {n}" for n in range(1, 11)]


def test_a_claimed_page_count_is_not_trusted(extractor):
    pages = extract_pages(build_pdf(["a", "b", "c"], count=9_999_999), PDF, max_pages=10, pdf_extractor=extractor)
    assert [page.number for page in pages] == [1, 2, 3]


def test_page_tree_over_pypdf_limits_is_too_large(monkeypatch):
    def refuse(self, *args, **kwargs):
        raise LimitReachedError("Maximum page tree depth reached: 101 > 100.")

    monkeypatch.setattr(PdfReader, "_flatten", refuse)
    with pytest.raises(ExtractionError) as info:
        extract_pages(build_pdf(["a"]), PDF)
    assert info.value.code == "PDF_TOO_LARGE"
    assert "page tree depth" in info.value.details["error"]


def failing_on(marker: str, exception: BaseException):
    original = PageObject.extract_text

    def extract_text(self, *args, **kwargs):
        text = original(self, *args, **kwargs)
        if marker in text:
            raise exception
        return text

    return extract_text


def pdfium_failing_on(marker: str, exception: BaseException):
    original = extraction._pdfium_page_text

    def page_text(document, index):
        text = original(document, index)
        if marker in text:
            raise exception
        return text

    return page_text


# What each extractor raises when a page cannot be read.
PAGE_FAILURES = {"pypdf": KeyError("/Font"), "pdfium": PdfiumError("Failed to load page.")}


@pytest.fixture
def fail_pages_with(monkeypatch, extractor):
    """Make pages whose text holds a marker fail in ``extractor``; returns the exception raised."""
    def patch(marker: str) -> BaseException:
        failure = PAGE_FAILURES[extractor]
        if extractor == "pdfium":
            monkeypatch.setattr(extraction, "_pdfium_page_text", pdfium_failing_on(marker, failure))
        else:
            monkeypatch.setattr(PageObject, "extract_text", failing_on(marker, failure))
        return failure

    return patch


def test_a_page_that_fails_is_left_out(fail_pages_with, extractor):
    fail_pages_with("boom")
    pages = extract_pages(build_pdf(["one", "boom", "three"]), PDF, pdf_extractor=extractor)
    assert pages == [Page("one", 1), Page("three", 3)]


def test_every_page_failing_is_damaged(fail_pages_with, extractor):
    failure = fail_pages_with("boom")
    with pytest.raises(ExtractionError) as info:
        extract_pages(build_pdf(["boom 1", "boom 2"]), PDF, pdf_extractor=extractor)
    assert info.value.code == "PDF_DAMAGED"
    assert info.value.details == {
        "stage": "extract_text", "error": f"{type(failure).__name__}: {failure}", "pages": 2, "failed_pages": 2,
    }


def test_failed_and_blank_pages_only_is_no_text_layer(fail_pages_with, extractor):
    fail_pages_with("boom")
    with pytest.raises(ExtractionError) as info:
        extract_pages(build_pdf(["boom", ""]), PDF, pdf_extractor=extractor)
    assert info.value.code == "NO_TEXT_LAYER"
    assert info.value.details == {"pages": 2, "failed_pages": 1}


HOSTILE_FAILURES = [
    PdfReadError("bad xref"),
    PdfStreamError("Stream has ended unexpectedly"),
    LimitReachedError("too much"),
    ValueError("invalid literal for int()"),
    KeyError("/Root"),
    IndexError("list index out of range"),
    TypeError("'NullObject' object is not subscriptable"),
    AttributeError("'NoneType' object has no attribute 'get_object'"),
    RecursionError("maximum recursion depth exceeded"),
    ZeroDivisionError("division by zero"),
    OverflowError("cannot convert float infinity to integer"),
    AssertionError(),
    NotImplementedError("unsupported filter"),
    struct.error("unpack requires a buffer of 4 bytes"),
    zlib.error("Error -3 while decompressing data"),
    UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
]


@pytest.mark.parametrize("failure", HOSTILE_FAILURES, ids=lambda failure: type(failure).__name__)
def test_anything_pypdf_raises_while_opening_is_damaged(monkeypatch, failure):
    def explode(*args, **kwargs):
        raise failure

    monkeypatch.setattr(extraction, "PdfReader", explode)
    with pytest.raises(ExtractionError) as info:
        extract_pages(build_pdf(["a"]), PDF)
    assert info.value.code == "PDF_DAMAGED"
    assert info.value.details["stage"] == "open"
    assert info.value.details["error"].startswith(type(failure).__name__)


@pytest.mark.parametrize("failure", HOSTILE_FAILURES, ids=lambda failure: type(failure).__name__)
def test_anything_pypdf_raises_on_every_page_is_damaged(monkeypatch, failure):
    monkeypatch.setattr(PageObject, "extract_text", failing_on("", failure))
    with pytest.raises(ExtractionError) as info:
        extract_pages(build_pdf(["a", "b"]), PDF)
    assert info.value.code == "PDF_DAMAGED"
    assert info.value.details["failed_pages"] == 2


def test_missing_aes_support_while_opening(monkeypatch):
    def needs_aes(*args, **kwargs):
        raise DependencyError("cryptography>=3.1 is required for AES algorithm")

    monkeypatch.setattr(extraction, "PdfReader", needs_aes)
    with pytest.raises(ExtractionError) as info:
        extract_pages(build_pdf(["a"]), PDF, password="secret")
    assert info.value.code == "PDF_ENCRYPTED"
    assert info.value.details["reason"] == "decryption_unavailable"
    assert "cryptography" in info.value.message


def test_missing_aes_support_while_extracting(monkeypatch):
    monkeypatch.setattr(PageObject, "extract_text", failing_on("", DependencyError("AES")))
    with pytest.raises(ExtractionError) as info:
        extract_pages(build_pdf(["a", "b"]), PDF)
    assert info.value.code == "PDF_ENCRYPTED"
    assert info.value.details["reason"] == "decryption_unavailable"


def test_not_a_pdf_declared_as_pdf_is_damaged(extractor):
    with pytest.raises(ExtractionError) as info:
        extract_pages(b"this is not a PDF at all", PDF, pdf_extractor=extractor)
    assert info.value.code == "PDF_DAMAGED"


def test_leading_junk_before_the_header_is_recovered(extractor):
    data = b"x" * 500 + read_pdf("minimal.pdf")
    assert sniff_content_type(data) == PDF
    pages = extract_pages(data, PDF, pdf_extractor=extractor)
    assert "Lorem ipsum" in pages[0].text


@pytest.mark.parametrize("name", pdf_params([
    "minimal.pdf", "four-pages.pdf", "encrypted-rc4.pdf",
    "sf-minimal-document.pdf", "sf-pdflatex-4-pages.pdf", "plumber-password-example.pdf",
]))
def test_corrupted_pdfs_end_in_pages_or_a_known_error_quickly(name, extractor):
    rng = random.Random(name)
    original = read_pdf(name)
    variants = [original[:rng.randrange(1, len(original))] for _ in range(8)]
    for _ in range(12):
        corrupted = bytearray(original)
        for _ in range(rng.randint(1, 40)):
            corrupted[rng.randrange(len(corrupted))] = rng.randrange(256)
        variants.append(bytes(corrupted))
    for data in variants:
        try:
            with finishes_within(30):
                pages = extract_pages(data, PDF, password=PASSWORDS.get(name), pdf_extractor=extractor)
        except ExtractionError as error:
            assert error.code in {"PDF_DAMAGED", "PDF_ENCRYPTED", "NO_TEXT_LAYER", "PDF_TOO_LARGE", "EMPTY_FILE"}
        else:
            assert all(isinstance(page, Page) and page.number for page in pages)


def test_pdfium_reads_pages_in_several_threads_at_once():
    """pdfium is not thread-safe; its calls take turns on a lock, so concurrent extractions
    (the pipeline's reader threads, several workers' threads) all get their own pages."""
    files = [build_pdf([f"document {n} page {p}" for p in range(1, 9)]) for n in range(6)]
    expected = [extract_pages(data, PDF, pdf_extractor="pdfium") for data in files]
    results: dict[int, list[Page]] = {}
    errors: list[BaseException] = []

    def read(n: int) -> None:
        try:
            for _ in range(5):
                results[n] = extract_pages(files[n], PDF, pdf_extractor="pdfium")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(n,)) for n in range(len(files))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    assert [results[n] for n in range(len(files))] == expected


def test_a_pdfium_reader_stopped_halfway_does_not_block_others():
    pages = iter_pages(build_pdf(["one", "two", "three"]), PDF, pdf_extractor="pdfium")
    assert next(pages) == Page("one", 1)
    with finishes_within(10):  # the lock is not held between pages
        assert extract_pages(read_pdf("minimal.pdf"), PDF, pdf_extractor="pdfium") == [Page(MINIMAL_TEXT, 1)]
    pages.close()  # closes the document


def test_pdfium_without_its_package_says_what_to_install(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pypdfium2", None)
    with pytest.raises(RuntimeError, match=r"pypdfium2 package is not installed.*\[pdfium\]"):
        extract_pages(read_pdf("minimal.pdf"), PDF, pdf_extractor="pdfium")


def test_an_unknown_pdf_extractor_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown PDF extractor"):
        extract_pages(read_pdf("minimal.pdf"), PDF, pdf_extractor="poppler")


def test_pypdf_warnings_are_silenced_and_the_logger_level_restored(caplog):
    pypdf_logger = logging.getLogger("pypdf")
    previous = pypdf_logger.level
    pypdf_logger.setLevel(logging.WARNING)
    try:
        with caplog.at_level(logging.WARNING):
            # A shifted header makes pypdf log several repair warnings.
            extract_pages(b"\n" * 10 + read_pdf("minimal.pdf"), PDF)
            with pytest.raises(ExtractionError):
                extract_pages(read_pdf("broken-page-tree.pdf"), PDF)
        assert not [record for record in caplog.records if record.name.startswith("pypdf")]
        assert pypdf_logger.level == logging.WARNING
    finally:
        pypdf_logger.setLevel(previous)


# --- text --------------------------------------------------------------------------


def test_utf8_text_is_one_unnumbered_page():
    assert extract_pages("héllo wörld ✓ 😀\n".encode(), "text/plain") == [Page("héllo wörld ✓ 😀\n", None)]


def test_markdown_is_text():
    assert extract_pages(b"# Title\n\nbody", "text/markdown") == [Page("# Title\n\nbody", None)]


def test_utf8_bom_is_removed():
    assert extract_pages(b"\xef\xbb\xbfhello", "text/plain") == [Page("hello", None)]


def test_content_type_parameters_and_case_are_ignored():
    assert extract_pages(b"hello", "Text/Plain; charset=ISO-8859-1") == [Page("hello", None)]


def test_latin1_text_falls_back():
    assert extract_pages("café\tnaïve\r\n".encode("latin-1"), "text/plain") == [Page("café\tnaïve\r\n", None)]


@pytest.mark.parametrize("data", [b"caf\xe9\x01", b"\xff\xfe\x00\x00", b"caf\xe9 \x85", b"\x1b[0m \xe9"])
def test_undecodable_text_is_an_error(data):
    with pytest.raises(ExtractionError) as info:
        extract_pages(data, "text/plain")
    assert info.value.code == "TEXT_DECODE_ERROR"


def test_nul_characters_are_stripped_from_text():
    assert extract_pages(b"a\x00b\x00c", "text/plain") == [Page("abc", None)]


@pytest.mark.parametrize("data", [b"   \n\t ", b"\xef\xbb\xbf", b"\x00\x00"])
def test_blank_text_is_empty(data):
    with pytest.raises(ExtractionError) as info:
        extract_pages(data, "text/plain")
    assert info.value.code == "EMPTY_FILE"


@corpus
def test_corpus_text_file_extracts():
    data = corpus_path("pdfs", "ocrmypdf-linn.txt").read_bytes()
    assert sniff_content_type(data, filename="ocrmypdf-linn.txt") == "text/plain"
    [page] = extract_pages(data, "text/plain")
    assert page.number is None
    assert page.text.startswith("The LinnSequencer")


@pytest.mark.parametrize("content_type", ["image/png", "text/html", "application/octet-stream", "", "application/zip"])
def test_other_types_are_unsupported(content_type):
    with pytest.raises(ExtractionError) as info:
        extract_pages(b"\x89PNG\r\n\x1a\n....", content_type)
    assert info.value.code == "UNSUPPORTED_CONTENT_TYPE"
    assert info.value.details == {"content_type": content_type}
    assert "ingestion rule" in info.value.message


@pytest.mark.parametrize("content_type", [PDF, "text/plain", "image/png"])
def test_empty_data_is_empty_for_any_type(content_type):
    with pytest.raises(ExtractionError) as info:
        extract_pages(b"", content_type)
    assert info.value.code == "EMPTY_FILE"


def test_extraction_error_shape():
    error = PDFDamaged("broken", details={"stage": "open"})
    assert error.as_dict() == {"code": "PDF_DAMAGED", "message": "broken", "details": {"stage": "open"}}
    assert str(error) == "broken"
    assert EmptyFile("empty").details == {}
    assert isinstance(error, ExtractionError)


# --- sniffing ------------------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def test_empty_data_cannot_be_sniffed():
    with pytest.raises(ExtractionError) as info:
        sniff_content_type(b"", filename="empty.pdf", declared=PDF)
    assert info.value.code == "EMPTY_FILE"


def test_pdf_declared_as_text_is_pdf():
    assert sniff_content_type(read_pdf("minimal.pdf"), filename="notes.txt", declared="text/plain") == PDF


def test_png_declared_as_pdf_is_png():
    assert sniff_content_type(PNG, filename="report.pdf", declared=PDF) == "image/png"


def test_pdf_header_must_be_within_the_first_kilobyte():
    assert sniff_content_type(b" " * 1019 + b"%PDF-1.7") == PDF
    assert sniff_content_type(b" " * 1020 + b"%PDF-1.7") == "text/plain"


@pytest.mark.parametrize(
    ("data", "filename", "expected"),
    [
        (PNG, None, "image/png"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", None, "image/jpeg"),
        (b"GIF89a\x01\x00\x01\x00\x80\x00", None, "image/gif"),
        (b"GIF87a\x01\x00\x01\x00\x80\x00", None, "image/gif"),
        (b"II*\x00\x08\x00\x00\x00", None, "image/tiff"),
        (b"MM\x00*\x00\x00\x00\x08", None, "image/tiff"),
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00", "notes.txt", "application/gzip"),
        (b"PK\x03\x04\x14\x00\x00\x00", "archive.zip", "application/zip"),
        (b"PK\x03\x04\x14\x00\x00\x00", None, "application/zip"),
        (b"PK\x05\x06" + b"\x00" * 18, None, "application/zip"),
        (b"PK\x03\x04\x14\x00\x00\x00", "Report.DOCX",
         "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        (b"PK\x03\x04\x14\x00\x00\x00", "sheet.xlsx",
         "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
        (b"PK\x03\x04\x14\x00\x00\x00", "deck.pptx",
         "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
        (b"<!DOCTYPE html><html><body>hi</body></html>", "page.txt", "text/html"),
        (b"\xef\xbb\xbf \n\t<HTML lang='en'>", None, "text/html"),
        (b"\x00\x01\x02\x03binary", None, "application/octet-stream"),
        (b"\xff\xfeh\x00i\x00", "utf16.txt", "application/octet-stream"),
        (b"\xc3\x28 invalid utf-8", None, "application/octet-stream"),
    ],
)
def test_magic_numbers(data, filename, expected):
    assert sniff_content_type(data, filename=filename) == expected


@pytest.mark.parametrize(
    ("filename", "declared", "expected"),
    [
        (None, None, "text/plain"),
        ("notes.txt", None, "text/plain"),
        ("README.md", None, "text/markdown"),
        ("guide.MARKDOWN", "application/octet-stream", "text/markdown"),
        ("upload", "text/markdown; charset=utf-8", "text/markdown"),
        ("notes.txt", "text/markdown", "text/markdown"),
        ("image.png", "image/png", "text/plain"),
        ("doc.pdf", PDF, "text/plain"),
    ],
)
def test_text_flavours(filename, declared, expected):
    assert sniff_content_type("# Heading\n\nsome *text* ✓".encode(), filename=filename, declared=declared) == expected


def test_text_with_a_bom_is_text():
    assert sniff_content_type(b"\xef\xbb\xbfhello", filename="a.md") == "text/markdown"


def test_text_with_nul_bytes_is_binary():
    assert sniff_content_type(b"hello\x00world", filename="a.txt", declared="text/plain") == "application/octet-stream"


def test_latin1_text_is_text_only_when_said_to_be_text():
    data = "café crème".encode("latin-1")
    assert sniff_content_type(data) == "application/octet-stream"
    assert sniff_content_type(data, filename="menu.txt") == "text/plain"
    assert sniff_content_type(data, declared="text/plain") == "text/plain"
    assert sniff_content_type(b"\xe9\x01\x02", declared="text/plain") == "application/octet-stream"


@pytest.mark.parametrize("name", pdf_params(sorted(EXPECTED)))
def test_every_pdf_sniffs_as_pdf(name):
    data = read_pdf(name)
    if not data:
        with pytest.raises(ExtractionError):
            sniff_content_type(data, filename=name)
        return
    assert sniff_content_type(data, filename=name, declared="text/plain") == PDF


@pytest.mark.parametrize(("text", "markdown"), [
    ("# Leave policy\n\nTwenty days.", True),
    ("Intro\n\n   ## Details\nmore", True),
    ("Run it:\n```bash\nmake run\n```", True),
    ("See [the handbook](https://example.com/hb).", True),
    ("![diagram](arch.png \"Architecture\")", True),
    ("| name | days |\n|---|:---:|\n| leave | 20 |", True),
    ("Plain prose. #hashtag and a list:\n- one\n- two", False),
    ("Signed below.\n---\nAda", False),
    ("Price [USD] (approx) is *about* 20.", False),
])
def test_markdown_is_recognised_by_its_markup(text: str, markdown: bool) -> None:
    assert extraction.looks_like_markdown(text) is markdown
