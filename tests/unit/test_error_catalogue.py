"""The error catalogue (telo.errors.Code) is the one place codes are written, and docs/errors.md is its table.

Regenerate the table after changing the catalogue:  TELO_REGENERATE_DOCS=1 pytest tests/unit/test_error_catalogue.py
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from telo import errors
from telo.error_codes import SPEC_CODES, UPSTREAM_NAMED, Code

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "telo"
CATALOGUE_MODULES = {SRC / "errors.py", SRC / "error_codes.py"}
ERRORS_DOC = ROOT / "docs" / "errors.md"
CODE_WORD = re.compile(r"\b(ERR_[A-Z0-9_]+|INTERNAL_ERROR)\b")
# Codes the docs use as examples of a manifest's or a program's own codes (a `throw`, a TeloError of a kind).
EXAMPLE_CODES = {"ERR_BOOM", "ERR_BUSY", "ERR_CARD_DECLINED", "ERR_OUT_OF_STOCK"}
# The spec's two lists (§9, §6.5), in its order.
SPEC_LIST = (
    "ERR_DURABLE_UNJOURNALABLE_VALUE", "ERR_JOURNAL_ENTRY_MISMATCH", "ERR_DURABLE_MANIFEST_CHANGED",
    "ERR_DURABLE_NO_RUN", "ERR_DURABLE_SUSPENDED", "ERR_DURABLE_SUSPENSION_SWALLOWED", "ERR_DURABLE_SUSPEND_FORBIDDEN",
    "ERR_DURABLE_TARGET_UNENCODABLE", "ERR_DURABLE_TARGET_UNDECODABLE", "ERR_DURABLE_ENTRY_UNDECODABLE",
    "ERR_TYPED_FRAME_UNENCODABLE", "ERR_TYPED_FRAME_UNDECODABLE",
)


# --- (a) no code is written as a string literal outside the catalogue ---------------------------------------


def _docstring_ids(module: ast.Module) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _dunder_all_ids(module: ast.Module) -> set[int]:
    """String constants of ``__all__``: they name module attributes (``ERR_CEL_EVAL``), not codes."""
    out: set[int] = set()
    for stmt in module.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
            stmt, ast.AnnAssign | ast.AugAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and stmt.value is not None:
            out.update(id(n) for n in ast.walk(stmt.value))
    return out


def code_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string constant, docstrings and ``__all__`` aside, that is a code or starts with
    one: ``"ERR_…"``, ``"INTERNAL_ERROR"``, any catalogue value (``"INVALID_LOOP"``), or ``"ERR_…: message"``
    (an f-string's first part included)."""
    module = ast.parse(source)
    skip = _docstring_ids(module) | _dunder_all_ids(module)
    values = {c.value for c in Code}
    found = []
    for node in ast.walk(module):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
            head = re.match(r"(ERR_[A-Z0-9_]+|INTERNAL_ERROR)(:|$)", text)
            if text in values or head is not None:
                found.append((node.lineno, text))
    return found


def test_the_scan_finds_what_it_must_and_nothing_else() -> None:
    source = '''"""Module docstring naming ERR_DOC."""
__all__ = ["ERR_EXPORTED"]
A = "ERR_A"
B = f"ERR_B: {A} happened"
C = "INVALID_LOOP"
D = "INTERNAL_ERROR"
E = "see ERR_E in the docs"
def f():
    """ERR_IN_DOCSTRING"""
    return {"code": "ERR_F"}
'''
    assert [text for _, text in sorted(code_literals(source))] == ["ERR_A", "ERR_B: ", "INVALID_LOOP", "INTERNAL_ERROR",
                                                           "ERR_F"]


