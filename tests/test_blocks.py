"""Block split/join: exact round trip and the blank-line rule (METHOD.md, "Blocks")."""

from hypothesis import given, strategies as st

from iclr_cli.blocks import SKIP, is_candidate, is_protected, split_blocks

PIECES = st.sampled_from(["a", "b", " ", "c.", "\n", "\t", "\r", "\u200d", "👩\u200d💻", "\ufe0f", "é", "\n\n"])
TEXT = st.lists(PIECES, max_size=40).map("".join)


@given(TEXT, st.sampled_from(["paragraph", "line", "sentence"]))
def test_join_of_split_is_identity(text, splitter):
    split = split_blocks(text, splitter)
    assert split.join() == text
    assert len(split.seps) == len(split.blocks) + 1
    for (start, end), block in zip(split.spans, split.blocks):
        assert text[start:end] == block
        assert block.strip()


@given(TEXT)
def test_blocks_never_contain_a_blank_line(text):
    for block in split_blocks(text).blocks:
        assert all(line.strip() for line in block.split("\n")[1:-1])
        assert not block.startswith("\n") and not block.endswith("\n")


def test_paragraph_split_keeps_separators():
    text = "\n\nFirst para\nstill first.\n\n  \nSecond.\n \t\nThird\n\n"
    split = split_blocks(text)
    assert split.blocks == ("First para\nstill first.", "Second.", "Third")
    assert split.seps == ("\n\n", "\n\n  \n", "\n \t\n", "\n\n")


def test_crlf_blank_lines_separate_blocks():
    split = split_blocks("one\r\n\r\ntwo")
    assert split.blocks == ("one", "two")
    assert split.join() == "one\r\n\r\ntwo"


def test_whitespace_only_text_has_no_blocks():
    split = split_blocks(" \n\n\t ")
    assert split.blocks == ()
    assert split.join() == " \n\n\t "


def test_join_with_replacement():
    split = split_blocks("a\n\nb\n\nc")
    assert split.join(["a", SKIP, "c"]) == f"a\n\n{SKIP}\n\nc"


def test_skip_and_tool_call_blocks_are_not_candidates():
    assert not is_candidate(SKIP)
    assert not is_candidate("  [SKIP] ")
    assert is_protected("Let me call it.\n<function=execute_bash>\n<parameter=command>ls")
    assert is_candidate("An ordinary thought about <functions> in general.")


def test_edge_whitespace_stays_in_separators():
    split = split_blocks("  first\n\nsecond\n")
    assert split.blocks == ("first", "second")
    assert split.join([SKIP, "second"]) == f"  {SKIP}\n\nsecond\n"
