"""Step structures in Python: the same configuration data the YAML loader reads (reference §3).

Every function returns plain data — dicts and lists with :class:`~telo.manifest.Cel` and
:class:`~telo.manifest.Ref` leaves — exactly what the loader makes of the equivalent YAML, so the engine
compiles both identically and a run writes the same journal whichever way its workflow was written::

    from telo.builder import cel, if_, invoke, retry, value, workflow

    wf = workflow("order", run_id=cel("'order:' + inputs.order"), steps=[
        invoke("charge", "chargeCard", {"order": cel("inputs.order")}, retry=retry(3, initial_delay=200)),
        if_("big", "steps.charge.result.amount > 100",
            then=[value("note", "review")], else_=[value("note", "ok")]),
    ])
    app.add(wf)            # or: app.workflow("order", steps=[...], run_id=...)

is the YAML::

    kind: Local.Workflow
    metadata: { name: order }
    runId: !cel "'order:' + inputs.order"
    steps:
      - name: charge
        invoke: !ref chargeCard
        inputs: { order: !cel "inputs.order" }
        retry: { attempts: 3, initialDelay: 200 }
      - name: big
        if: !cel "steps.charge.result.amount > 100"
        then: [{ name: note, value: review }]
        else: [{ name: note, value: ok }]

Conventions:

* **Expression slots take CEL text.** A field that only makes sense as an expression — ``if``/``elseif``/
  ``while`` conditions, a ``switch`` key, ``when``, an iteration's ``collection`` — turns a ``str`` into
  ``cel(str)`` (a ``bool`` stays a constant). Everywhere else (``inputs``, ``value``, ``runId`` …) a string is
  a string: write ``cel("…")`` for an expression, as ``!cel`` in YAML.
* **Targets.** ``invoke``'s target is a resource name (``"chargeCard"`` → ``!ref chargeCard``), a
  :func:`ref`, a function decorated with ``@telo.kind`` (an inline ``{kind: Module.Kind}``), or an inline
  resource (:func:`iteration`, :func:`resource`).
* **Kinds** may be written by canonical name (``Run.Iteration``, ``DurableLocal.Workflow``) when the
  document is added with ``App.add``/``App.workflow``, whatever aliases the manifest imports.
* Python keywords get a trailing underscore (``if_``, ``while_``, ``try_``, ``else_``, ``finally_``); the
  data they produce uses the YAML keys.
* ``cel``/``ref`` nodes (and the documents of :func:`workflow`/:func:`resource`) carry the ``file:line`` of the
  Python call that made them, so a compile error points at your code.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from telo.manifest import Cel, Pos, Ref

Step = dict[str, Any]
Steps = Sequence[Step]

__all__ = [
    "Document",
    "cel",
    "if_",
    "invoke",
    "iteration",
    "ref",
    "resource",
    "retry",
    "step",
    "switch",
    "throw",
    "try_",
    "value",
    "while_",
    "workflow",
]


class Document(dict[str, Any]):
    """A resource document (``{kind, metadata, …}``) that remembers where in Python it was built."""

    __telo_pos__: Pos | None = None


def _caller() -> Pos:
    """The first frame outside this module: where the user's code called the builder."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return Pos(frame.f_code.co_filename, frame.f_lineno, 1)


# --- leaves ------------------------------------------------------------------------------------------------


