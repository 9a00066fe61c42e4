"""``Console.WriteLine`` (reference §13): ``{style text}`` markup, ANSI on a TTY, plain otherwise."""

from __future__ import annotations

import re
import sys
from typing import Any

from telo.errors import Code, TeloError
from telo.runtime.resource import Resource

_STYLES = {
    "bold": "1", "dim": "2", "italic": "3", "underline": "4", "red": "31", "green": "32", "yellow": "33",
    "blue": "34", "magenta": "35", "cyan": "36", "white": "37", "gray": "90", "grey": "90",
}
# `{style text}`, innermost first so nesting works; text may not contain braces.
_MARKUP = re.compile(r"\{([a-zA-Z]+(?:\.[a-zA-Z]+)*) ([^{}]*)\}")


def render(text: str, *, ansi: bool) -> str:
    def one(m: re.Match[str]) -> str:
        styles = m.group(1).split(".")
        if not all(s in _STYLES for s in styles):
            return m.group(0)
        if not ansi:
            return m.group(2)
        return "".join(f"\x1b[{_STYLES[s]}m" for s in styles) + m.group(2) + "\x1b[0m"

    previous = None
    while previous != text:
        previous, text = text, _MARKUP.sub(one, text)
    return text


class WriteLine(Resource):
    kind = "Console.WriteLine"

    async def invoke(self, inputs: Any) -> Any:
        if not isinstance(inputs, dict) or not isinstance(inputs.get("output"), str):
            raise TeloError(Code.INPUT_INVALID, f"Console.WriteLine {self.name!r} needs inputs {{output: string}}",
                            data={"resource": self.name})
        output: str = inputs["output"]
        line = render(output, ansi=sys.stdout.isatty())
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        self.app.events.emit(f"{self.name}.LineWritten", {"line": line})
        return output
