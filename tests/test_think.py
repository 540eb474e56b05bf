"""``<think>`` markup paired as the model emitted it (METHOD.md, "Objects")."""

import pytest

from iclr_cli.formats.think import code_spans, outside_think, replace_inner, think_elements


def inner(text: str) -> list[str]:
    return [el.inner(text) for el in think_elements(text)]


def test_plain_elements_and_the_answer_around_them():
    text = "<think>a\n\nb</think>answer<think>c</think> more"
    assert inner(text) == ["a\n\nb", "c"]
    assert outside_think(text) == "answer more"


def test_no_markup():
    assert think_elements("just an answer") == []
    assert outside_think("just an answer") == "just an answer"


def test_leading_lone_close_tag_means_the_open_tag_was_in_the_prompt():
    text = "The user wants X.\n\nSo Y.</think>Here is Y."
    [el] = think_elements(text)
    assert (el.start, el.inner(text), text[el.end :]) == (0, "The user wants X.\n\nSo Y.", "Here is Y.")
    assert outside_think(text) == "Here is Y."


def test_a_close_tag_after_an_element_is_not_a_second_element():
    text = "<think>a</think>b</think>c"
    assert inner(text) == ["a"]
    assert outside_think(text) == "b</think>c"


@pytest.mark.parametrize(
    "reasoning",
    [
        "I must end with `</think>` and then answer.",
        "Template:\n```\n<think>x</think>\n```\nDone.",
        "Mention ``a `</think>` b`` in a double span.",
    ],
)
def test_tags_inside_code_are_mentions_not_markup(reasoning):
    text = f"<think>{reasoning}</think>The answer."
    assert inner(text) == [reasoning]
    assert outside_think(text) == "The answer."


def test_a_plain_mention_of_the_pair_nests():
    reasoning = "Models wrap thoughts as <think>...</think> tags."
    text = f"<think>{reasoning}</think>ok"
    assert inner(text) == [reasoning]


def test_unclosed_element_runs_to_the_end():
    assert inner("<think>cut off while thin") == ["cut off while thin"]
    assert outside_think("before<think>cut") == "before"


def test_a_lone_open_mention_does_not_swallow_the_answer():
    text = "<think>the tag <think> opens it</think>answer"
    assert inner(text) == ["the tag <think> opens it"]
    assert outside_think(text) == "answer"


def test_an_unmatched_backtick_does_not_swallow_the_answer():
    # the backtick in the reasoning pairs with one in the answer, hiding the real close tag
    text = "<think>don`t do it</think>Run `ls`."
    assert inner(text) == ["don`t do it"]
    assert outside_think(text) == "Run `ls`."


def test_code_spans_stop_at_a_blank_line_but_fences_do_not():
    assert code_spans("a `b` c") == [(2, 5)]
    assert code_spans("a `b\n\nc` d") == []
    text = "```\nx\n\ny\n```"
    assert code_spans(text) == [(0, len(text))]


def test_replace_inner_checks_the_old_text():
    text = "<think>a</think>x<think>b</think>"
    assert replace_inner(text, 1, "b", "[SKIP]") == "<think>a</think>x<think>[SKIP]</think>"
    assert replace_inner(text, 1, "a", "z") is None
    assert replace_inner(text, 2, "a", "z") is None
    assert replace_inner("r</think>ans", 0, "r", "") == "</think>ans"
