"""Every row of the typed-frame conformance vectors (spec §6.6), in both directions."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from telo.errors import TypedFrameUndecodable
from telo.values import canonical, decode_frame, encode_frame, equal

from .conftest import from_notation, to_notation, vectors

ENCODABLE = vectors()["encodable"]
UNDECODABLE = vectors()["undecodable"]
READABLE = vectors()["readable"]
DOUBLES = vectors()["doubles"]


def _ids(rows: list[dict[str, Any]]) -> list[str]:
    return [row["name"] for row in rows]


def test_the_file_carries_every_table() -> None:
    # §6.6's tables: a silently shrunken file must not pass as conformance.
    assert (len(ENCODABLE), len(UNDECODABLE), len(READABLE), len(DOUBLES)) == (47, 37, 4, 300)


@pytest.mark.parametrize("row", ENCODABLE, ids=_ids(ENCODABLE))
def test_encodable_value_writes_exactly_its_frame(row: dict[str, Any]) -> None:
    value = from_notation(row["value"])
    assert encode_frame(value) == row["frame"]
    assert canonical.encode_frame(value) == row["frame"]  # the reference writer behind the fast path


@pytest.mark.parametrize("row", ENCODABLE, ids=_ids(ENCODABLE))
def test_encodable_frame_reads_back_as_its_value(row: dict[str, Any]) -> None:
    value = decode_frame(row["frame"])
    expected = from_notation(row["value"])
    assert equal(value, expected), (to_notation(value), row["value"])


@pytest.mark.parametrize("row", UNDECODABLE, ids=_ids(UNDECODABLE))
def test_undecodable_frame_is_refused_at_its_path(row: dict[str, Any]) -> None:
    with pytest.raises(TypedFrameUndecodable) as info:
        decode_frame(row["frame"])
    assert info.value.path == row["path"]
    assert info.value.code == "ERR_TYPED_FRAME_UNDECODABLE"
    assert info.value.data == {"path": row["path"]}


@pytest.mark.parametrize("row", READABLE, ids=_ids(READABLE))
def test_readable_frame_reads_as_its_value_and_is_written_canonically(row: dict[str, Any]) -> None:
    value = decode_frame(row["frame"])
    assert equal(value, from_notation(row["value"])), to_notation(value)
    assert encode_frame(value) == row["canonical"]


@pytest.mark.parametrize("bits,text", DOUBLES, ids=[bits for bits, _ in DOUBLES])
def test_double_writes_exactly_and_reads_back_bit_identically(bits: str, text: str) -> None:
    (x,) = struct.unpack(">d", bytes.fromhex(bits))
    assert encode_frame(x) == text
    assert encode_frame([x]) == f"[{text}]"  # in a container, too: the writers inline their scalars
    assert canonical.encode_frame({"x": x}) == f'{{"x":{text}}}'
    back = decode_frame(text)
    assert type(back) is float
    assert struct.pack(">d", back) == bytes.fromhex(bits)
