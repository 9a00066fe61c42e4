"""telo.engine.context: derive() carries every member it does not change (spec §3)."""

from __future__ import annotations

import contextvars
from dataclasses import fields

import pytest

from telo.engine.context import CancelScope, InvokeContext, current, derive, entered, root
from telo.engine.zones import Zone


def _full() -> InvokeContext:
    return InvokeContext(handle=object(), path="steps/a", zones=(Zone("K", {}),), cancel=CancelScope(),  # type: ignore[arg-type]
                         run_id="r1", attempt=3, extras=(("k", 1),))


def test_derive_changes_one_member_and_keeps_all_others() -> None:
    base = _full()
    for f in fields(InvokeContext):
        new = object()
        out = derive(base, **{f.name: new})
        for g in fields(InvokeContext):
            assert getattr(out, g.name) is (new if g is f else getattr(base, g.name)), (f.name, g.name)


def test_derive_appends_zone_and_extra_and_returns_the_base_when_nothing_changes() -> None:
    base = _full()
    zone = Zone("Z", {})
    out = derive(base, zone=zone, extra=("x", 2))
    assert out.zones == (*base.zones, zone) and out.extras == (*base.extras, ("x", 2))
    assert derive(base) is base


def test_derive_refuses_an_unknown_member() -> None:
    with pytest.raises(TypeError):
        derive(root(), nosuch=1)


def test_entered_restores_the_previous_context_even_on_error() -> None:
    def body() -> None:
        outer = current()
        ctx = derive(path="steps/x")
        with pytest.raises(RuntimeError), entered(ctx) as got:
            assert got is ctx and current() is ctx
            raise RuntimeError
        assert current() is outer

    contextvars.copy_context().run(body)
