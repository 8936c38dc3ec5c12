"""memory_engine.chunking: pages -> chunks, a pure function."""

from __future__ import annotations

import dataclasses
import random

import pytest

from memory_engine.chunking import (
    CHUNK_STRATEGIES,
    ChunkingError,
    ChunkSpec,
    Page,
    _size_spans,
    chunk_pages,
    clean_text,
    estimate_tokens,
    iter_chunks,
)
from memory_engine.exceptions import ChunkSettingsInvalid


def texts(chunks: list[ChunkSpec]) -> list[str]:
    return [chunk.text for chunk in chunks]


def assert_contiguous(chunks: list[ChunkSpec]) -> None:
    assert [chunk.chunk_index for chunk in chunks] == list(range(len(chunks)))


def word_at(text: str, index: int) -> str:
    """The whitespace-delimited word of ``text`` that holds position ``index``."""
    start, end = index, index
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    while end < len(text) and not text[end].isspace():
        end += 1
    return text[start:end]


def size_chunks(text: str, size: int, overlap: int) -> list[ChunkSpec]:
    return chunk_pages([Page(text, None)], strategy="size", chunk_size=size, chunk_overlap=overlap)


# --- settings ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunk_size", "chunk_overlap"),
    [(0, 0), (-5, 0), (10, -1), (10, 10), (10, 11), (1, 1), (True, 0), (10.0, 2), (10, 2.0), ("10", 2)],
)
def test_invalid_sizes_are_rejected(chunk_size, chunk_overlap):
    with pytest.raises(ChunkingError) as info:
        chunk_pages([Page("text", 1)], strategy="size", chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    assert info.value.code == "CHUNK_SETTINGS_INVALID"
    assert info.value.details == {"strategy": "size", "chunk_size": chunk_size, "chunk_overlap": chunk_overlap}


@pytest.mark.parametrize("strategy", ["", "pages", "Page", "sentence", None])
def test_unknown_strategy_is_rejected(strategy):
    with pytest.raises(ChunkingError) as info:
        chunk_pages([Page("text", 1)], strategy=strategy)
    assert info.value.code == "CHUNK_SETTINGS_INVALID"
    assert "page, whole, size" in info.value.message


def test_chunking_error_is_a_value_error_with_a_code():
    error = ChunkSettingsInvalid("bad")
    assert isinstance(error, ChunkingError)
    assert isinstance(error, ValueError)
    assert error.as_dict() == {"code": "CHUNK_SETTINGS_INVALID", "message": "bad", "details": {}}


@pytest.mark.parametrize("strategy", ["page", "whole"])
def test_settings_are_validated_for_every_strategy(strategy):
    with pytest.raises(ChunkingError):
        chunk_pages([Page("text", 1)], strategy=strategy, chunk_size=100, chunk_overlap=100)


def test_smallest_valid_settings():
    assert texts(size_chunks("abc", 1, 0)) == ["a", "b", "c"]


# --- nothing to chunk ---------------------------------------------------------------


@pytest.mark.parametrize("strategy", CHUNK_STRATEGIES)
@pytest.mark.parametrize(
    "pages",
    [[], [Page("", 1)], [Page(" \n\t ", 1), Page("\x00\x00", 2)], [Page("\u3000\u00a0", None)]],
)
def test_no_text_gives_no_chunks(strategy, pages):
    assert chunk_pages(pages, strategy=strategy) == []


# --- page -------------------------------------------------------------------------


def test_page_strategy_keeps_page_numbers_and_drops_blank_pages():
    pages = [Page("one", 1), Page("  \n ", 2), Page("three\n", 3), Page("", 4), Page("five", 5)]
    chunks = chunk_pages(pages, strategy="page")
    assert chunks == [
        ChunkSpec(text="one", chunk_index=0, page=1),
        ChunkSpec(text="three", chunk_index=1, page=3),
        ChunkSpec(text="five", chunk_index=2, page=5),
    ]


def test_page_strategy_keeps_a_page_that_fits_whole():
    page = "word " * 40  # 40 estimated tokens
    chunks = chunk_pages([Page(page, 7)], strategy="page", chunk_size=40, chunk_overlap=5)
    assert chunks == [ChunkSpec(page.strip(), 0, 7)]


def test_page_strategy_cuts_a_page_longer_than_the_size_and_keeps_its_number():
    page = " ".join(f"w{i:03d}" for i in range(300))  # 300 words of one estimated token each
    chunks = chunk_pages([Page("short page", 1), Page(page, 2), Page("last", 3)], strategy="page",
                         chunk_size=50, chunk_overlap=10)
    assert chunks[0] == ChunkSpec("short page", 0, 1) and chunks[-1].text == "last"
    middle = chunks[1:-1]
    assert len(middle) > 6 and {chunk.page for chunk in middle} == {2}
    assert all(len(chunk.text.split()) <= 50 for chunk in middle)
    assert_contiguous(chunks)


def test_page_strategy_on_text_without_pages():
    assert chunk_pages([Page("plain text", None)], strategy="page") == [
        ChunkSpec(text="plain text", chunk_index=0, page=None)
    ]


# --- whole ------------------------------------------------------------------------


def test_whole_joins_pages_with_a_blank_line():
    pages = [Page("first", 1), Page("second", 2), Page(" ", 3), Page("fourth", 4)]
    assert chunk_pages(pages, strategy="whole") == [
        ChunkSpec(text="first\n\nsecond\n\nfourth", chunk_index=0, page=None)
    ]


def test_whole_keeps_the_page_of_a_single_page():
    assert chunk_pages([Page("only", 1)], strategy="whole") == [ChunkSpec("only", 0, 1)]
    # A scan where only page 4 has text: everything in the chunk is from page 4.
    pages = [Page("", 1), Page("\n", 2), Page("", 3), Page("chart", 4)]
    assert chunk_pages(pages, strategy="whole") == [ChunkSpec("chart", 0, 4)]


def test_whole_on_text_without_pages():
    assert chunk_pages([Page("some text", None)], strategy="whole") == [ChunkSpec("some text", 0, None)]


# --- size: windows, step and overlap ------------------------------------------------


def test_size_windows_step_by_size_minus_overlap():
    chunks = size_chunks("abcdefghij", 4, 1)
    assert texts(chunks) == ["abcd", "defg", "ghij"]
    assert_contiguous(chunks)


def test_size_last_window_may_be_shorter():
    assert texts(size_chunks("abcdefghijk", 4, 1)) == ["abcd", "defg", "ghij", "jk"]


def test_size_text_shorter_than_or_equal_to_one_window():
    assert texts(size_chunks("abc", 10, 3)) == ["abc"]
    assert texts(size_chunks("abcdefghij", 10, 3)) == ["abcdefghij"]


def test_size_without_overlap_partitions_the_text():
    text = "".join(chr(ord("a") + i % 26) for i in range(103))
    chunks = size_chunks(text, 10, 0)
    assert "".join(texts(chunks)) == text
    assert [len(chunk.text) for chunk in chunks] == [10] * 10 + [3]


def test_size_never_emits_a_window_inside_the_previous_one():
    # step 1: after "ghij" reaches the end, "hij", "ij" and "j" would all be inside it.
    chunks = size_chunks("abcdefghij", 4, 3)
    assert texts(chunks) == ["abcd", "bcde", "cdef", "defg", "efgh", "fghi", "ghij"]


def test_size_defaults_are_1000_and_200():
    text = "".join(chr(ord("a") + i % 26) for i in range(2500))
    chunks = chunk_pages([Page(text, None)], strategy="size")
    assert [len(chunk.text) for chunk in chunks] == [1000, 1000, 900]
    assert chunks[1].text == text[800:1800]
    assert chunks[2].text == text[1600:]


@pytest.mark.parametrize(("size", "overlap"), [(1000, 200), (7, 3), (50, 0), (64, 63), (2, 1), (30, 10)])
def test_size_windows_start_and_end_between_words_and_cover_the_text(size, overlap):
    rng = random.Random(size * 1000 + overlap)
    words = ["".join(rng.choice("abcdefghij.") for _ in range(rng.randint(1, 9))) for _ in range(600)]
    text = "".join(word + rng.choice([" ", "\n", "  ", " \n\n"]) for word in words)
    spans = list(_size_spans(text, chunk_size=size, chunk_overlap=overlap))
    assert texts(size_chunks(text, size, overlap)) == [text[start:end] for start, end in spans]
    covered = [False] * len(text)
    for start, end in spans:
        window = text[start:end]
        assert 0 < len(window) <= size and window == window.strip()
        # A word that fits in the window is never cut: both ends touch whitespace.
        assert start == 0 or text[start - 1].isspace() or len(word_at(text, start)) > size
        assert end == len(text) or text[end].isspace() or len(word_at(text, end - 1)) > size
        covered[start:end] = [True] * (end - start)
    assert all(covered[i] for i, char in enumerate(text) if not char.isspace())
    for (previous_start, previous_end), (following_start, following_end) in zip(spans, spans[1:], strict=False):
        assert previous_start < following_start
        assert previous_end - following_start <= overlap  # shared characters
        assert following_end > previous_end  # every window adds text


def test_size_never_cuts_a_word_that_fits():
    text = "The budget ticket latency review is due for the new team backup plan on Monday."
    chunks = size_chunks(text, 20, 5)
    words = set(text.split())
    for chunk in chunks:
        assert set(chunk.text.split()) <= words, chunk.text
    # "ticket" is longer than the overlap: the next window starts with the next whole word.
    assert texts(chunks)[:2] == ["The budget ticket", "latency review is"]


def test_size_skips_whitespace_only_windows_and_keeps_indices_contiguous():
    text = "aaaa" + " " * 12 + "\n\n\t\t" + "bbbb"
    chunks = size_chunks(text, 4, 0)
    assert chunks == [ChunkSpec("aaaa", 0, None), ChunkSpec("bbbb", 1, None)]


def test_size_is_deterministic():
    pages = [Page("lorem ipsum " * 300, 1), Page("dolor sit amet " * 200, 2)]
    assert chunk_pages(pages, strategy="size") == chunk_pages(pages, strategy="size")


def test_chunk_specs_are_immutable():
    chunk = chunk_pages([Page("text", 1)], strategy="page")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        chunk.text = "other"  # type: ignore[misc]


# --- size: page attribution -----------------------------------------------------------


def test_size_page_is_where_the_chunk_starts():
    pages = [Page("a" * 10, 1), Page("b" * 10, 2)]  # joined: a*10, "\n\n", b*10
    chunks = chunk_pages(pages, strategy="size", chunk_size=8, chunk_overlap=2)
    # Words longer than the window are cut inside; a window never ends inside "bbbb...".
    assert chunks == [
        ChunkSpec("a" * 8, 0, 1),
        ChunkSpec("aaaa", 1, 1),
        ChunkSpec("b" * 8, 2, 2),
        ChunkSpec("bbbb", 3, 2),
    ]


def test_size_window_starting_in_the_page_separator_belongs_to_the_next_page():
    pages = [Page("a" * 10, 1), Page("b" * 10, 2)]
    chunks = chunk_pages(pages, strategy="size", chunk_size=5, chunk_overlap=0)
    assert [(chunk.text, chunk.page) for chunk in chunks] == [
        ("aaaaa", 1), ("aaaaa", 1), ("bbbbb", 2), ("bbbbb", 2),
    ]


def test_size_page_attribution_skips_blank_pages_and_keeps_real_numbers():
    pages = [Page("x" * 6, 3), Page("   ", 4), Page("", 5), Page("y" * 6, 7), Page("z" * 6, 8)]
    chunks = chunk_pages(pages, strategy="size", chunk_size=4, chunk_overlap=0)
    joined = "x" * 6 + "\n\n" + "y" * 6 + "\n\n" + "z" * 6
    assert "".join(texts(chunks)) == joined.replace("\n", "")
    assert [(chunk.text, chunk.page) for chunk in chunks] == [
        ("xxxx", 3), ("xx", 3), ("yyyy", 7), ("yy", 7), ("zzzz", 8), ("zz", 8),
    ]


def test_size_page_attribution_over_many_pages():
    pages = [Page(f"page {number} " + "w" * 97, number) for number in range(1, 21)]
    chunks = chunk_pages(pages, strategy="size", chunk_size=50, chunk_overlap=10)
    joined = "\n\n".join(page.text for page in pages)
    starts = []
    offset = 0
    for page in pages:
        starts.append(offset)
        offset += len(page.text) + 2
    position = 0
    for chunk in chunks:
        first = joined.index(chunk.text, position)
        position = first + 1
        expected = max(number for number, start in enumerate(starts, 1) if start <= first)
        assert chunk.page == expected
    assert {chunk.page for chunk in chunks} == set(range(1, 21))


# --- unicode ------------------------------------------------------------------------


def test_windows_count_code_points_for_emoji():
    text = "😀🎉🚀🌍🔥" * 4  # 20 astral characters
    chunks = size_chunks(text, 4, 1)
    assert all(len(chunk.text) == 4 for chunk in chunks[:-1])
    assert chunks[0].text == "😀🎉🚀🌍"
    assert chunks[1].text == "🌍🔥😀🎉"
    for chunk in chunks:
        chunk.text.encode("utf-8")  # every chunk is valid UTF-8


def test_windows_count_code_points_for_cjk():
    text = "日本語のテキストを分割する"
    chunks = size_chunks(text, 5, 2)
    assert texts(chunks) == ["日本語のテ", "のテキスト", "ストを分割", "分割する"]


def test_combining_marks_count_as_their_own_code_points():
    text = "e\u0301" * 5  # five "é" written as e + COMBINING ACUTE ACCENT
    assert len(text) == 10
    chunks = size_chunks(text, 4, 0)
    assert texts(chunks) == ["e\u0301e\u0301", "e\u0301e\u0301", "e\u0301"]


def test_surrogate_pairs_are_joined_and_never_split():
    # A surrogate pair held as two code points (as a UTF-16 decoder with
    # surrogatepass produces) is one character once cleaned.
    pair = "\ud83d\ude00"
    chunks = size_chunks("a" + pair + "b" + pair, 1, 0)
    assert texts(chunks) == ["a", "😀", "b", "😀"]
    for chunk in chunks:
        chunk.text.encode("utf-8")


def test_lone_surrogates_become_replacement_characters():
    chunks = chunk_pages([Page("bad \ud800 text \udfff", 1)], strategy="page")
    assert chunks[0].text == "bad \ufffd text \ufffd"
    chunks[0].text.encode("utf-8")


# --- NUL -------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", CHUNK_STRATEGIES)
def test_nul_characters_are_stripped(strategy):
    pages = [Page("a\x00b\x00c", 1), Page("\x00", 2), Page("d\x00e", 3)]
    chunks = chunk_pages(pages, strategy=strategy, chunk_size=3, chunk_overlap=0)
    assert all("\x00" not in chunk.text for chunk in chunks)
    assert "".join(texts(chunks)).replace("\n\n", "") == "abcde"


def test_nul_characters_do_not_count_towards_the_window():
    chunks = size_chunks("\x00a\x00\x00b\x00c\x00d\x00", 2, 0)
    assert texts(chunks) == ["ab", "cd"]


def test_clean_text():
    assert clean_text("plain") == "plain"
    assert clean_text("a\x00b") == "ab"
    assert clean_text("\ud83d\ude00\ud83d") == "😀\ufffd"
    # Typographic ligatures become their letters; no other compatibility character changes.
    assert clean_text("de\ufb01ned \ufb02ow e\ufb03cient ba\ufb04e \ufb00 \ufb05 \ufb06") == (
        "defined flow efficient baffle ff st st")
    assert clean_text("m² ＡＢ ½") == "m² ＡＢ ½"


# --- recursive ----------------------------------------------------------------------------


def word_count(texts: list[str]) -> list[int]:
    """A token counter where every whitespace-separated word is one token (easy to reason about)."""
    return [len(text.split()) for text in texts]


def recursive(text: str, size: int, overlap: int, **options) -> list[ChunkSpec]:
    return chunk_pages([Page(text, None)], strategy="recursive", chunk_size=size, chunk_overlap=overlap,
                       count_tokens=word_count, **options)


def sentence(number: int, words: int = 9) -> str:
    return " ".join([f"s{number}w{i}" for i in range(words - 1)] + [f"s{number}end."])


def test_recursive_keeps_a_short_text_whole():
    assert recursive("One short note.\n\nWith two paragraphs.", 100, 10) == [
        ChunkSpec("One short note.\n\nWith two paragraphs.", 0, None)]


def test_recursive_prefers_paragraph_ends():
    # Three paragraphs of 30 words; 50 tokens fit one and a half: cut after each paragraph.
    paragraphs = [" ".join(sentence(p * 10 + s) for s in range(3)) for p in range(3)]
    chunks = recursive("\n\n".join(paragraphs), 50, 0)
    assert texts(chunks) == paragraphs


def test_recursive_prefers_sentence_ends_inside_a_long_paragraph():
    text = " ".join(sentence(n) for n in range(20))  # one paragraph, 20 sentences of 9 words
    chunks = recursive(text, 40, 0)
    assert len(chunks) == 5
    for chunk in chunks:
        assert chunk.text.endswith("end.")  # 4 sentences (36 tokens) a chunk
        assert chunk.text.split()[0].endswith("w0")
    assert " ".join(texts(chunks)) == text


def test_recursive_cuts_between_words_when_there_is_no_sentence_end():
    words = [f"word{i}" for i in range(95)]
    chunks = recursive(" ".join(words), 20, 0)
    assert [chunk.text.split() for chunk in chunks] == [words[i:i + 20] for i in range(0, 95, 20)]


def test_recursive_chunks_never_exceed_the_size_and_never_cut_a_word():
    rng = random.Random(7)
    vocabulary = ["alpha", "beta", "gamma.", "delta,", "epsilon!", "zeta?", "eta"]
    paragraphs = []
    for _ in range(40):
        lines = [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 30))) for _ in range(rng.randint(1, 4))]
        paragraphs.append("\n".join(lines))
    text = "\n\n".join(paragraphs)
    for size, overlap in [(10, 0), (25, 5), (60, 20), (7, 6)]:
        chunks = recursive(text, size, overlap)
        assert_contiguous(chunks)
        for chunk in chunks:
            assert 0 < len(chunk.text.split()) <= size
            assert set(chunk.text.split()) <= set(vocabulary)
            assert chunk.text == chunk.text.strip()
        # Nothing is lost: every word of the text, in order, once overlaps are removed.
        assert all(chunk.text in text for chunk in chunks)