def cel(text: str) -> Cel:
    """A CEL expression: ``cel("inputs.order")`` is ``!cel "inputs.order"``."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"cel() takes the expression's text, got {text!r}")
    return Cel(text, _caller())


def ref(name: str) -> Ref:
    """A reference to a resource: ``ref("charge")`` is ``!ref charge``; ``ref("Lib.name")`` names a library's
    exported resource."""
    alias, dot, short = name.rpartition(".")
    return Ref(short, alias if dot else None, _caller())


def _expr(node: Any) -> Any:
    """An expression slot: text is CEL; a constant (bool …) or a node stays as it is."""
    return Cel(node, _caller()) if isinstance(node, str) else node


def _data(node: Any) -> Any:
    """Configuration data as the YAML reader makes it: tuples become lists, mappings plain dicts."""
    if isinstance(node, Mapping) and not isinstance(node, Document):
        return {k: _data(v) for k, v in node.items()}
    if isinstance(node, Document):
        out = Document({k: _data(v) for k, v in node.items()})
        out.__telo_pos__ = node.__telo_pos__
        return out
    if isinstance(node, list | tuple):
        return [_data(v) for v in node]
    return node


def _steps(steps: Iterable[Step]) -> list[Step]:
    if isinstance(steps, Mapping):
        raise TypeError("a step list is a list of steps, not one step: wrap it in [ ]")
    return [_data(s) for s in steps]


def _put(out: dict[str, Any], key: str, node: Any) -> None:
    if node is not None:
        out[key] = node


# --- steps -------------------------------------------------------------------------------------------------

_KEYWORDS = {"if_": "if", "else_": "else", "while_": "while", "try_": "try", "finally_": "finally"}


def step(name: str, **fields: Any) -> Step:
    """Any step, fields spelled as in YAML (``if_``/``else_``/… for the Python keywords), values as given:
    the escape hatch for what the other helpers do not cover."""
    return {"name": name, **{_KEYWORDS.get(k, k): _data(v) for k, v in fields.items() if v is not None}}


def invoke(
    name: str,
    target: Any,
    inputs: Any = None,
    *,
    when: Any = None,
    retry: Mapping[str, Any] | None = None,
    timeout: int | float | str | None = None,
    on_unconfirmed: str | None = None,
) -> Step:
    """``{name, invoke, inputs?, when?, retry?, timeout?, onUnconfirmed?}``; see the module docstring for
    ``target``. ``timeout`` is milliseconds or a duration text (``"5s"``)."""
    out: Step = {"name": name, "invoke": _target(target)}
    _put(out, "inputs", _data(inputs))
    _put(out, "when", _expr(when))
    _put(out, "retry", _data(retry))
    _put(out, "timeout", timeout)
    _put(out, "onUnconfirmed", on_unconfirmed)
    return out


KIND_ATTRIBUTE = "__telo_kind__"  # where @telo.kind (telo.api.kinds, a layer above) leaves its definition


@runtime_checkable
class KindDefinition(Protocol):
    """What this module reads of an ``@telo.kind`` definition: the kind's canonical name."""

    @property
    def canonical(self) -> str: ...

    @property
    def fn(self) -> Callable[..., Any]: ...


def _kind_definition(target: Any) -> KindDefinition | None:
    found = getattr(target, KIND_ATTRIBUTE, target)
    return found if isinstance(found, KindDefinition) else None


def _target(target: Any) -> Any:
    if isinstance(target, str):
        alias, dot, short = target.rpartition(".")
        return Ref(short, alias if dot else None, _caller())
    if isinstance(target, Ref):
        return target
    found = _kind_definition(target)
    if found is not None:
        return {"kind": found.canonical}
    if isinstance(target, Mapping) and "kind" in target:
        return _data(target)
    raise TypeError(f"invoke target {target!r}: pass a resource name, ref(...), an @telo.kind function, or an "
                    "inline resource ({'kind': ...})")


def if_(name: str, condition: Any, then: Steps, *, elseif: Sequence[tuple[Any, Steps]] = (),
        else_: Steps | None = None) -> Step:
    """``{name, if, then, elseif?: [{if, then}], else?}``."""
    out: Step = {"name": name, "if": _expr(condition), "then": _steps(then)}
    if elseif:
        out["elseif"] = [{"if": _expr(c), "then": _steps(body)} for c, body in elseif]
    if else_ is not None:
        out["else"] = _steps(else_)
    return out


def while_(name: str, condition: Any, do: Steps) -> Step:
    """``{name, while, do}``: each turn's body is journaled under ``<step>/do[<turn>]``."""
    return {"name": name, "while": _expr(condition), "do": _steps(do)}


