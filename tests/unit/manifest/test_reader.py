"""The YAML reader: tags, scalars (YAML 1.2 core schema), legacy ${{ }}, positions (reference §1)."""

from __future__ import annotations

import math
from pathlib import Path

from telo.manifest.diagnostics import Diagnostic
from telo.manifest.nodes import Cel, Pos, Ref, Template
from telo.manifest.reader import read_documents

from .conftest import locate


def read(text: str, base: Path | None = None) -> tuple[list[object], list[Diagnostic]]:
    diagnostics: list[Diagnostic] = []
    docs = read_documents(text, "m.yaml", base or Path("."), diagnostics)
    return [d.value for d in docs], diagnostics


def test_scalars_follow_the_yaml_1_2_core_schema() -> None:
    [doc], diags = read(
        "ints: [1, -7, 0x1F, 0o17, 017, +3]\n"
        "floats: [1.5, -2e3, .inf, -.Inf, .nan]\n"
        "bools: [true, False, TRUE]\n"
        "strings: [yes, no, on, off, 1:30, 2026-01-01, 2026-01-01T10:00:00Z, '1', \"true\"]\n"
        "nulls: [~, null, NULL]\nempty:\n"
    )
    assert not diags
    assert doc["ints"] == [1, -7, 31, 15, 17, 3]
    assert all(type(v) is int for v in doc["ints"])
    f = doc["floats"]
    assert f[:2] == [1.5, -2000.0] and f[2] == math.inf and f[3] == -math.inf and math.isnan(f[4])
    assert doc["bools"] == [True, False, True]
    # YAML 1.1 would turn these into booleans, a sexagesimal int and datetimes: the core schema keeps strings.
    assert doc["strings"] == ["yes", "no", "on", "off", "1:30", "2026-01-01", "2026-01-01T10:00:00Z", "1", "true"]
    assert doc["nulls"] == [None, None, None] and doc["empty"] is None


def test_timestamps_stay_strings_even_as_keys_and_values() -> None:
    [doc], _ = read("at: 2001-12-14t21:59:43.10-05:00\n2026-01-01: x\n")
    assert doc == {"at": "2001-12-14t21:59:43.10-05:00", "2026-01-01": "x"}


def test_mapping_keys_are_strings() -> None:
    [doc], _ = read("cases: {1: a, true: b, null: c}\n")
    assert doc["cases"] == {"1": "a", "true": "b", "null": "c"}


def test_integer_outside_int64_is_an_error() -> None:
    _, diags = read("n: 9223372036854775808\nm: 9223372036854775807\n")
    assert [(d.code, d.pos) for d in diags] == [("ERR_MANIFEST_YAML", Pos("m.yaml", 1, 4))]


def test_ref_tag_with_and_without_alias() -> None:
    [doc], diags = read("a: !ref journal\nb: !ref Lib.shared\n")
    assert not diags
    assert doc["a"] == Ref("journal", None, Pos("m.yaml", 1, 4))
    assert doc["b"] == Ref("shared", "Lib", Pos("m.yaml", 2, 4))
    assert doc["b"].text == "Lib.shared" and str(doc["a"]) == "!ref journal"


def test_ref_tag_checks_the_name_grammar() -> None:
    _, diags = read("a: !ref bad-name\nb: !ref A.b.c\n")
    assert [d.code for d in diags] == ["ERR_MANIFEST_INVALID_NAME"] * 2


def test_cel_tag_quoted_plain_and_block() -> None:
    text = 'a: !cel "inputs.x + 1"\nb: !cel steps.a.result\nc: !cel >-\n  inputs.a +\n    inputs.b\n'
    [doc], diags = read(text)
    assert not diags
    assert doc["a"] == Cel("inputs.x + 1", Pos("m.yaml", 1, 4))
    assert doc["b"].text == "steps.a.result"
    assert doc["c"].text == "inputs.a +\n  inputs.b"
    # Positions inside the expression map back to the file (for CEL compile errors).
    assert doc["a"].locate(1, 10) == Pos("m.yaml", *locate(text, "+ 1"))
    assert doc["b"].locate(1, 7) == Pos("m.yaml", *locate(text, "a.result"))
    assert doc["c"].locate(1, 1) == Pos("m.yaml", *locate(text, "inputs.a"))
    assert doc["c"].locate(2, 3) == Pos("m.yaml", *locate(text, "inputs.b"))


