"""Block split/join: exact round trip and the blank-line rule (METHOD.md, "Blocks")."""

from hypothesis import given, strategies as st

from iclr_cli.blocks import SKIP, is_candidate, is_heading, is_protected, split_blocks

PIECES = st.sampled_from(["a", "b", " ", "c.", "\n", "\t", "\r", "\u200d", "👩\u200d💻", "\ufe0f", "é", "\n\n",
                          "**T**", "# H", "!", "[SKIP]", "*"])
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
def test_blocks_hold_a_blank_line_only_after_a_heading_they_start_with(text):
    for block in split_blocks(text).blocks:
        paragraphs = [p for p in block.replace("\r", "").split("\n\n") if p.strip()]
        for heading in paragraphs[:-1]:  # every paragraph but the last is a heading joined to it
            assert is_heading(heading.strip()), (text, block)
        assert not block.startswith("\n") and not block.endswith("\n")


def test_a_heading_paragraph_belongs_to_the_block_it_introduces():
    """METHOD.md, "Blocks": the GPT-5 summary shape (tau-bench) and Markdown headings."""
    text = ("**Following booking policy**\n\nI must read the policy before booking.\n\n"
            "# Plan\n\n## Step one\n\nAsk for the user id.\n\n**Trailing title**")
    split = split_blocks(text)
    assert split.blocks == ("**Following booking policy**\n\nI must read the policy before booking.",
                            "# Plan\n\n## Step one\n\nAsk for the user id.", "**Trailing title**")
    assert split.join() == text
    # a heading before a block that is not a candidate stays on its own
    assert split_blocks("**Done**\n\n[SKIP]\n\nrest").blocks == ("**Done**", SKIP, "rest")
    # bold inside a sentence is not a heading
    assert split_blocks("Use **this** one.\n\nNext.").blocks == ("Use **this** one.", "Next.")


def test_a_glued_bold_title_starts_a_block_and_a_glued_skip_is_its_own_block():
    text = "I have that information!**Gathering booking details**\n\nAsk for dates.\n\nDone."
    split = split_blocks(text)
    assert split.blocks == ("I have that information!", "**Gathering booking details**\n\nAsk for dates.", "Done.")
    assert split.seps[1] == ""
    assert split.join() == text
    # the compressed text splits into the same blocks: the [SKIP] stays a block of its own
    edited = split.edit({1: SKIP})
    assert edited == "I have that information![SKIP]\n\nDone."
    assert split_blocks(edited).blocks == ("I have that information!", SKIP, "Done.")
    # bold glued mid-line (not a title ending its line) is not a boundary
    assert split_blocks("see:**x** here").blocks == ("see:**x** here",)


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