def test_recursive_overlap_is_counted_in_tokens():
    text = " ".join(sentence(n, words=5) for n in range(40))  # 200 words
    chunks = recursive(text, 30, 12)
    for previous, following in zip(chunks, chunks[1:], strict=False):
        previous_words, following_words = previous.text.split(), following.text.split()
        shared = next(n for n in range(min(len(previous_words), len(following_words)), -1, -1)
                      if n == 0 or previous_words[-n:] == following_words[:n])
        assert 0 < shared <= 12  # whole sentences (5 tokens) or words, never more than the overlap
        assert len(following_words) - shared > 0  # every chunk brings new text
    all_words = text.split()
    seen = [word for chunk in chunks for word in chunk.text.split()]
    assert set(seen) == set(all_words)


def test_recursive_overlap_prefers_whole_sentences():
    text = " ".join(sentence(n, words=5) for n in range(40))
    chunks = recursive(text, 30, 12)
    for chunk in chunks[1:]:
        assert chunk.text.split()[0].endswith("w0")  # the overlap starts at a sentence start


def test_recursive_respects_the_minimum_before_preferring_a_better_boundary():
    # A paragraph break after 3 words, then a long paragraph: the first chunk does not stop
    # at 3 tokens (under half of 20) just because a paragraph ends there.
    text = "Tiny first paragraph.\n\n" + " ".join(f"w{i}" for i in range(60))
    chunks = recursive(text, 20, 0)
    assert len(chunks[0].text.split()) == 20


