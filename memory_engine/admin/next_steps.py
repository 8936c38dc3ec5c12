"""What an operator should do about each document failure code: shown by the documents
admin and the project overview (the error message itself has the specifics)."""

from __future__ import annotations

from memory_engine.exceptions import (
    ChunkTooLarge,
    ConverterBadResponse,
    ConverterEmpty,
    ConverterFailed,
    ConverterNotFound,
    ConverterTimeout,
    EmptyFile,
    FileMissing,
    IngestionError,
    IngestionStalled,
    NoText,
    NoTextLayer,
    PDFDamaged,
    PDFEncrypted,
    PDFTooLarge,
    TextDecodeError,
    TooManyChunks,
    UnsupportedContentType,
    URLNotAllowed,
)

NEXT_STEPS = {
    PDFEncrypted.code: "Re-ingest with the PDF's password (API: POST /documents/{id}/ingest {password}).",
    PDFDamaged.code: "Repair the file (print it to a new PDF) and upload it again, or add a converter rule.",
    NoTextLayer.code: "Add an ingestion rule for application/pdf with an OCR converter, then re-ingest.",
    UnsupportedContentType.code: "Add an ingestion rule with a converter for this content type, then re-ingest.",
    EmptyFile.code: "The file has no content; upload the right file.",
    PDFTooLarge.code: "Split the PDF or raise MEMORY_ENGINE['MAX_PDF_PAGES'], then re-ingest.",
    TextDecodeError.code: "Re-save the file as UTF-8 and upload it again.",
    ConverterFailed.code: "Check the converter (its URL or callable and its logs), then re-ingest.",
    ConverterTimeout.code: "The converter was too slow or never called back; check it, then re-ingest.",
    ConverterBadResponse.code: "The converter answered an unexpected shape; fix it, then re-ingest.",
    ConverterEmpty.code: "The converter returned no text; check it, then re-ingest.",
    ConverterNotFound.code: "The rule names a callable that cannot be imported; fix the rule, then re-ingest.",
    URLNotAllowed.code: "The converter's host resolves to a private address; use a public URL or add the host to "
                          "MEMORY_ENGINE['OUTBOUND_ALLOW'], then re-ingest.",
    IngestionStalled.code: "Workers died on this file repeatedly; check the worker logs and memory, then re-ingest.",
    IngestionError.code: "An unexpected error; see the worker log, then re-ingest.",
    FileMissing.code: "The stored file is gone; upload the document again.",
    NoText.code: "No text came out of the file; check it or its converter.",
    TooManyChunks.code: "Re-ingest with a larger chunk size, split the document, or raise "
                         "MEMORY_ENGINE['MAX_CHUNKS_PER_DOCUMENT'].",
    ChunkTooLarge.code: "Re-ingest with the recursive strategy, or raise MEMORY_ENGINE['MAX_CHUNK_CHARS'].",
}
