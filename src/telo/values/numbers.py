"""Number text of the typed frame (spec §6.2, §6.3).

* :func:`double_text` writes a finite double in ECMAScript ``Number::toString`` form (§6.2).
* :func:`read_int_payload` / :func:`read_uint_payload` read the decimal payloads of the ``int`` and ``uint``
  tags (§6.3) and nothing else.

Why ``repr(float)``: CPython's float repr is David Gay's shortest round-trip conversion, which picks the
same digits ECMAScript requires (the shortest that read back, the closer of two candidates, the even one of
two equally close ones). Only the LAYOUT differs: Python switches to exponent form outside
``1e-4 <= |x| < 1e16`` and pads the exponent (``1e-07``), ECMAScript outside ``1e-6 <= |x| < 1e21`` with no
padding (``1e-7``), and Python writes integral doubles as ``5.0``. The conformance corpus (300 doubles,
half of them ties) pins the digits.
"""

from __future__ import annotations

import re
from typing import Final

from telo.values.types import INT64_MAX, INT64_MIN, UINT64_MAX, Uint

__all__ = ["double_text", "read_int_payload", "read_uint_payload", "relayout_exponent_form"]

_float_repr: Final = float.__repr__


def double_text(x: float) -> str:
    """ECMAScript ``Number::toString`` of a finite double (§6.2): ``5``, ``1.5``, ``1e+21``, ``1e-7``.

    ``-0.0`` gives ``"0"`` as ECMAScript does; callers that must keep negative zero (the frame writer tags
    it) check for it first. NaN and infinities are the caller's business too (they have no JSON number).
    """
    r = _float_repr(x)
    if "e" not in r:  # Python wrote plain decimal: 1e-4 <= |x| < 1e16, same layout as ECMAScript
        if r.endswith(".0"):
            r = r[:-2]
            return "0" if r == "-0" else r
        return r
    return relayout_exponent_form(r)


def relayout_exponent_form(r: str) -> str:
    """Re-lay Python's ``d.ddde±XX`` as ECMAScript (Number::toString, ECMA-262 §6.1.6.1.20 steps 6-12)."""
    mantissa, _, exp_text = r.partition("e")
    sign = ""
    if mantissa[0] == "-":
        sign, mantissa = "-", mantissa[1:]
    digits = mantissa.replace(".", "")  # the shortest digits; the first is non-zero
    k = len(digits)
    n = int(exp_text) + 1  # the value is 0.<digits> x 10**n
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        body = f"0.{'0' * -n}{digits}"
    else:
        e = n - 1
        body = f"{digits[0]}{'.' + digits[1:] if k > 1 else ''}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


# §6.3: "0, or an optional - and digits with no leading zero"; ASCII digits only (a str regex's \d would
# also match other scripts' digits). At most 20 digits: longer text cannot be in range, and bounding it
# keeps int() away from CPython's 4300-digit conversion limit.
_INT_TEXT: Final = re.compile(r"-?(?:0|[1-9][0-9]{0,19})")
_UINT_TEXT: Final = re.compile(r"0|[1-9][0-9]{0,19}")


def read_int_payload(text: str) -> int:
    """The ``int`` payload of §6.3 as an ``int``; ``ValueError`` unless it is the canonical int64 text."""
    if not _INT_TEXT.fullmatch(text) or text == "-0":
        raise ValueError(f"not the decimal text of an int64: {text!r}")
    n = int(text)
    if not INT64_MIN <= n <= INT64_MAX:
        raise ValueError(f"int payload out of int64 range: {text!r}")
    return n


def read_uint_payload(text: str) -> Uint:
    """The ``uint`` payload of §6.3 as a :class:`Uint`; ``ValueError`` unless it is canonical uint64 text."""
    if not _UINT_TEXT.fullmatch(text):
        raise ValueError(f"not the decimal text of a uint64: {text!r}")
    n = int(text)
    if n > UINT64_MAX:
        raise ValueError(f"uint payload out of uint64 range: {text!r}")
    return Uint(n)