def test_recursive_cuts_a_word_longer_than_the_size_and_only_that():
    blob = "x" * 100
    chunks = chunk_pages([Page(f"before {blob} after", None)], strategy="recursive", chunk_size=10,
                         chunk_overlap=0)  # estimated: 4 characters a token
    assert "".join(chunk.text.replace(" ", "") for chunk in chunks) == f"before{blob}after"
    assert all(len(chunk.text.strip()) <= 40 for chunk in chunks)
    assert chunks[0].text.startswith("before")


def test_recursive_huge_single_word_respects_the_character_cap():
    blob = "y" * 50_000
    chunks = chunk_pages([Page(blob, 1)], strategy="recursive", chunk_size=10_000, chunk_overlap=0,
                         count_tokens=lambda texts: [1 for _ in texts], max_chars=3000)
    assert "".join(texts(chunks)) == blob
    assert max(len(chunk.text) for chunk in chunks) <= 3000


def test_every_chunk_respects_the_character_cap():
    text = " ".join(f"word{i}" for i in range(5000))
    for strategy in ("recursive", "page"):
        chunks = chunk_pages([Page(text, 1)], strategy=strategy, chunk_size=10_000, chunk_overlap=10,
                             max_chars=500)
        assert len(chunks) > 50 and all(len(chunk.text) <= 500 for chunk in chunks), strategy


