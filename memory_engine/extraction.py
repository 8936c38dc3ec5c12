"""Native document extractors: decide what a file is, then turn it into pages.

No Django here: :func:`sniff_content_type` looks at the bytes (never trusting the
declared type for anything but the text flavour) and :func:`extract_pages` reads
PDFs with pypdf (the default) or pdfium (``pdf_extractor="pdfium"``, the optional
``pypdfium2`` package) and plain text / Markdown with the codecs module. Every failure a
user can cause — an empty file, a PDF that is encrypted, damaged, too large or
scanned without a text layer, undecodable text, an unsupported type — is raised
as :class:`ExtractionError` with a stable ``code`` and a message that says what
to do next. Anything else pypdf raises on a hostile file is turned into
``PDF_DAMAGED`` rather than crashing the worker.

pypdf's own resource limits (``pypdf.Configuration``: decompressed sizes, page
tree size and depth, content-stream parsing work) keep hostile files bounded;
``max_pages`` is checked before any text is extracted. A hard wall-clock limit
needs a process boundary and belongs to the task runner, not to this module.

pdfium is Chrome's PDF engine in C (pypdfium2's bindings): several times faster than
pypdf and it releases the GIL while it works. It opens and reads the files it can; a
file it refuses to open (damaged, encrypted without the right password, no pages) is
handed to the pypdf path, which gives the outcome, so both extractors end a failing file
in the same error code and details. pdfium is not thread-safe: every call into it holds
one module-level lock (never across a ``yield``), so the pipeline's reader thread and
other workers' threads take turns page by page.
"""

from __future__ import annotations

import io
import logging
import re
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError, LimitReachedError, PyPdfError

from memory_engine.chunking import Page, clean_text
from memory_engine.exceptions import (
    EmptyFile,
    ExtractionError,
    NoTextLayer,
    PDFDamaged,
    PDFEncrypted,
    PDFTooLarge,
    TextDecodeError,
    UnsupportedContentType,
)

__all__ = [
    "NATIVE_CONTENT_TYPES",
    "PDF_EXTRACTORS",
    "ExtractionError",
    "extract_pages",
    "iter_pages",
    "sniff_content_type",
]

logger = logging.getLogger(__name__)

PDF = "application/pdf"
TEXT_PLAIN = "text/plain"
TEXT_MARKDOWN = "text/markdown"
NATIVE_CONTENT_TYPES: frozenset[str] = frozenset({PDF, TEXT_PLAIN, TEXT_MARKDOWN})
PYPDF = "pypdf"
PDFIUM = "pdfium"
# The PDF text extractors, for the PDF_EXTRACTOR setting; pypdf is the default.
PDF_EXTRACTORS = (PYPDF, PDFIUM)

# What pypdf raises on malformed input besides its own errors: it parses untrusted
# structure with plain indexing, int() and struct/zlib calls, and walks object
# graphs that can be deep enough for RecursionError (a RuntimeError).
# MemoryError and KeyboardInterrupt are deliberately not in this list.
_PYPDF_FAILURES: tuple[type[BaseException], ...] = (
    PyPdfError,
    ValueError,  # includes UnicodeDecodeError, binascii.Error
    LookupError,  # KeyError, IndexError
    TypeError,
    AttributeError,
    ArithmeticError,  # ZeroDivisionError, OverflowError
    RuntimeError,  # RecursionError, NotImplementedError
    AssertionError,
    struct.error,
    zlib.error,
    EOFError,
    OSError,
)

_MARKDOWN_SUFFIXES = (".md", ".markdown")
# Markup that plain prose does not write: an ATX heading ("# Title"), a code fence, a link or
# image ("[text](target)"), a table's delimiter row ("|---|:--:|").
_MARKDOWN_MARKUP = re.compile(
    r"^ {0,3}#{1,6}[ \t]+\S"
    r"|^ {0,3}(?:```|~~~)"
    r"|!?\[[^\]\n]+\]\([^)\s]+(?:[ \t]+\"[^\"\n]*\")?\)"
    r"|^ {0,3}\|?[ \t]*:?-{3,}:?[ \t]*\|",
    re.MULTILINE,
)
_MARKDOWN_SNIFF_CHARS = 65536
_OOXML_TYPES = {
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}
# Checked in order after the PDF header; the first prefix that matches wins.
_MAGIC_NUMBERS: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"\x1f\x8b", "application/gzip"),
)
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
_SNIFF_WINDOW = 1024
_ALLOWED_CONTROLS = frozenset("\t\r\n")


