"""What an operator should do about each document failure code: shown by the documents
admin and the project overview (the error message itself has the specifics)."""

from __future__ import annotations

NEXT_STEPS = {
    "PDF_ENCRYPTED": "Re-ingest with the PDF's password (API: POST /documents/{id}/ingest {password}).",
    "PDF_DAMAGED": "Repair the file (print it to a new PDF) and upload it again, or add a converter rule.",
    "NO_TEXT_LAYER": "Add an ingestion rule for application/pdf with an OCR converter, then re-ingest.",
    "UNSUPPORTED_CONTENT_TYPE": "Add an ingestion rule with a converter for this content type, then re-ingest.",
    "EMPTY_FILE": "The file has no content; upload the right file.",
    "PDF_TOO_LARGE": "Split the PDF or raise MEMORY_ENGINE['MAX_PDF_PAGES'], then re-ingest.",
    "TEXT_DECODE_ERROR": "Re-save the file as UTF-8 and upload it again.",
    "CONVERTER_FAILED": "Check the converter (its URL or callable and its logs), then re-ingest.",
    "CONVERTER_TIMEOUT": "The converter was too slow or never called back; check it, then re-ingest.",
    "CONVERTER_BAD_RESPONSE": "The converter answered an unexpected shape; fix it, then re-ingest.",
    "CONVERTER_EMPTY": "The converter returned no text; check it, then re-ingest.",
    "CONVERTER_NOT_FOUND": "The rule names a callable that cannot be imported; fix the rule, then re-ingest.",
    "URL_NOT_ALLOWED": "The converter's host resolves to a private address; use a public URL or add the host to "
                       "MEMORY_ENGINE['OUTBOUND_ALLOW'], then re-ingest.",
    "INGESTION_STALLED": "Workers died on this file repeatedly; check the worker logs and memory, then re-ingest.",
    "INGESTION_ERROR": "An unexpected error; see the worker log, then re-ingest.",
    "FILE_MISSING": "The stored file is gone; upload the document again.",
    "NO_TEXT": "No text came out of the file; check it or its converter.",
    "TOO_MANY_CHUNKS": "Re-ingest with a larger chunk size, split the document, or raise "
                       "MEMORY_ENGINE['MAX_CHUNKS_PER_DOCUMENT'].",
    "CHUNK_TOO_LARGE": "Re-ingest with the recursive strategy, or raise MEMORY_ENGINE['MAX_CHUNK_CHARS'].",
}
