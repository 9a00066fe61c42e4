"""The one CEL adapter (ARCHITECTURE §2-3; telo-reference §2; spec §4, §6).

Only this package imports the CEL library (``cel-expr-python``, Google's cel-cpp), and only through
:mod:`telo.cel._lib`; the facade below is all the rest of telo uses, so a fallback library stays possible::

    env = CelEnvironment()                                  # the engine's scope names; extra: {"x": "dyn"}
    program = env.compile("'order:' + inputs.order", source="orders.yaml", line=12, column=9)
    scope = Scope(inputs={"order": "o-1"}).with_step_result("charge", {"ok": True})
    program.evaluate(scope, clock=clock)                    # -> 'order:o-1'
    program.calls, program.deterministic                    # for DURABLE_NONDETERMINISM (reference §12)

* :class:`CelEnvironment` — declarations; :meth:`~CelEnvironment.compile` parses AND type-checks (load time),
  raising :class:`CelCompileError` (``ERR_CEL_COMPILE``) at the manifest position.
* :class:`Program` — :meth:`~Program.evaluate` returns a domain value (:mod:`telo.values.types`) or raises
  :class:`CelEvalError` (``ERR_CEL_NO_SUCH_KEY``, ``ERR_CEL_OVERFLOW``, ``ERR_CEL_EVAL``).
* :class:`Scope` — the variables, converted once and extended per step (the fast path).
* :data:`FUNCTIONS` — the Telo catalog with determinism flags.

Authoring limits worth knowing (the library's): at most 32 chained binary operators or nested brackets
(``'a' + 'b' + …`` beyond that does not compile: use ``[a, b, …].join('')``); no function sees a failed
argument, so ``default(inputs.missing, 'x')`` fails — use ``inputs.?missing.orValue('x')``.
"""

from telo.cel.catalog import FUNCTIONS, FunctionInfo
from telo.cel.env import STANDARD_VARIABLES, TYPE_NAMES, CelEnvironment, Program
from telo.cel.errors import (
    ERR_CEL_COMPILE,
    ERR_CEL_EVAL,
    ERR_CEL_NO_SUCH_KEY,
    ERR_CEL_OVERFLOW,
    CelCompileError,
    CelError,
    CelEvalError,
    SourcePos,
)
from telo.cel.scope import Scope

__all__ = [
    "ERR_CEL_COMPILE",
    "ERR_CEL_EVAL",
    "ERR_CEL_NO_SUCH_KEY",
    "ERR_CEL_OVERFLOW",
    "FUNCTIONS",
    "STANDARD_VARIABLES",
    "TYPE_NAMES",
    "CelCompileError",
    "CelEnvironment",
    "CelError",
    "CelEvalError",
    "FunctionInfo",
    "Program",
    "Scope",
    "SourcePos",
]