def test_whole_over_the_character_cap_is_an_error_not_a_truncation():
    with pytest.raises(ChunkingError) as info:
        chunk_pages([Page("a" * 600, 1)], strategy="whole", max_chars=500)
    assert info.value.code == "CHUNK_TOO_LARGE"
    assert "MAX_CHUNK_CHARS" in info.value.message and info.value.details["chars"] == 600


def test_size_window_over_the_character_cap_is_refused():
    with pytest.raises(ChunkingError) as info:
        chunk_pages([Page("text", 1)], strategy="size", chunk_size=600, chunk_overlap=0, max_chars=500)
    assert info.value.code == "CHUNK_SETTINGS_INVALID" and "MAX_CHUNK_CHARS" in info.value.message


def test_recursive_spans_pages_and_keeps_the_page_it_starts_on():
    pages = [Page(" ".join(f"p{n}w{i}" for i in range(15)), n) for n in (1, 2, 3)]
    chunks = chunk_pages(pages, strategy="recursive", chunk_size=20, chunk_overlap=0, count_tokens=word_count)
    assert [chunk.page for chunk in chunks] == [1, 2, 3]  # page ends are paragraph ends
    assert [len(chunk.text.split()) for chunk in chunks] == [15, 15, 15]


def test_recursive_unicode_cjk_sentences_and_emoji():
    cjk = "日本語の文です。" * 30  # no spaces: sentences end with 。
    chunks = chunk_pages([Page(cjk, 1)], strategy="recursive", chunk_size=20, chunk_overlap=0,
                         count_tokens=lambda texts: [len(text.strip()) for text in texts])  # a token a character
    assert all(chunk.text.endswith("。") and len(chunk.text) <= 20 for chunk in chunks)
    assert "".join(texts(chunks)) == cjk
    emoji = " ".join("😀🎉🚀" for _ in range(50))
    chunks = recursive(emoji, 7, 2)
    for chunk in chunks:
        chunk.text.encode("utf-8")
        assert set(chunk.text.split()) == {"😀🎉🚀"}


