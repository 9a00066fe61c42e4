"""The CEL value domain, the typed-frame codec and the plain encoding (spec §6).

* :func:`encode_frame` / :func:`decode_frame` — the typed frame (§6.1-§6.3), for boundaries whose reader is
  a Telo runtime (the journal, run records);
* :func:`to_plain` / :func:`from_plain` — the plain encoding (§6.4), for every other boundary;
* :func:`equal` — strict equality of values, CEL type included;
* the domain's own types: :class:`Uint`, :class:`Timestamp`, :class:`Duration`, :class:`Url`,
  :class:`CelMap` (see :mod:`telo.values.types` for how each CEL type maps to Python).
"""

from telo.values.equality import equal
from telo.values.frame import decode_frame, encode_frame
from telo.values.plain import from_plain, to_plain
from telo.values.types import CelMap, Duration, Timestamp, Uint
from telo.values.url import Url

__all__ = [
    "CelMap",
    "Duration",
    "Timestamp",
    "Uint",
    "Url",
    "decode_frame",
    "encode_frame",
    "equal",
    "from_plain",
    "to_plain",
]
