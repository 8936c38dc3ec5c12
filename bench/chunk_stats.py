"""How each chunk strategy cuts the long shared PDFs, in the default embedder's tokens.

    .venv/bin/python bench/chunk_stats.py --data ../shared/data

The shared PDFs come with no queries or relevance judgments, so this measures what the
embedder can see rather than retrieval quality: chunks, the largest and mean chunk in
tokens, and the share of tokens past the model's window (254 + [CLS]/[SEP]), which the
vector never represents. "page (before)" is one chunk per page, the old `page` strategy.
No database needed. Data: ``--data DIR`` (see bench/_setup.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from _setup import parse_args  # noqa: E402

FILES = ["plumber-WARN-Report-2015-2016.pdf", "pypdf-GeoBase_NHNC1_Data_Model_UML_EN.pdf",
         "plumber-nics-background-checks-2015-11.pdf", "pypdf-Seige_of_Vicksburg_Sample_OCR.pdf",
         "sf-pdflatex-4-pages.pdf"]
STRATEGIES = [("whole", 1000, 200), ("page (before)", 0, 0), ("size", 1000, 200), ("page", 200, 40),
              ("recursive", 200, 40)]

sys.path.insert(0, str(ROOT))


def main() -> None:
    data = parse_args(argparse.ArgumentParser(description=__doc__.splitlines()[0])).data
    from memory_engine.chunking import chunk_pages
    from memory_engine.extraction import extract_pages
    from memory_engine.providers.embeddings.onnx import OnnxEmbeddingProvider

    provider = OnnxEmbeddingProvider(dimensions=384)
    window = provider.max_tokens - 2
    print("| file | pages | strategy | chunks | max tokens | mean tokens | tokens past the window |")
    print("|---|---|---|---|---|---|---|")
    for name in FILES:
        pages = extract_pages((data / "pdfs" / name).read_bytes(), "application/pdf")
        for strategy, size, overlap in STRATEGIES:
            if strategy == "page (before)":
                texts = [page.text for page in pages if page.text.strip()]
            else:
                texts = [chunk.text for chunk in chunk_pages(pages, strategy=strategy, chunk_size=size,
                                                             chunk_overlap=overlap, count_tokens=provider.count_tokens)]
            tokens = provider.count_tokens(texts)
            past = sum(max(0, count - window) for count in tokens) / sum(tokens)
            print(f"| {name} | {len(pages)} | {strategy} | {len(texts)} | {max(tokens)} | "
                  f"{sum(tokens) / len(tokens):.0f} | {past:.0%} |")


if __name__ == "__main__":
    main()