def switch(name: str, key: Any, cases: Mapping[Any, Steps], default: Steps | None = None) -> Step:
    """``{name, switch, cases, default?}``; a case key is matched as upstream converts the value to text."""
    out: Step = {"name": name, "switch": _expr(key), "cases": {k: _steps(v) for k, v in cases.items()}}
    if default is not None:
        out["default"] = _steps(default)
    return out


def try_(name: str, body: Steps, *, catch: Steps | None = None, finally_: Steps | None = None,
         when: Any = None) -> Step:
    """``{name, try, catch?, finally?, when?}``; ``catch`` and ``finally`` bodies see ``error``."""
    out: Step = {"name": name, "try": _steps(body)}
    if catch is not None:
        out["catch"] = _steps(catch)
    if finally_ is not None:
        out["finally"] = _steps(finally_)
    _put(out, "when", _expr(when))
    return out


def value(name: str, v: Any) -> Step:
    """``{name, value}``: a computed value, journaled as a decision (``cel(...)`` for an expression)."""
    return {"name": name, "value": _data(v)}


def throw(name: str, code: Any, message: Any = None, *, data: Any = None) -> Step:
    """``{name, throw: {code, message?, data?}}``."""
    error: dict[str, Any] = {"code": code}
    _put(error, "message", message)
    _put(error, "data", _data(data))
    return {"name": name, "throw": error}


def retry(
    attempts: int,
    *,
    initial_delay: int | float | str | None = None,
    factor: float | None = None,
    max_delay: int | float | str | None = None,
    jitter: str | None = None,
    non_retryable: Iterable[str] | None = None,
) -> dict[str, Any]:
    """A step's ``retry:`` policy: ``{attempts, initialDelay?, factor?, maxDelay?, jitter?, nonRetryable?}``
    (delays in milliseconds or duration text)."""
    out: dict[str, Any] = {"attempts": attempts}
    _put(out, "initialDelay", initial_delay)
    _put(out, "factor", factor)
    _put(out, "maxDelay", max_delay)
    _put(out, "jitter", jitter)
    if non_retryable is not None:
        out["nonRetryable"] = list(non_retryable)
    return out


# --- resources ---------------------------------------------------------------------------------------------


def resource(kind: str, name: str | None = None, **config: Any) -> Document:
    """A resource document ``{kind, metadata: {name}, …config}``; without ``name`` it is an inline resource
    (for an ``invoke`` target or another reference slot), named by the loader per spec §5.3. Config keys are
    given as in YAML (``resource("Run.Sequence", "billing", steps=[...], outputs=cel(...))``)."""
    doc = Document({"kind": kind})
    if name is not None:
        doc["metadata"] = {"name": name}
    doc.update({k: _data(v) for k, v in config.items() if v is not None})
    doc.__telo_pos__ = _caller()
    return doc


def iteration(collection: Any, steps: Steps, *, concurrency: int | None = None, outputs: Any = None,
              catches: Sequence[Mapping[str, Any]] | None = None, kind: str = "Run.Iteration",
              name: str | None = None) -> Document:
    """An inline ``Run.Iteration`` (or ``kind="Run.Projection"``): ``steps`` run once per item of
    ``collection`` (evaluated against the ``inputs`` the invoking step passes), seeing ``item`` and
    ``index``; each turn is journaled under ``<step>[<index>]``."""
    return resource(kind, name, collection=_expr(collection), steps=_steps(steps), concurrency=concurrency,
                    outputs=outputs, catches=catches)


def workflow(
    name: str,
    steps: Steps,
    *,
    journal: str | Ref | None = None,
    run_id: Any = None,
    inputs: Any = None,
    on_conflict: str | None = None,
    kind: str = "DurableLocal.Workflow",
) -> Document:
    """A durable workflow document (``Local.Workflow``). ``journal`` names the journal resource; left out,
    ``App.add`` uses the manifest's only journal."""
    doc = resource(kind, name, steps=_steps(steps), runId=run_id, inputs=inputs, onConflict=on_conflict)
    if journal is not None:
        doc["journal"] = journal if isinstance(journal, Ref) else _target(journal)
    return doc
