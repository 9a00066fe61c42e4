"""telo.paths: composing and parsing step paths (spec §5.1, reference §4)."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telo import paths
from telo.errors import ERR_INVALID_PATH, ERR_INVALID_STEP_NAME, PathError
from telo.paths import Segment

step_names = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
indices = st.none() | st.integers(min_value=0, max_value=10**12)
any_names = st.text()  # switch case keys: any string at all, including "", "/", "[3]", "%2F"
reserved_names = step_names.map(paths.reserved)
segments = st.builds(Segment, step_names | reserved_names | any_names, indices)


# --- the spec's examples ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (("steps", "createAccount"), "steps/createAccount"),
        (("steps", "checkStock", "if"), "steps/checkStock/if"),
        (("steps", "checkStock", "then", "reserve"), "steps/checkStock/then/reserve"),
        (("steps", "poll", "while", 3), "steps/poll/while[3]"),
        (("steps", "poll", "do", 3, "fetch"), "steps/poll/do[3]/fetch"),
        (("steps", "importAll", "cases", "bulk", "write"), "steps/importAll/cases/bulk/write"),
        (("steps", "items", 2, "charge"), "steps/items[2]/charge"),
        (("steps", "charge", "@when"), "steps/charge/@when"),
        (("inputs",), "inputs"),
    ],
)
def test_step_path_matches_spec_examples(parts: tuple[str | int, ...], expected: str) -> None:
    assert paths.step_path(*parts) == expected
    assert paths.format(paths.parse(expected)) == expected


def test_child_continues_the_enclosing_path_or_starts_at_steps() -> None:
    assert paths.child(None, "charge") == "steps/charge"
    assert paths.child(None) == paths.ROOT == "steps"
    assert paths.child("steps/charge", "announce") == "steps/charge/announce"  # no second `steps`
    assert paths.child("steps/items", 2, "charge") == "steps/items[2]/charge"


def test_guard_is_reserved_and_distinct_from_a_nested_step_named_when() -> None:
    step = "steps/charge"
    assert paths.guard_path(step) == "steps/charge/@when"
    assert paths.child(step, paths.validate_step_name("when")) == "steps/charge/when"
    assert paths.guard_path(step) != paths.child(step, "when")
    assert paths.is_reserved(paths.parse(paths.guard_path(step))[-1])
    assert not paths.is_reserved("when")


def test_journaling_sites_of_reference_section_4() -> None:
    s = "steps/s"
    assert paths.WORKFLOW_INPUTS == "inputs"
    assert paths.inputs_path(s) == "steps/s/inputs"
    assert paths.retry_path(s, 2) == "steps/s/retry[2]"
    assert paths.if_path(s) == "steps/s/if"
    assert paths.elseif_path(s, 1) == "steps/s/elseif[1]"
    assert paths.then_body(s) == "steps/s/then"
    assert paths.elseif_then_body(s, 1) == "steps/s/elseif[1]/then"
    assert paths.else_body(s) == "steps/s/else"
    assert paths.while_path(s, 3) == "steps/s/while[3]"
    assert paths.do_body(s, 3) == "steps/s/do[3]"
    assert paths.switch_path(s) == "steps/s/switch"
    assert paths.case_body(s, "bulk") == "steps/s/cases/bulk"
    assert paths.default_body(s) == "steps/s/default"
    assert paths.try_guard_path(s) == "steps/s/when"  # legacy: no `@`, even upstream [N]
    assert paths.try_body(s) == "steps/s/try"
    assert paths.catch_body(s) == "steps/s/catch"
    assert paths.finally_body(s) == "steps/s/finally"
    assert paths.collection_path(s) == "steps/s/collection"
    assert paths.turn_body(s, 4) == "steps/s[4]"
    assert paths.wake_at_path(s) == "steps/s/wakeAt"
    assert paths.token_path(s) == "steps/s/token"
    assert paths.deadline_path(s) == "steps/s/deadline"
    assert paths.value_path(s) == "steps/s/value"
    assert paths.fallback_path("sleeper") == "steps/sleeper"
    assert paths.resume_override_path(1787159304535) == "override/resume/1787159304535"


# --- escaping ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "segment"),
    [("bulk", "bulk"), ("a/b", "a%2Fb"), ("x[3]", "x%5B3%5D"), ("100%", "100%25"), ("", "%"),
     ("%2F", "%252F"), ("with space", "with space"), ("é", "é"), ("@when", "@when")],
)
def test_case_keys_are_escaped_only_where_needed(key: str, segment: str) -> None:
    path = paths.case_body("steps/s", key)
    assert path == f"steps/s/cases/{segment}"
    assert paths.parse(path)[-1] == Segment(key)


def test_empty_name_with_index_round_trips() -> None:
    assert paths.format([Segment("", 3)]) == "%[3]"
    assert paths.parse("%[3]") == (Segment("", 3),)


@given(st.lists(segments, min_size=1, max_size=8))
def test_format_parse_round_trip(segs: list[Segment]) -> None:
    text = paths.format(segs)
    assert paths.parse(text) == tuple(segs)
    assert paths.format(paths.parse(text)) == text


@given(st.lists(step_names | any_names | st.integers(min_value=0), min_size=1, max_size=8))
def test_step_path_agrees_with_format(parts: list[str | int]) -> None:
    try:
        text = paths.step_path(*parts)
    except PathError as err:  # an int first, or two ints in a row
        assert err.code == ERR_INVALID_PATH
        assert isinstance(parts[0], int) or any(
            isinstance(a, int) and isinstance(b, int) for a, b in pairwise(parts)
        )
        return
    names = [p for p in parts if isinstance(p, str)]
    assert [s.name for s in paths.parse(text)] == names


def _outcome(fn: object, *args: object) -> tuple[str, object]:
    try:
        return ("ok", fn(*args))  # type: ignore[operator]
    except PathError as err:
        return ("error", (err.code, err.message, err.data))


parts_any = step_names | reserved_names | any_names | st.integers(min_value=-2, max_value=10**12) | st.booleans()


@given(st.none() | st.lists(segments, min_size=1, max_size=5).map(paths.format), st.lists(parts_any, max_size=4))
def test_child_fast_path_equals_the_segment_way(base: str | None, parts: list[object]) -> None:
    assert _outcome(paths.child, base, *parts) == _outcome(paths._child_by_segments, base, tuple(parts))


@given(st.text(alphabet="ab/[]%0129", max_size=12), st.lists(step_names | st.integers(min_value=0), max_size=2))
def test_child_validates_any_base_as_parse_does(base: str, parts: list[str | int]) -> None:
    assert _outcome(paths.child, base, *parts) == _outcome(paths._child_by_segments, base, tuple(parts))


@given(step_names)
def test_a_reserved_segment_never_collides_with_a_step_name(name: str) -> None:
    at = paths.reserved(name)
    assert at == "@" + name
    assert paths.is_reserved(at)
    with pytest.raises(PathError):
        paths.validate_step_name(at)
    assert paths.child("steps/s", at) != paths.child("steps/s", name)


@given(step_names)
def test_step_names_are_written_verbatim(name: str) -> None:
    assert paths.child("steps", name) == "steps/" + name  # same bytes as upstream stepPath


# --- refusals ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("bad", "position"),
    [("", 0), ("steps//a", 6), ("steps/", 6), ("/steps", 0), ("steps/a[01]", 7), ("steps/a[-1]", 7),
     ("steps/[3]", 6), ("steps/a]", 7), ("steps/a[1][2]", 7), ("steps/a[1]b", 7), ("steps/%2f", 6),
     ("steps/%41", 6), ("steps/a%", 7), ("steps/%%", 6), ("steps/a[²]", 7)],
)
def test_parse_refuses_malformed_paths(bad: str, position: int) -> None:
    with pytest.raises(PathError) as info:
        paths.parse(bad)
    assert info.value.code == ERR_INVALID_PATH
    assert repr(bad) in info.value.message
    assert info.value.data["position"] == position


@pytest.mark.parametrize("parts", [(3,), (3, "a"), ("a", 1, 2), ("a", -1), ("a", True), ("a", 1.5)])
def test_step_path_refuses_bad_parts(parts: tuple[object, ...]) -> None:
    with pytest.raises(PathError) as info:
        paths.step_path(*parts)  # type: ignore[arg-type]
    assert info.value.code == ERR_INVALID_PATH


def test_turn_of_an_already_indexed_segment_is_refused() -> None:
    with pytest.raises(PathError):
        paths.turn_body("steps/items[2]", 3)


@pytest.mark.parametrize("bad", ["", "foo-bar", "1st", "a b", "a\n", "é", "@when", "a.b", None, 3])
def test_bad_step_names_are_refused_with_the_code(bad: object) -> None:
    with pytest.raises(PathError) as info:
        paths.validate_step_name(bad, where="sequence 'orders', steps[2]")
    err = info.value
    assert err.code == ERR_INVALID_STEP_NAME
    assert repr(bad) in err.message and "sequence 'orders', steps[2]" in err.message
    assert err.hint is not None and paths.STEP_NAME_PATTERN in err.hint


@pytest.mark.parametrize("good", ["a", "_", "createAccount", "step_2", "A9"])
def test_good_step_names_pass(good: str) -> None:
    assert paths.validate_step_name(good) == good


def test_reserved_requires_a_step_name() -> None:
    with pytest.raises(PathError):
        paths.reserved("not-a-name")


# --- navigation -------------------------------------------------------------------------------------------
def test_is_within_compares_whole_segments() -> None:
    assert paths.is_within("steps/a", "steps/a")
    assert paths.is_within("steps/a/then/b", "steps/a")
    assert not paths.is_within("steps/ab", "steps/a")
    assert not paths.is_within("steps/a[2]/x", "steps/a")
    assert paths.is_within("steps/items[2]/charge", "steps/items[2]")
    assert not paths.is_within("steps/items[20]/charge", "steps/items[2]")


def test_is_within_with_turns() -> None:
    assert paths.is_within("steps/a[2]/x", "steps/a", include_turns=True)
    assert paths.is_within("steps/a[2]", "steps/a", include_turns=True)
    assert paths.is_within("steps/a/collection", "steps/a", include_turns=True)
    assert not paths.is_within("steps/ab[2]", "steps/a", include_turns=True)
    assert not paths.is_within("steps/a[02]", "steps/a", include_turns=True)
    assert not paths.is_within("steps/a[2]x", "steps/a", include_turns=True)


@given(st.lists(segments, min_size=1, max_size=5), st.lists(segments, max_size=5))
def test_relative_to_and_extend_invert_each_other(head: list[Segment], tail: list[Segment]) -> None:
    prefix = paths.format(head)
    full = paths.extend(prefix, tail)
    assert paths.is_within(full, prefix)
    assert paths.relative_to(full, prefix) == tuple(tail)


def test_parent_and_relative_to() -> None:
    assert paths.parent("steps/poll/do[3]/fetch") == "steps/poll/do[3]"
    assert paths.parent("steps/items[2]") == "steps"
    assert paths.parent("steps") is None
    assert paths.relative_to("steps/a/then/b", "steps/a") == (Segment("then"), Segment("b"))
    assert paths.relative_to("steps/a", "steps/a") == ()
    with pytest.raises(PathError):
        paths.relative_to("steps/ab", "steps/a")


def test_segment_refuses_a_bad_index() -> None:
    with pytest.raises(PathError):
        Segment("a", -1)
    with pytest.raises(PathError):
        Segment("a", True)