def test_cel_tag_on_a_literal_block_keeps_lines() -> None:
    text = "x: !cel |\n  a\n  && b\n"
    [doc], _ = read(text)
    assert doc["x"].text == "a\n&& b\n"
    assert doc["x"].locate(2, 4) == Pos("m.yaml", 3, 6)


def test_empty_cel_is_an_error() -> None:
    _, diags = read('a: !cel ""\n')
    assert [d.code for d in diags] == ["ERR_MANIFEST_YAML"]


def test_legacy_whole_string_is_a_typed_expression() -> None:
    text = 'a: "${{ inputs.n }}"\nb: "  ${{inputs.n}}  "\n'
    [doc], _ = read(text)
    assert doc["a"] == Cel("inputs.n", Pos("m.yaml", *locate(text, "inputs.n")), legacy=True)
    assert doc["b"].text == "inputs.n" and doc["b"].legacy


def test_legacy_interpolation_is_a_template() -> None:
    text = 'a: "order ${{ inputs.id }} for ${{inputs.who}}!"\n'
    [doc], _ = read(text)
    value = doc["a"]
    assert isinstance(value, Template)
    assert value.parts[0] == "order " and value.parts[2] == " for " and value.parts[4] == "!"
    first, second = value.expressions
    assert (first.text, second.text) == ("inputs.id", "inputs.who")
    assert first.pos == Pos("m.yaml", *locate(text, "inputs.id"))
    assert second.pos == Pos("m.yaml", *locate(text, "inputs.who"))
    assert value.pos == Pos("m.yaml", 1, 4)


def test_legacy_expression_cannot_contain_a_closing_brace() -> None:
    # The delimiter pattern excludes `}` (reference §1): `{a: 1}` cannot be written inside ${{ }}.
    [doc], _ = read("a: \"${{ {'a': 1} }}\"\nb: 'no ${{ end'\n")
    assert not isinstance(doc["a"], Cel)
    assert doc["b"] == "no ${{ end"


def test_include_bytes_reads_relative_to_the_manifest(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "blob.bin").write_bytes(b"\x00\x01abc\xff")
    [doc], diags = read("a: !include-bytes data/blob.bin\nb: !include-bytes missing.bin\n", tmp_path)
    assert doc["a"] == b"\x00\x01abc\xff"
    assert [(d.code, d.pos) for d in diags] == [("ERR_MANIFEST_INCLUDE", Pos("m.yaml", 2, 4))]


def test_unknown_tag_and_tag_on_a_collection() -> None:
    _, diags = read("a: !foo x\nb: !cel [1]\n")
    assert [(d.code, d.pos.line) for d in diags if d.pos] == [("ERR_MANIFEST_YAML", 1), ("ERR_MANIFEST_YAML", 2)]


def test_duplicate_keys_are_reported() -> None:
    [doc], diags = read("a: 1\nb: 2\na: 3\n")
    assert doc == {"a": 1, "b": 2}
    assert [(d.code, d.pos) for d in diags] == [("ERR_MANIFEST_YAML", Pos("m.yaml", 3, 1))]


def test_merge_keys_and_anchors() -> None:
    [doc], diags = read("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n")
    assert not diags
    assert doc["other"] == {"x": 1, "y": 3}