def test_recursive_on_markdown_cuts_before_headings():
    body = " ".join(f"w{i}" for i in range(12))
    text = f"# Title\n{body}\n## Section\n{body}\n## Other\n{body}"
    chunks = recursive(text, 20, 0)
    assert [chunk.text.split("\n")[0] for chunk in chunks] == ["# Title", "## Section", "## Other"]


def test_recursive_is_lazy():
    # A generator of pages is consumed only as far as the chunks asked for.
    consumed = []

    def pages():
        for number in range(1, 10_000):
            consumed.append(number)
            yield Page(" ".join(f"w{i}" for i in range(50)), number)

    chunks = iter_chunks(pages(), strategy="recursive", chunk_size=20, chunk_overlap=0, count_tokens=word_count)
    first = [next(chunks) for _ in range(10)]
    assert len(first) == 10 and len(consumed) <= 256  # one batch of token counts


def test_token_counts_are_batched():
    calls = []

    def counting(texts):
        calls.append(len(texts))
        return word_count(texts)

    text = "\n\n".join(" ".join(f"p{p}w{i}" for i in range(8)) for p in range(1000))
    chunks = chunk_pages([Page(text, None)], strategy="recursive", chunk_size=30, chunk_overlap=5,
                         count_tokens=counting)
    assert len(chunks) > 250
    assert calls[0] == 256  # paragraphs are counted 256 at a time
    assert len(calls) <= len(chunks) + 10  # then one call per chunk at most, for its overlap


def test_estimate_tokens():
    assert estimate_tokens(["", "   ", "abcd", "abcde", " abcd  ", "abcd abcd"]) == [0, 0, 1, 2, 1, 2]
    words = "four char word list with some longer words inside".split()
    assert sum(estimate_tokens(words)) >= estimate_tokens([" ".join(words)])[0]
