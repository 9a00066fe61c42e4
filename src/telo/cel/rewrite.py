"""Exact ``default(v, fallback)`` and ``coalesce(list)``: evaluated as CEL, not through a Python function.

A Python function receives the library's lossy plain conversion of its arguments (a uint arrives as an int, a
timestamp as a microsecond ``datetime``) and could only hand that back. So a program calling either is
evaluated in a rewritten, equivalent form that never leaves CEL (the author's text is what is checked,
reported and analysed; only the evaluated text differs):

* ``default(A, B)``  →  ``cel.bind(__telo_d, (A), type(__telo_d) == null_type ? dyn(B) : dyn(__telo_d))``
* ``coalesce(L)``    →  ``cel.bind(__telo_c, (L), type(__telo_c) == list ? (<first non-null of __telo_c, or
  null>) : coalesce(__telo_c))`` — a non-list still reaches the function, which reports the wrong type.

One difference is on purpose: ``B`` is evaluated only when ``A`` is null, so a fallback that would fail does not
fail the expression when it is not needed. Call sites come from the checked AST (the parser gives a call's
``(``); arguments are delimited by a small CEL lexer (strings in every quoting, comments, brackets). Nested
calls are rewritten innermost first, recompiling in between. If anything does not line up, the original text
is evaluated (through the Python implementations) rather than a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from telo.cel.analysis import call_sites

__all__ = ["REWRITTEN", "exact_text"]

REWRITTEN: Final = frozenset({"default", "coalesce"})
_OUR_NAMES: Final = "__telo_"
_MAX_REWRITES: Final = 64


def exact_text(text: str, calls: frozenset[str], compile_text: Callable[[str], Any]) -> str:
    """The text to evaluate for ``text`` (itself unless it calls ``default``/``coalesce``)."""
    if not calls & REWRITTEN:
        return text
    current = text
    for _ in range(_MAX_REWRITES):
        try:
            serialized = compile_text(current).serialize()
        except RuntimeError:
            return text
        spans = []
        for function, paren in call_sites(serialized, REWRITTEN):
            span = _call_span(current, function, paren)
            if span is None:
                return text
            start, args, end = span
            if args and all(arg.strip().startswith(_OUR_NAMES) for arg in args):
                continue  # our own coalesce(__telo_c) fallback
            spans.append((function, start, args, end))
        if not spans:
            return current
        # innermost: a span that contains no other span
        function, start, args, end = min(spans, key=lambda s: s[3] - s[1])
        replacement = _replacement(function, args)
        if replacement is None:
            return text
        current = current[:start] + replacement + current[end:]
    return text


def _replacement(function: str, args: list[str]) -> str | None:
    if function == "default" and len(args) == 2:
        a, b = args
        return f"cel.bind(__telo_d, ({a}), type(__telo_d) == null_type ? dyn({b}) : dyn(__telo_d))"
    if function == "coalesce" and len(args) == 1:
        present = "type(__telo_e) != null_type"
        first = (
            f"(__telo_c.exists(__telo_e, {present}) ? dyn(__telo_c.filter(__telo_e, {present})[0]) : dyn(null))"
        )
        return f"cel.bind(__telo_c, ({args[0]}), type(__telo_c) == list ? {first} : coalesce(__telo_c))"
    return None


def _call_span(text: str, function: str, paren: int) -> tuple[int, list[str], int] | None:
    """``(start of the function name, argument texts, end after ')')`` of the call whose ``(`` is at ``paren``."""
    if not (0 <= paren < len(text)) or text[paren] != "(":
        return None
    i = paren - 1
    while i >= 0 and text[i].isspace():
        i -= 1
    start = i + 1 - len(function)
    if start < 0 or text[start : i + 1] != function:
        return None
    if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_."):
        return None
    args: list[str] = []
    depth = 0
    arg_start = paren + 1
    j = paren + 1
    n = len(text)
    while j < n:
        c = text[j]
        if c in "'\"" or (c in "rRbB" and _string_prefix(text, j)):
            j = _skip_string(text, j)
            if j < 0:
                return None
            continue
        if c == "/" and text.startswith("//", j):
            newline = text.find("\n", j)
            j = n if newline < 0 else newline
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                if c != ")":
                    return None
                last = text[arg_start:j]
                if last.strip() or args:
                    args.append(last)
                return start, args, j + 1
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[arg_start:j])
            arg_start = j + 1
        j += 1
    return None


def _string_prefix(text: str, i: int) -> bool:
    """Whether a string literal with an ``r``/``b`` prefix starts at ``i`` (and not an identifier)."""
    if i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
        return False
    j = i
    while j < len(text) and j - i < 2 and text[j] in "rRbB":
        j += 1
    return j < len(text) and text[j] in "'\""


def _skip_string(text: str, i: int) -> int:
    """The index after the string literal starting at ``i`` (prefix included), or -1 if it never ends."""
    raw = False
    while text[i] in "rRbB":
        raw = raw or text[i] in "rR"
        i += 1
    quote = text[i] * 3 if text.startswith(text[i] * 3, i) else text[i]
    j = i + len(quote)
    while j < len(text):
        if not raw and text[j] == "\\":
            j += 2
            continue
        if text.startswith(quote, j):
            return j + len(quote)
        if len(quote) == 1 and text[j] == "\n":
            return -1
        j += 1
    return -1
