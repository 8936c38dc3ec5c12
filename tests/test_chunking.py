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
    chunk_pages,
    clean_text,
)


def texts(chunks: list[ChunkSpec]) -> list[str]:
    return [chunk.text for chunk in chunks]


def assert_contiguous(chunks: list[ChunkSpec]) -> None:
    assert [chunk.chunk_index for chunk in chunks] == list(range(len(chunks)))


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
    error = ChunkingError("CHUNK_SETTINGS_INVALID", "bad")
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
        ChunkSpec(text="three\n", chunk_index=1, page=3),
        ChunkSpec(text="five", chunk_index=2, page=5),
    ]


def test_page_strategy_ignores_size_settings():
    long_page = "x" * 5000
    chunks = chunk_pages([Page(long_page, 1)], strategy="page", chunk_size=10, chunk_overlap=2)
    assert texts(chunks) == [long_page]


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


@pytest.mark.parametrize(("size", "overlap"), [(1000, 200), (7, 3), (50, 0), (64, 63), (2, 1)])
def test_size_windows_overlap_and_rebuild_the_text(size, overlap):
    rng = random.Random(size * 1000 + overlap)
    # Single separators between words: no window of two or more characters is blank.
    words = ["".join(rng.choice("abcdefghij.") for _ in range(rng.randint(1, 9))) for _ in range(600)]
    text = "".join(word + rng.choice(" \n") for word in words)
    chunks = size_chunks(text, size, overlap)
    step = size - overlap
    assert_contiguous(chunks)
    for index, chunk in enumerate(chunks):
        assert chunk.text == text[index * step:index * step + size]
    for previous, following in zip(chunks, chunks[1:]):
        if overlap:
            assert previous.text[-overlap:] == following.text[:overlap]
    rebuilt = chunks[0].text + "".join(chunk.text[overlap:] for chunk in chunks[1:])
    assert rebuilt == text
    assert all(0 < len(chunk.text) <= size for chunk in chunks)


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
    assert chunks == [
        ChunkSpec("a" * 8, 0, 1),
        ChunkSpec("aaaa\n\nbb", 1, 1),  # spans the boundary, starts on page 1
        ChunkSpec("b" * 8, 2, 2),
        ChunkSpec("bbbb", 3, 2),
    ]


def test_size_window_starting_in_the_page_separator_belongs_to_the_next_page():
    pages = [Page("a" * 10, 1), Page("b" * 10, 2)]
    chunks = chunk_pages(pages, strategy="size", chunk_size=5, chunk_overlap=0)
    assert [(chunk.text, chunk.page) for chunk in chunks] == [
        ("aaaaa", 1), ("aaaaa", 1), ("\n\nbbb", 2), ("bbbbb", 2), ("bb", 2),
    ]


def test_size_page_attribution_skips_blank_pages_and_keeps_real_numbers():
    pages = [Page("x" * 6, 3), Page("   ", 4), Page("", 5), Page("y" * 6, 7), Page("z" * 6, 8)]
    chunks = chunk_pages(pages, strategy="size", chunk_size=4, chunk_overlap=0)
    joined = "x" * 6 + "\n\n" + "y" * 6 + "\n\n" + "z" * 6
    assert "".join(texts(chunks)) == joined
    assert [(chunk.text, chunk.page) for chunk in chunks] == [
        ("xxxx", 3), ("xx\n\n", 3), ("yyyy", 7), ("yy\n\n", 7), ("zzzz", 8), ("zz", 8),
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
    for chunk in chunks:
        position = chunk.chunk_index * 40
        first = position + len(chunk.text) - len(chunk.text.lstrip())
        expected = max(number for number, start in enumerate(starts, 1) if start <= first)
        assert chunk.text == joined[position:position + 50]
        assert chunk.page == expected


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
