"""PDF text extraction: pypdf against pdfium on every PDF of the shared corpus.

For each ``pdfs/*.pdf`` of the data directory, both extractors of
``memory_engine.extraction`` (the PDF_EXTRACTOR setting) run ``extract_pages`` on the
same bytes, interleaved ``--repeats`` times (median time), with the file's password
when it has one. Per file: the outcome of each (pages, or the error code), whether
pdfium opened the file itself (a file pdfium refuses goes to the pypdf path, which
names the error), the median time of each and the speed-up, and how far the texts
agree:

* words:   word-set overlap (Jaccard of the lower-cased ``\\w+`` tokens of the file);
* recall:  the share of pypdf's words (with repeats) that pdfium's text also has;
* chars:   pdfium's non-whitespace characters over pypdf's.

Encrypted files are also run without a password and with a wrong one: both extractors
must fail alike (``PDF_ENCRYPTED`` and the same reason). No database.

    python bench/pdf_extract.py [--data DIR] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import ROOT, parse_args, print_table, write_results  # noqa: E402

sys.path.insert(0, str(ROOT))

# The corpus's encrypted files and their passwords (as in tests/test_extraction.py).
PASSWORDS = {
    "sf-libreoffice-writer-password.pdf": "openpassword",
    "pypdf-crazyones-encrypted-256.pdf": "password",
    "pypdf-r4-aes-user-password.pdf": "asdfzxcv",
    "plumber-password-example.pdf": "test",
}
EXTRACTORS = ("pypdf", "pdfium")
WORD = re.compile(r"\w+")


def run(data: bytes, extractor: str, password: str | None) -> tuple[str, str, float]:
    """(outcome, text, seconds): outcome is "N pages" or the error code (with its reason)."""
    from memory_engine.extraction import ExtractionError, extract_pages

    started = time.perf_counter()
    try:
        pages = extract_pages(data, "application/pdf", password=password, pdf_extractor=extractor)
    except ExtractionError as error:
        reason = error.details.get("reason") or error.details.get("stage")
        return (f"{error.code} ({reason})" if reason else error.code), "", time.perf_counter() - started
    return f"{len(pages)} pages", "\n".join(page.text for page in pages), time.perf_counter() - started


def pdfium_opens(data: bytes, password: str | None) -> bool:
    import pypdfium2

    try:
        pypdfium2.PdfDocument(data, password=password).close()
    except pypdfium2.PdfiumError:
        return False
    return True


def agreement(reference: str, other: str) -> dict[str, float | None]:
    words_a = Counter(WORD.findall(reference.lower()))
    words_b = Counter(WORD.findall(other.lower()))
    if not words_a and not words_b:
        return {"words": None, "recall": None, "chars": None}
    union = len(words_a.keys() | words_b.keys())
    chars_a = sum(not ch.isspace() for ch in reference)
    return {
        "words": round(len(words_a.keys() & words_b.keys()) / union, 4) if union else None,
        "recall": round(sum((words_a & words_b).values()) / sum(words_a.values()), 4) if words_a else None,
        "chars": round(sum(not ch.isspace() for ch in other) / chars_a, 4) if chars_a else None,
    }


def measure(path: Path, repeats: int) -> dict[str, Any]:
    data = path.read_bytes()
    password = PASSWORDS.get(path.name)
    seconds: dict[str, list[float]] = {name: [] for name in EXTRACTORS}
    outcome: dict[str, str] = {}
    text: dict[str, str] = {}
    for _ in range(repeats):  # interleaved, so both see the same machine load
        for name in EXTRACTORS:
            outcome[name], text[name], elapsed = run(data, name, password)
            seconds[name].append(elapsed)
    row: dict[str, Any] = {
        "file": path.name, "bytes": len(data), "password": password is not None,
        "pdfium_opens": pdfium_opens(data, password) if data else False,
        **{f"{name}_outcome": outcome[name] for name in EXTRACTORS},
        **{f"{name}_s": round(statistics.median(seconds[name]), 4) for name in EXTRACTORS},
        "same_outcome": outcome["pypdf"] == outcome["pdfium"],
        **agreement(text["pypdf"], text["pdfium"]),
    }
    if password is not None:  # the refusals must match too
        refusals = {name: (run(data, name, None)[0], run(data, name, "wrong")[0]) for name in EXTRACTORS}
        row["refusals"] = refusals["pypdf"]
        row["same_outcome"] = row["same_outcome"] and refusals["pypdf"] == refusals["pdfium"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs per file and extractor (median)")
    args = parse_args(parser)
    import pypdf
    import pypdfium2

    files = sorted((args.data / "pdfs").glob("*.pdf"))
    rows = [measure(path, args.repeats) for path in files]

    def pct(value: float | None) -> str:
        return "–" if value is None else f"{value:.1%}"

    print(f"\npypdf {pypdf.__version__}, pypdfium2 {pypdfium2.version.PYPDFIUM_INFO} "
          f"(pdfium {pypdfium2.version.PDFIUM_INFO}); median of {args.repeats} interleaved runs\n")
    print_table(
        ["file", "pypdf", "pdfium", "pdfium opens", "pypdf ms", "pdfium ms", "speed-up", "words", "recall",
         "chars"],
        [[r["file"], r["pypdf_outcome"], r["pdfium_outcome"] if not r["same_outcome"] else "same",
          "yes" if r["pdfium_opens"] else "no", f"{r['pypdf_s'] * 1000:.1f}", f"{r['pdfium_s'] * 1000:.1f}",
          f"{r['pypdf_s'] / r['pdfium_s']:.1f}x" if r["pdfium_s"] else "–",
          pct(r["words"]), pct(r["recall"]), pct(r["chars"])] for r in rows],
    )
    with_text = [r for r in rows if r["words"] is not None]
    total = {name: sum(r[f"{name}_s"] for r in rows) for name in EXTRACTORS}
    summary = {
        "files": len(rows),
        "same_outcome": sum(r["same_outcome"] for r in rows),
        "pdfium_opens": sum(r["pdfium_opens"] for r in rows),
        "total_s": {name: round(value, 3) for name, value in total.items()},
        "speed_up_total": round(total["pypdf"] / total["pdfium"], 2) if total["pdfium"] else None,
        "files_with_text": len(with_text),
        "median_words": statistics.median(r["words"] for r in with_text) if with_text else None,
        "min_words": min((r["words"] for r in with_text), default=None),
        "median_recall": statistics.median(r["recall"] for r in with_text) if with_text else None,
        "min_recall": min((r["recall"] for r in with_text), default=None),
    }
    print(f"\n{summary['same_outcome']}/{len(rows)} files end alike (outcome, page count, refusals); pdfium "
          f"opens {summary['pdfium_opens']} itself; all files: pypdf {total['pypdf']:.2f} s, pdfium "
          f"{total['pdfium']:.2f} s ({summary['speed_up_total']}x); files with text: word overlap median "
          f"{pct(summary['median_words'])} (min {pct(summary['min_words'])}), recall of pypdf's words median "
          f"{pct(summary['median_recall'])} (min {pct(summary['min_recall'])})")
    write_results("pdf_extract", {"pypdf": pypdf.__version__, "pypdfium2": str(pypdfium2.version.PYPDFIUM_INFO),
                                  "pdfium": str(pypdfium2.version.PDFIUM_INFO), "repeats": args.repeats,
                                  "load_average": os.getloadavg(), "summary": summary, "rows": rows})


if __name__ == "__main__":
    main()
