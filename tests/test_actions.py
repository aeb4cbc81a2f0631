"""The action parser: the paper's syntax, the <think>/<answer> wrapper, and every kind of bad input."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webr1_kit.actions import ACTIONS, Action, ActionError, action_docs, parse_action


def documented_example(spec) -> str:
    """Fill a spec's documented syntax with concrete values."""
    return spec.syntax.replace("<id>", "12").replace("<answer>", "42 items").replace(
        f"<{spec.argument}>", "1" if spec.name == "Switch Tab" else "hello world"
    )


@pytest.mark.parametrize("spec", ACTIONS, ids=lambda s: s.name)
def test_every_documented_action_parses_and_round_trips(spec):
    text = documented_example(spec)
    action = parse_action(text)
    assert action.name == spec.name
    if spec.element == "required":
        assert action.element == 12
    assert parse_action(action.to_text()) == action


def test_docs_are_generated_from_the_action_table():
    docs = action_docs()
    for spec in ACTIONS:
        assert spec.syntax in docs
    assert len(docs.splitlines()) == len(ACTIONS)


def test_think_answer_format_takes_the_answer():
    text = '<think>I should click 3, maybe do(action="Click", element="9")</think>\n<answer>do(action="Click", element="3")</answer>'
    assert parse_action(text) == Action("Click", element=3)


def test_unclosed_answer_tag_still_parses():
    assert parse_action('<think>x</think><answer>do(action="Hover", element="4")') == Action("Hover", element=4)


def test_bare_action_with_surrounding_prose():
    assert parse_action('Sure! do(action="Type", argument="Paris", element="7") is next.') == Action(
        "Type", element=7, argument="Paris"
    )


def test_element_as_number_and_single_quotes_are_accepted():
    assert parse_action("do(action='Click', element=5)") == Action("Click", element=5)


def test_action_names_are_forgiving_about_case_and_underscores():
    assert parse_action('do(action="press_enter")') == Action("Press Enter")
    assert parse_action('do(action="select dropdown option", argument="M", element="2")').name == "Select Dropdown Option"


def test_exit_forms():
    assert parse_action('exit(message="The answer is 5")') == Action("exit", argument="The answer is 5")
    assert parse_action('exit("N/A")') == Action("exit", argument="N/A")
    assert parse_action("exit()") == Action("exit", argument="")


def test_quotes_and_parentheses_inside_arguments():
    a = parse_action('do(action="Type", argument="say \\"hi\\" (twice)", element="3")')
    assert a.argument == 'say "hi" (twice)'
    assert parse_action(a.to_text()) == a


@pytest.mark.parametrize(
    "text, message",
    [
        ("I think I am done.", "no action found"),
        ('do(action="Fly", element="3")', "unknown action"),
        ('do(action="Click")', 'needs element="<id>"'),
        ('do(action="Click", element="submit")', "element id number"),
        ('do(action="Type", element="3")', "needs argument"),
        ('do(action="Click", element="3"', "no closing parenthesis"),
        ('do(action="Click", element="3", color="red")', "unknown argument"),
        ('do("Click", "3")', "named arguments"),
        ('do(action="Wait", element="3")', "takes no element"),
        ('do(action="Click", argument="x", element="3")', "takes no argument"),
        ("go_backward(1)", "takes no arguments"),
        ('do(action="Click", element=3 4)', "could not read"),
    ],
)
def test_malformed_actions_give_a_clear_error(text, message):
    with pytest.raises(ActionError) as info:
        parse_action(text)
    assert info.value.kind == "malformed"
    assert message in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "do(action=__import__('os').system('touch /tmp/webr1_pwned'))",
        'do(action="Click", element=open("/etc/passwd").read())',
        'exit(message=print("hi"))',
        'do(action="Type", argument="a" + "b", element="1")',
    ],
)
def test_code_in_arguments_is_refused_not_run(text, tmp_path):
    with pytest.raises(ActionError) as info:
        parse_action(text)
    assert info.value.kind == "malformed"
    assert not (tmp_path / "webr1_pwned").exists()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_parser_never_raises_anything_but_action_error(text):
    try:
        action = parse_action(text)
    except ActionError as exc:
        assert exc.kind == "malformed" and str(exc)
    else:
        assert isinstance(action, Action)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([s for s in ACTIONS if s.argument and s.name != "Switch Tab"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40),
    st.integers(min_value=0, max_value=10_000),
)
def test_any_argument_text_round_trips(spec, argument, element):
    action = Action(spec.name, element=element, argument=argument)
    assert parse_action(action.to_text()) == action


def test_to_text_is_the_papers_syntax():
    assert Action("Type", element=22, argument="01/01/2023").to_text() == (
        'do(action="Type", argument="01/01/2023", element="22")'
    )
    assert re.fullmatch(r'exit\(message=".*"\)', Action("exit", argument="x").to_text())


# ---------------------------------------------------------------- the strict reading (M-GRPO rollouts)


@pytest.mark.parametrize("text", [
    '<think>Click Ok.</think><answer>do(action="Click", element="4")</answer>',
    '  <think>The "<button>" is 4.</think>\n<answer> do(action="Click", element="4") </answer>\n',
    '<answer>do(action="Click", element="4")</answer>',  # thinking off
])
def test_strict_reading_accepts_one_well_formed_response(text):
    assert parse_action(text, strict=True) == Action("Click", element=4) == parse_action(text)


@pytest.mark.parametrize("text", [
    # cut off at the token limit: the lenient reading finds a click in it
    '<think>Click.</think><answer><think>do(action="Click", element="4")</think><think><think>',
    '<think>Click.</think><answer>do(action="Click", element="4")',  # no </answer>: ended on the end token
    '<think>a</think><think>b</think><answer>do(action="Click", element="4")</answer>',
    '<think>a</think><answer>exit()</answer><answer>do(action="Click", element="4")</answer>',
    '<think>a</think><answer>I click do(action="Click", element="4")</answer>',
    '<think>a</think><answer>do(action="Click", element="4") do(action="Click", element="5")</answer>',
    '<think>a</think><answer>do(action="Click", element="4")</answer> and more',
    'do(action="Click", element="4")',
])
def test_strict_reading_refuses_what_the_lenient_one_forgives(text):
    with pytest.raises(ActionError) as err:
        parse_action(text, strict=True)
    assert err.value.kind == "malformed"