def looks_like_markdown(text: str) -> bool:
    """Whether ``text`` (its first 64 KiB) uses Markdown markup: a heading, a code fence, a link
    or image, or a table. Lists and emphasis alone do not count: plain text writes them too."""
    return _MARKDOWN_MARKUP.search(text[:_MARKDOWN_SNIFF_CHARS]) is not None


def _empty_file() -> ExtractionError:
    return EmptyFile("The uploaded file is empty (0 bytes); upload the file again.")


def sniff_content_type(
    data: bytes,
    *,
    filename: str | None = None,
    declared: str | None = None,
) -> str:
    """Return the content type of ``data``, judged from its bytes.

    The declared type and the filename are only used to pick between text
    flavours (Markdown or plain) and to name a ZIP container that is an Office
    document; a PDF declared as ``text/plain`` is still a PDF. Text must be
    UTF-8 (a BOM is allowed) without NUL bytes; if the caller says it is text
    (``text/*`` declared or a ``.txt``/``.md`` name), Latin-1 without control
    characters is accepted as well, matching what :func:`extract_pages` decodes.
    """
    if not data:
        raise _empty_file()
    name = (filename or "").lower()
    declared_type = _base_type(declared)

    if b"%PDF-" in data[:_SNIFF_WINDOW]:
        return PDF
    for magic, content_type in _MAGIC_NUMBERS:
        if data.startswith(magic):
            return content_type
    if data.startswith(_ZIP_MAGIC):
        for suffix, content_type in _OOXML_TYPES.items():
            if name.endswith(suffix):
                return content_type
        return "application/zip"
    head = data[:_SNIFF_WINDOW].removeprefix(b"\xef\xbb\xbf").lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")):
        return "text/html"

    said_text = declared_type.startswith("text/") or name.endswith((".txt", *_MARKDOWN_SUFFIXES))
    if b"\x00" not in data and _decode_text(data, allow_latin1=said_text) is not None:
        if name.endswith(_MARKDOWN_SUFFIXES) or declared_type == TEXT_MARKDOWN:
            return TEXT_MARKDOWN
        return TEXT_PLAIN
    return "application/octet-stream"


def extract_pages(
    data: bytes,
    content_type: str,
    *,
    password: str | None = None,
    max_pages: int = 2000,
    pdf_extractor: str = PYPDF,
) -> list[Page]:
    """Extract the text of ``data`` as pages.

    PDF: one :class:`Page` per page, numbered from 1, including pages whose text
    is empty (so callers can tell how much of a document has text); a page whose
    extraction fails is left out, so a gap in the numbers marks it. The page
    count is checked against ``max_pages`` before any text is extracted.
    ``pdf_extractor`` picks the PDF library (:data:`PDF_EXTRACTORS`; "pdfium" needs
    the ``pypdfium2`` package).
    Text and Markdown: one page numbered None, decoded as UTF-8 (BOM removed) or,
    failing that, as Latin-1 when it has no control characters.
    Raises :class:`ExtractionError` for everything a file can do wrong.
    """
    return list(iter_pages(data, content_type, password=password, max_pages=max_pages,
                           pdf_extractor=pdf_extractor))


def iter_pages(
    data: bytes,
    content_type: str,
    *,
    password: str | None = None,
    max_pages: int = 2000,
    pdf_extractor: str = PYPDF,
) -> Iterator[Page]:
    """Like :func:`extract_pages`, but yields each PDF page as soon as its text is extracted.

    Errors that concern the whole file (empty, encrypted, damaged structure, too many
    pages) are raised before the first page; ``NO_TEXT_LAYER`` and "every page failed"
    (``PDF_DAMAGED``) are raised after the last page, once they are known. A caller
    may therefore start work on early pages while later ones are still being read.
    """
    if not data:
        raise _empty_file()
    content_type = _base_type(content_type)
    if content_type == PDF:
        if pdf_extractor == PDFIUM:
            yield from _iter_pdfium(data, password=password, max_pages=max_pages)
        elif pdf_extractor == PYPDF:
            yield from _iter_pdf(data, password=password, max_pages=max_pages)
        else:
            raise ValueError(f"unknown PDF extractor {pdf_extractor!r}; one of {', '.join(PDF_EXTRACTORS)}")
        return
    if content_type in (TEXT_PLAIN, TEXT_MARKDOWN):
        text = _decode_text(data, allow_latin1=True)
        if text is None:
            raise TextDecodeError(
                "The file is neither UTF-8 nor plain Latin-1 text; re-save it as UTF-8 and upload it again.",
                details={"content_type": content_type},
            )
        text = clean_text(text)
        if not text.strip():
            raise EmptyFile(
                "The file contains only whitespace; there is no text to index.",
                details={"content_type": content_type, "bytes": len(data)},
            )
        yield Page(text=text, number=None)
        return
    raise UnsupportedContentType(
        f"There is no built-in extractor for {content_type or 'this file'}; "
        f"add an ingestion rule with a converter for {content_type or 'its content type'}.",
        details={"content_type": content_type},
    )


