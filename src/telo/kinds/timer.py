"""``Timer.Delay`` (reference §13): wait in process, return ``{value}``."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from telo.errors import Code, TeloError
from telo.runtime.resource import Resource

_DELAY = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_delay(text: Any) -> float:
    m = _DELAY.fullmatch(text) if isinstance(text, str) else None
    if not m:
        raise TeloError(Code.INVALID_INPUT, f"Timer.Delay duration must look like 250ms, 2s, 1m or 1h, got {text!r}")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


class Delay(Resource):
    kind = "Timer.Delay"

    async def invoke(self, inputs: Any) -> Any:
        inputs = inputs if isinstance(inputs, dict) else {}
        await asyncio.sleep(parse_delay(inputs.get("duration")))
        return {"value": inputs.get("value")}