def test_positions_of_every_node() -> None:
    text = "kind: A.B\nmetadata:\n  name: x\nsteps:\n  - name: one\n    inputs: {a: [1, 2]}\n"
    diagnostics: list[Diagnostic] = []
    [doc] = read_documents(text, "m.yaml", Path("."), diagnostics)
    table = doc.positions
    assert table.value("") == Pos("m.yaml", 1, 1)
    assert table.value("/metadata/name") == Pos("m.yaml", 3, 9)
    assert table.key("/metadata/name") == Pos("m.yaml", 3, 3)
    assert table.value("/steps/0") == Pos("m.yaml", 5, 5)
    assert table.value("/steps/0/inputs/a/1") == Pos("m.yaml", 6, 21)
    # A missing node answers with its nearest ancestor (how "missing required field" is placed).
    assert table.value("/steps/0/retry/attempts") == Pos("m.yaml", 5, 5)


def test_positions_keys_with_slash_and_tilde_are_escaped() -> None:
    diagnostics: list[Diagnostic] = []
    [doc] = read_documents("cases:\n  a/b: 1\n  c~d: 2\n", "m.yaml", Path("."), diagnostics)
    assert doc.positions.value("/cases/a~1b") == Pos("m.yaml", 2, 8)
    assert doc.positions.value("/cases/c~0d") == Pos("m.yaml", 3, 8)


def test_multiple_documents_and_empty_ones() -> None:
    docs, diags = read("a: 1\n---\n---\nb: 2\n...\n")
    assert docs == [{"a": 1}, {"b": 2}] and not diags


def test_syntax_error_keeps_earlier_documents_and_reports_the_mark() -> None:
    docs, diags = read("a: 1\n---\nb: [1\nc: 2\n")
    assert docs == [{"a": 1}]
    assert len(diags) == 1 and diags[0].code == "ERR_MANIFEST_YAML"
    assert diags[0].pos is not None and diags[0].pos.line == 4


# --- limits (telo.manifest.limits): alias bombs and nesting past the value domain's limit ----------------

_BOMB = "x:\n  a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"  {n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_an_alias_bomb_is_one_diagnostic_at_the_alias_and_builds_nothing() -> None:
    docs, diags = read("kind: A\n---\n" + _BOMB)
    assert docs == [{"kind": "A"}]  # the documents before it are still read
    [d] = diags
    assert d.code == "ERR_MANIFEST_YAML" and "100000 nodes" in d.message and d.hint
    assert d.pos is not None and d.pos.line > 3 and d.pos.column > 1  # on an alias of the last lines


def test_ordinary_aliases_and_merge_keys_still_expand() -> None:
    [doc], diags = read(
        "retry: &r {attempts: 3, delays: [1, 2]}\n"
        "a: *r\nb: {<<: *r, attempts: 5}\n"
        "many: [" + ", ".join(["*r"] * 200) + "]\n"
    )
    assert not diags
    assert doc["a"] == {"attempts": 3, "delays": [1, 2]} and doc["b"]["attempts"] == 5
    assert len(doc["many"]) == 200 and doc["many"][199] == doc["a"]


def test_nesting_past_the_manifest_limit_is_one_diagnostic_not_a_recursion_error() -> None:
    for depth in (200, 500, 600, 20_000):
        docs, diags = read("x: " + "[" * depth + "]" * depth + "\n")
        assert docs == []
        [d] = diags
        assert d.code == "ERR_TYPED_FRAME_UNENCODABLE" and "deeper than 200" in d.message and d.hint
        assert d.pos == Pos("m.yaml", 1, 4 + 199)  # the 201st level (the document is level 1, x level 2)
    # through aliases too: each level of `c` doubles nothing but adds the depth of `b`
    deep = "[" * 120 + "]" * 120
    docs, diags = read(f"a: &b {deep}\nc: [*b]\nd: [[[{'[' * 80}*b{']' * 80}]]]\n")
    assert [d.code for d in diags] == ["ERR_TYPED_FRAME_UNENCODABLE"] and diags[0].pos.line == 3


def test_nesting_at_the_manifest_limit_reads() -> None:
    [doc], diags = read("x: " + "[" * 199 + "]" * 199 + "\n")  # with the document's mapping: 200 levels
    assert not diags
    node, levels = doc["x"], 1
    while node:
        node, levels = node[0], levels + 1
    assert levels == 199