def _base_type(content_type: str | None) -> str:
    """``'Text/Plain; charset=utf-8'`` -> ``'text/plain'``."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def _decode_text(data: bytes, *, allow_latin1: bool) -> str | None:
    """UTF-8 (BOM stripped), else Latin-1 when allowed and free of control characters."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    if not allow_latin1:
        return None
    text = data.decode("latin-1")
    # Latin-1 decodes any byte string, so only text-looking bytes are accepted:
    # no C0 or C1 control characters except tab and line breaks.
    if any((ch < " " or "\x7f" <= ch <= "\x9f") and ch not in _ALLOWED_CONTROLS for ch in text):
        return None
    return text


_quiet_lock = threading.Lock()
_quiet_depth = 0
_quiet_saved_level = logging.NOTSET


@contextmanager
def _quiet_pypdf() -> Iterator[None]:
    """Raise the ``pypdf`` logger to ERROR while extracting, then restore it.

    pypdf logs a warning for every irregularity it repairs, which floods worker
    logs on real-world files. A depth counter keeps concurrent extractions in
    several threads from restoring the level while another one still runs.
    """
    global _quiet_depth, _quiet_saved_level
    pypdf_logger = logging.getLogger("pypdf")
    with _quiet_lock:
        if _quiet_depth == 0:
            _quiet_saved_level = pypdf_logger.level
            pypdf_logger.setLevel(logging.ERROR)
        _quiet_depth += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth -= 1
            if _quiet_depth == 0:
                pypdf_logger.setLevel(_quiet_saved_level)


def _damaged(exc: BaseException, *, stage: str, **details: Any) -> ExtractionError:
    return PDFDamaged(
        "The PDF is damaged and could not be read; repair it (for example by printing it to a "
        "new PDF) and upload it again, or add an ingestion rule with a converter for application/pdf.",
        details={"stage": stage, "error": f"{type(exc).__name__}: {exc}"[:500], **details},
    )


def _crypto_missing(exc: DependencyError) -> ExtractionError:
    # Not the user's fault and not fixable by a password: the server lacks the
    # AES implementation pypdf needs (the `cryptography` package).
    return PDFEncrypted(
        "The PDF is AES-encrypted and this server cannot decrypt AES (the `cryptography` package "
        "is not installed); ask the operator to install it, or upload an unencrypted copy.",
        details={"reason": "decryption_unavailable", "error": str(exc)},
    )


def _iter_pdf(data: bytes, *, password: str | None, max_pages: int) -> Iterator[Page]:
    with _quiet_pypdf():
        try:
            reader = PdfReader(io.BytesIO(data), strict=False)
        except DependencyError as exc:
            raise _crypto_missing(exc) from exc
        except _PYPDF_FAILURES as exc:
            raise _damaged(exc, stage="open") from exc

        if reader.is_encrypted:
            _decrypt(reader, password)

        try:
            page_count = len(reader.pages)
        except DependencyError as exc:
            raise _crypto_missing(exc) from exc
        except LimitReachedError as exc:
            raise _too_large(max_pages=max_pages, error=str(exc)) from exc
        except _PYPDF_FAILURES as exc:
            raise _damaged(exc, stage="page_tree") from exc
        if not isinstance(page_count, int) or page_count < 0:
            raise _damaged(TypeError(f"page count is {page_count!r}"), stage="page_tree")
        _check_page_count(page_count, max_pages=max_pages)

        def read(index: int) -> str | None:
            try:
                text: str | None = reader.pages[index].extract_text()
            except DependencyError as exc:
                raise _crypto_missing(exc) from exc
            return text

        yield from _read_pages(page_count, read, failed=_PYPDF_FAILURES)


def _read_pages(page_count: int, read: Callable[[int], str | None], *,
                failed: tuple[type[BaseException], ...]) -> Iterator[Page]:
    """Pages ``0 .. page_count - 1`` through ``read``, numbered from 1; a page whose read raises
    one of ``failed`` is left out (logged at the end); then the whole-file outcomes."""
    extracted = 0
    with_text = 0
    failures: list[tuple[int, BaseException]] = []
    for index in range(page_count):
        try:
            text = read(index)
        except failed as exc:
            failures.append((index + 1, exc))
            continue
        page = Page(text=clean_text(text or ""), number=index + 1)
        extracted += 1
        with_text += bool(page.text.strip())
        yield page
    _after_last_page(page_count=page_count, extracted=extracted, with_text=with_text, failures=failures)


