"""Statement text for the ``sql`` kinds: bound statements, hand-written placeholders, built SELECTs.

Pure text work, no driver (:mod:`telo.kinds.sql_drivers` runs what this produces). Every statement leaves here
in the placeholder style its driver executes — SQLite ``?``, PostgreSQL (psycopg) ``%s`` — with its parameters
in a list, so a value is always a parameter and never part of the text:

* :func:`render_bound` — a ``!sql`` text's bound statement ``{"text": [fragments], "bindings": [values]}``
  (:class:`telo.manifest.SqlText`): the fragments joined by the driver's placeholder;
* :func:`positional` — upstream's hand-written placeholders with a ``bindings`` list: ``?`` on SQLite as
  written, ``$1, $2 …`` on PostgreSQL rewritten to psycopg's ``%s`` (each occurrence bound in order, so ``$1``
  twice binds its value twice);
* :func:`selection` — ``Sql.Selection``'s SELECT, identifiers checked and double-quoted.

psycopg reads ``%`` anywhere in a statement given parameters as the start of a placeholder, literals included,
so PostgreSQL text is escaped (``%`` → ``%%``) wherever parameters are passed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeGuard

from telo.errors import Code, TeloError
from telo.specs.sql import SELECTION_OPS

Driver = Literal["sqlite", "postgres"]
PARAM_INVALID = Code.SQL_PARAM_INVALID

# An identifier Sql.Selection accepts: `name` or `schema.name` (quoted on the way out, so case is kept).
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?")
# What a PostgreSQL statement holds that a `$n` scan must step over: quoted literals and identifiers,
# dollar-quoted bodies, comments — and the `$n` placeholders themselves.
_PG_TOKENS = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*\$[A-Za-z0-9_$]*"  # an identifier holding a `$` (price$1): not a placeholder
    r"|[Ee]'(?:[^'\\]|\\.|'')*'"  # E'text' (backslash escapes, \' inside)
    r"|'(?:[^']|'')*'"  # 'text' ('' inside)
    r"|\"(?:[^\"]|\"\")*\""  # "identifier"
    r"|--[^\n]*"  # -- comment
    r"|/\*.*?\*/"  # /* comment */ (not nested)
    r"|(\$[A-Za-z_]?[A-Za-z0-9_]*\$).*?\1"  # $tag$ body $tag$ (and $$ body $$)
    r"|\$(\d+)",  # $1
    re.DOTALL,
)


def is_bound(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """Whether ``value`` is a ``!sql`` text's bound statement."""
    if not isinstance(value, Mapping) or set(value) != {"text", "bindings"}:
        return False
    text, bindings = value["text"], value["bindings"]
    return (isinstance(text, list) and isinstance(bindings, list) and len(text) == len(bindings) + 1
            and all(isinstance(t, str) for t in text))


