"""``Assert.Equals`` and ``Assert.Events`` (reference §14): what the YAML scenario tests assert with."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from telo.errors import Code, TeloError
from telo.runtime.resource import Resource
from telo.values import Uint

if TYPE_CHECKING:
    from telo.runtime.resource import Host


def same(a: Any, b: Any) -> bool:
    """Deep equality for assertions: numbers compare by value across int/uint/double (a CEL int equals a YAML
    integer literal of the same value), bool is never a number, maps need the same key set in any order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float | Uint) and isinstance(b, int | float | Uint):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return len(a) == len(b) and all(k in b and same(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def show(value: Any) -> str:
    from telo.values import to_plain

    try:
        return json.dumps(to_plain(value), ensure_ascii=False, sort_keys=True)
    except Exception:
        return repr(value)


class Equals(Resource):
    kind = "Assert.Equals"

    async def invoke(self, inputs: Any) -> Any:
        inputs = inputs if isinstance(inputs, Mapping) else {}
        actual, expected = inputs.get("actual"), inputs.get("expected")
        if not same(actual, expected):
            print(f"✗ {self.name}: expected {show(expected)}, got {show(actual)}", flush=True)
            raise TeloError(Code.ASSERTION_FAILED, f"{self.name}: expected {show(expected)}, got {show(actual)}",
                            data={"resource": self.name})
        print(f"✓ {self.name}", flush=True)
        return True


def _pattern_matches(pattern: str, name: str) -> bool:
    if pattern == "*":
        return True
    ps, ns = pattern.split("."), name.split(".")
    return len(ps) == len(ns) and all(p == "*" or p == n for p, n in zip(ps, ns, strict=True))


def _subset(expected: Any, actual: Any) -> bool:
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(k in actual and _subset(v, actual[k]) for k, v in expected.items())
    return same(expected, actual)


class Events(Resource):
    """Captures every kernel event from boot; as a later target, checks counts and ordered matches."""

    kind = "Assert.Events"

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None) -> None:
        super().__init__(app, name, config, module)
        self.captured: list[tuple[str, Mapping[str, Any]]] = []
        filters = [f.get("type", "*") for f in config.get("filter") or [{"type": "*"}]]
        self._unsubscribe = app.events.subscribe(
            lambda n, p: self.captured.append((n, p)) if any(_pattern_matches(f, n) for f in filters) else None
        )

    async def run(self) -> None:
        failures: list[str] = []
        position = 0
        for exp in self.config.get("expect") or []:
            event, payload = exp.get("event", "*"), exp.get("payload")
            matching = [i for i, (n, p) in enumerate(self.captured)
                        if _pattern_matches(event, n) and (payload is None or _subset(payload, p))]
            if "times" in exp:
                if len(matching) != exp["times"]:
                    failures.append(f"{event}: expected {exp['times']} time(s), saw {len(matching)}")
                continue
            later = [i for i in matching if i >= position]
            if not later:
                failures.append(f"{event}: expected in order after event #{position}, not seen")
            else:
                position = later[0] + 1
        if failures:
            report = "\n".join(f"  ✗ {f}" for f in failures)
            print(f"✗ {self.name}: events did not match\n{report}", file=sys.stderr, flush=True)
            self.app.request_exit(1)
        else:
            print(f"✓ {self.name}: events matched", flush=True)

    async def teardown(self) -> None:
        self._unsubscribe()