def _check_page_count(page_count: int, *, max_pages: int) -> None:
    if page_count > max_pages:
        raise _too_large(max_pages=max_pages, pages=page_count)
    if page_count == 0:
        raise EmptyFile("The PDF has no pages; there is nothing to index.", details={"pages": 0})


def _after_last_page(*, page_count: int, extracted: int, with_text: int,
                     failures: list[tuple[int, BaseException]]) -> None:
    """The whole-file outcomes known only once every page was tried: all failed, or no text."""
    if failures:
        logger.warning(
            "PDF text extraction failed on %d of %d pages (first: page %d, %s: %.200s)",
            len(failures), page_count, failures[0][0], type(failures[0][1]).__name__, failures[0][1],
        )
    if not extracted:
        raise _damaged(failures[0][1], stage="extract_text", pages=page_count, failed_pages=len(failures))
    if not with_text:
        raise NoTextLayer(
            "The PDF has no text layer (it is probably a scan); add an ingestion rule with an "
            "OCR converter for application/pdf and ingest it again.",
            details={"pages": page_count, "failed_pages": len(failures)},
        )


# pdfium keeps global state and is not thread-safe (pypdfium2's documentation: serialize
# every call). Held around each call into it, never across a yield, so a consumer that is
# slow, or stops reading, cannot block other extractions.
_PDFIUM_LOCK = threading.Lock()


def _pdfium() -> Any:
    try:
        import pypdfium2
    except ImportError as exc:
        raise RuntimeError(
            "PDF_EXTRACTOR is 'pdfium' but the pypdfium2 package is not installed; install "
            "django-memory-engine[pdfium] or set PDF_EXTRACTOR to 'pypdf'."
        ) from exc
    return pypdfium2


def _pdfium_page_text(document: Any, index: int) -> str:
    """Page ``index``'s text as pypdf writes it: pdfium's ``\r\n`` line breaks as ``\n``, and
    its U+FFFE (a noncharacter it puts for a hyphen that breaks a word at the end of a line,
    joining the two lines) as the hyphen and the line break the page shows."""
    page = document[index]
    try:
        textpage = page.get_textpage()
        try:
            text: str = textpage.get_text_range()
        finally:
            textpage.close()
    finally:
        page.close()
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\ufffe", "-\n")


def _iter_pdfium(data: bytes, *, password: str | None, max_pages: int) -> Iterator[Page]:
    pdfium = _pdfium()
    with _PDFIUM_LOCK:
        try:
            document = pdfium.PdfDocument(data, password=password or None)
        except pdfium.PdfiumError:
            document = None
    if document is None:
        # Damaged, encrypted without the right password, no pages, or something pypdf
        # repairs: pypdf reads it or names the error, so the codes are the pypdf path's.
        yield from _iter_pdf(data, password=password, max_pages=max_pages)
        return

    try:
        with _PDFIUM_LOCK:
            page_count = len(document)
        _check_page_count(page_count, max_pages=max_pages)

        def read(index: int) -> str:
            with _PDFIUM_LOCK:
                return _pdfium_page_text(document, index)

        yield from _read_pages(page_count, read, failed=(pdfium.PdfiumError,))
    finally:
        with _PDFIUM_LOCK:
            document.close()


def _decrypt(reader: PdfReader, password: str | None) -> None:
    # An empty user password is common (owner-only restrictions): such files
    # open without asking anybody for a password. A blank form field is no password.
    try:
        result = reader.decrypt(password or "")
    except DependencyError as exc:
        raise _crypto_missing(exc) from exc
    except _PYPDF_FAILURES as exc:
        raise _damaged(exc, stage="decrypt") from exc
    if result != PasswordType.NOT_DECRYPTED:
        return
    if not password:
        raise PDFEncrypted(
            "The PDF is password-protected; upload it again with the `password` field set.",
            details={"reason": "password_required"},
        )
    raise PDFEncrypted(
        "The password does not open this PDF; upload it again with the correct `password` field.",
        details={"reason": "wrong_password"},
    )


def _too_large(*, max_pages: int, pages: int | None = None, error: str | None = None) -> ExtractionError:
    details: dict[str, Any] = {"max_pages": max_pages}
    if pages is not None:
        details["pages"] = pages
        message = f"The PDF has {pages} pages, more than the limit of {max_pages}"
    else:
        # pypdf refused to walk the page tree (too many entries or too deep).
        details["error"] = error
        message = "The PDF's page tree exceeds the processing limits"
    return PDFTooLarge(f"{message}; split it into smaller files and upload them separately.", details=details)