def render_bound(driver: Driver, bound: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """The statement text and its parameters for a bound statement (:func:`is_bound`)."""
    fragments: list[str] = list(bound["text"])
    if driver == "postgres" and len(fragments) > 1:  # psycopg reads % only when parameters are passed
        return "%s".join(f.replace("%", "%%") for f in fragments), list(bound["bindings"])
    return "?".join(fragments), list(bound["bindings"])


def positional(driver: Driver, sql: str, bindings: Sequence[Any], where: str) -> tuple[str, list[Any]]:
    """A hand-written statement with upstream's placeholders and its ``bindings``, in the driver's style."""
    if driver == "sqlite":
        return sql, list(bindings)
    out: list[str] = []
    params: list[Any] = []
    cursor = 0
    for match in _PG_TOKENS.finditer(sql):
        number = match.group(2)
        if number is None:
            continue
        index = int(number)
        if not 1 <= index <= len(bindings):
            raise TeloError(PARAM_INVALID, f"{where}: the statement uses ${index}, but `bindings` has "
                            f"{len(bindings)} value(s)", hint="give one binding per $n placeholder, in order")
        out.append(sql[cursor:match.start()].replace("%", "%%"))
        out.append("%s")
        params.append(bindings[index - 1])
        cursor = match.end()
    if not params:  # psycopg reads % only when parameters are passed
        if bindings:
            raise TeloError(PARAM_INVALID, f"{where}: `bindings` has {len(bindings)} value(s), but the statement "
                            "has no $n placeholder", hint="write $1, $2 … where the values go, or drop `bindings`")
        return sql, []
    out.append(sql[cursor:].replace("%", "%%"))
    return "".join(out), params


def identifier(name: Any, where: str) -> str:
    """``name`` double-quoted (``schema.name`` part by part); anything but a plain identifier is refused."""
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise TeloError(PARAM_INVALID, f"{where}: {name!r} is not a column or table name",
                        hint="names are letters, digits and _ (optionally schema.name); values go in `value`")
    return ".".join(f'"{part}"' for part in name.split("."))


def selection(driver: Driver, fields: Mapping[str, Any], where: str) -> tuple[str, list[Any]]:
    """``Sql.Selection``'s evaluated fields as one SELECT and its parameters."""
    mark = "%s" if driver == "postgres" else "?"
    params: list[Any] = []
    columns = fields.get("columns") or []
    head = "SELECT "
    distinct_on = fields.get("distinctOn") or []
    if distinct_on:
        if driver != "postgres":
            raise TeloError(PARAM_INVALID, f"{where}: `distinctOn` is PostgreSQL's; SQLite has no DISTINCT ON")
        head += f"DISTINCT ON ({', '.join(identifier(c, where) for c in distinct_on)}) "
    elif fields.get("distinct"):
        head += "DISTINCT "
    text = head + (", ".join(identifier(c, where) for c in columns) if columns else "*")
    text += f" FROM {identifier(fields.get('from'), where)}"
    conditions = _conditions(driver, fields.get("where") or [], params, where)
    if conditions:
        text += f" WHERE {conditions}"
    group = fields.get("groupBy") or []
    if group:
        text += f" GROUP BY {', '.join(identifier(c, where) for c in group)}"
    having = _conditions(driver, fields.get("having") or [], params, where)
    if having:
        text += f" HAVING {having}"
    order = [_order(o, where) for o in fields.get("orderBy") or []]
    if order:
        text += f" ORDER BY {', '.join(order)}"
    for clause in ("limit", "offset"):
        value = fields.get(clause)
        if value is not None:
            if type(value) is not int or value < 0:
                raise TeloError(PARAM_INVALID, f"{where}: `{clause}` must be a non-negative integer, got {value!r}")
            text += f" {clause.upper()} {mark}"
            params.append(value)
    return text, params


def _conditions(driver: Driver, conditions: Sequence[Any], params: list[Any], where: str) -> str:
    mark = "%s" if driver == "postgres" else "?"
    out: list[str] = []
    for condition in conditions:
        if not isinstance(condition, Mapping):
            raise TeloError(PARAM_INVALID, f"{where}: a condition is {{column, op, value}}, got {condition!r}")
        column = identifier(condition.get("column"), where)
        op = condition.get("op", "eq")
        if op not in SELECTION_OPS:
            raise TeloError(PARAM_INVALID, f"{where}: unknown op {op!r}", hint=f"one of {', '.join(SELECTION_OPS)}")
        sql_op = "LIKE" if op == "ilike" and driver == "sqlite" else SELECTION_OPS[op]  # SQLite's LIKE ignores case
        if op in ("is_null", "is_not_null"):
            out.append(f"{column} {sql_op}")
        elif op in ("in", "not_in"):
            values = condition.get("value")
            if not isinstance(values, list):
                raise TeloError(PARAM_INVALID, f"{where}: `{op}` takes a list `value`, got {values!r}")
            if not values:  # IN () is not SQL: an empty list matches nothing (in) or everything (not_in)
                out.append("1 = 0" if op == "in" else "1 = 1")
                continue
            out.append(f"{column} {sql_op} ({', '.join(mark for _ in values)})")
            params.extend(values)
        else:
            out.append(f"{column} {sql_op} {mark}")
            params.append(condition.get("value"))
    return " AND ".join(out)


def _order(item: Any, where: str) -> str:
    if isinstance(item, str):
        return identifier(item, where)
    if isinstance(item, Mapping):
        direction = str(item.get("direction", "asc")).upper()
        if direction not in ("ASC", "DESC"):
            raise TeloError(PARAM_INVALID, f"{where}: direction {item.get('direction')!r} is neither asc nor desc")
        return f"{identifier(item.get('column'), where)} {direction}"
    raise TeloError(PARAM_INVALID, f"{where}: an orderBy item is a column or {{column, direction}}, got {item!r}")