def test_no_code_literal_outside_the_catalogue() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path in CATALOGUE_MODULES:
            continue
        for line, text in code_literals(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert offenders == [], "write telo.errors.Code members instead (python /work/notes/codemod_errors.py):\n" + \
        "\n".join(offenders)


# --- (b) the catalogue's own rules ----------------------------------------------------------------------------


def test_member_names_follow_their_values() -> None:
    """``Code.X`` is ``"ERR_X"``; the few upstream named otherwise keep their wire string, and their member
    reads as the others do (noun first)."""
    upstream = {"INTERNAL": "INTERNAL_ERROR", "THROW_STEP_INVALID": "INVALID_THROW_STEP",
                "LOOP_INVALID": "INVALID_LOOP", "CONCURRENCY_INVALID": "INVALID_CONCURRENCY",
                "COLLECTION_INVALID": "INVALID_COLLECTION"}
    assert {c.name: c.value for c in UPSTREAM_NAMED} == upstream
    for code in Code:
        if code in UPSTREAM_NAMED:
            continue
        assert re.fullmatch(r"ERR_[A-Z][A-Z0-9]*(_[A-Z0-9]+)*", code.value), code
        assert code.value == f"ERR_{code.name}", code


def test_values_are_unique_and_plain_strings() -> None:
    values = [c.value for c in Code]
    assert len(values) == len(set(values))
    assert all(type(v) is str for v in values)
    assert all(type(str(c)) is str and str(c) == c.value for c in Code)


def test_every_member_says_when_it_is_raised_and_what_to_do() -> None:
    for code in Code:
        assert code.when.strip() and code.hint.strip(), code
        assert "\n" not in code.when + code.hint, code


def test_spec_codes_are_the_spec_lists_and_say_so() -> None:
    assert tuple(c.value for c in SPEC_CODES) == SPEC_LIST
    assert errors.SPEC_CODES == SPEC_CODES
    for code in Code:
        cites_spec = code.when.startswith(("spec §9:", "spec §6.5:"))
        assert cites_spec == (code in SPEC_CODES), code


def test_the_old_constants_are_aliases_of_the_members() -> None:
    assert errors.ERR_DURABLE_JOURNAL_CORRUPT is Code.DURABLE_JOURNAL_CORRUPT
    assert errors.ERR_INTERNAL is Code.INTERNAL
    assert errors.Code is Code
    for name in dir(errors):
        if name.startswith("ERR_"):
            value = getattr(errors, name)
            assert isinstance(value, Code), name


def test_a_class_that_fixes_its_code_is_raised_with_the_message_alone() -> None:
    exc = errors.JournalCorrupt("line 3 is not JSON")
    assert exc.code == "ERR_DURABLE_JOURNAL_CORRUPT" and exc.message == "line 3 is not JSON"
    assert type(exc.code) is str  # what a journaled run record or a CEL scope can hold
    named = errors.TeloError(Code.NO_MATCH, "m")
    assert type(named.code) is str and named.to_dict() == {"code": "ERR_NO_MATCH", "message": "m"}
    assert errors.TeloError(code="ERR_BUSY", message="m").code == "ERR_BUSY"  # keywords, as before the catalogue
    again = errors.error_from_dict(exc.to_dict())
    assert type(again) is errors.JournalCorrupt and again.to_dict() == exc.to_dict()


# --- (c) docs/errors.md is the catalogue's table; other docs name catalogue codes only ------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_errors_doc() -> str:
    lines = [
        "# Error codes",
        "",
        "Every code telo raises, reports or recognises, in the order of the catalogue `telo.errors.Code` (each",
        "member's value is the code's exact string). A `catch` sees it as `error.code`; the CLI prints it first",
        "(`ERR_…: message`) and in `--json`; a failed run's record keeps it. The codes of the spec (§9, §6.5)",
        "say so; a manifest may `throw` codes of its own.",
        "",
        "Generated from the catalogue by tests/unit/test_error_catalogue.py (which fails when this file is",
        "stale): `TELO_REGENERATE_DOCS=1 pytest tests/unit/test_error_catalogue.py`.",
        "",
        "| Code | When raised | Hint |",
        "|---|---|---|",
    ]
    lines += [f"| `{c.value}` | {_cell(c.when)} | {_cell(c.hint)} |" for c in Code]
    return "\n".join(lines) + "\n"


def test_docs_errors_md_is_current() -> None:
    expected = render_errors_doc()
    if os.environ.get("TELO_REGENERATE_DOCS"):
        ERRORS_DOC.write_text(expected, encoding="utf-8")
    assert ERRORS_DOC.read_text(encoding="utf-8") == expected, (
        "docs/errors.md is stale: TELO_REGENERATE_DOCS=1 pytest tests/unit/test_error_catalogue.py")


def test_docs_errors_md_lists_exactly_the_catalogue() -> None:
    listed = re.findall(r"^\| `([A-Z0-9_]+)` \|", ERRORS_DOC.read_text(encoding="utf-8"), re.MULTILINE)
    assert listed == [c.value for c in Code]


@pytest.mark.parametrize("doc", sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"]), ids=lambda p: p.name)
def test_every_code_a_doc_names_is_in_the_catalogue(doc: Path) -> None:
    named = set(CODE_WORD.findall(doc.read_text(encoding="utf-8")))
    unknown = named - {c.value for c in Code} - EXAMPLE_CODES
    assert unknown == set(), f"{doc.name} names codes telo does not have"


def test_codes_enter_plain_data_as_exact_strings() -> None:
    """Run records and diagnostics are journaled or printed as plain data: a Code member is stored as its str."""
    from telo.journal.model import Outcome
    from telo.manifest.diagnostics import Diagnostic

    failed = Outcome.failed(Code.INTERNAL, "boom")
    assert failed.error == {"code": "INTERNAL_ERROR", "message": "boom"} and type(failed.error["code"]) is str
    cancelled = Outcome.cancelled("by hand")
    assert cancelled.error is not None and type(cancelled.error["code"]) is str
    diagnostic = Diagnostic(Code.MANIFEST_YAML, "bad", None)
    assert type(diagnostic.code) is str and diagnostic.to_dict()["code"] == "ERR_MANIFEST_YAML"


def test_the_cli_log_line_shows_a_code_as_its_string() -> None:
    import logging

    from telo.cli.logs import _Line

    record = logging.LogRecord("telo", logging.WARNING, __file__, 1, "durable.claim.lost", None, None)
    record.__dict__["error.code"] = Code.DURABLE_CLAIM_LOST
    assert _Line().format(record) == "telo: durable.claim.lost error.code='ERR_DURABLE_CLAIM_LOST'"
