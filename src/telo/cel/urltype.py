"""``Telo.Url`` as a real CEL message type (spec §6.1 "a value type that declares members"; §6.3).

The type is a protobuf message built at run time from a ``FileDescriptorProto`` (no ``protoc``), added to the
descriptor pool every environment is created with, so ``url.host`` and ``url.port`` type-check at load time and
``url.nosuch`` is a compile error. Its fields are the members of :class:`telo.values.Url`:

==========  ================================  =============================================================
field       CEL type                          absent member (``None`` in Python)
==========  ================================  =============================================================
scheme      string                            never absent
host        string (proto3 ``optional``)      ``has(u.host)`` is false and ``u.host`` reads ``''``
port        int (proto3 ``optional``)         ``has(u.port)`` is false and ``u.port`` reads ``0``
user        string (proto3 ``optional``)      as host
password    string (proto3 ``optional``)      as host
path        string (proto3 ``optional``)      as host
query       map(string, string)               an empty map
==========  ================================  =============================================================

``optional`` keeps presence, so the conversion back to :class:`~telo.values.Url` is exact: ``host=""`` (an
empty authority, ``file:///x``) and ``host=None`` (no authority, ``mailto:x``) stay different values.
"""

from __future__ import annotations

from typing import Any, Final

from telo.cel import _lib
from telo.values.url import Url

__all__ = ["POOL", "URL_TYPE_NAME", "is_url_message", "url_from_message", "url_to_message"]

URL_TYPE_NAME: Final = "Telo.Url"

_STRING_MEMBERS: Final = ("host", "user", "password", "path")


def _build_pool() -> tuple[Any, Any]:
    pb = _lib.descriptor_pb2
    field_type = pb.FieldDescriptorProto
    file = pb.FileDescriptorProto(name="telo/url.proto", package="Telo", syntax="proto3")
    msg = file.message_type.add(name="Url")
    msg.field.add(name="scheme", number=1, type=field_type.TYPE_STRING, label=field_type.LABEL_OPTIONAL)
    members = [("host", field_type.TYPE_STRING), ("port", field_type.TYPE_INT64)] + [
        (name, field_type.TYPE_STRING) for name in ("user", "password", "path")
    ]
    for number, (name, kind) in enumerate(members, start=2):
        # A proto3 `optional` field is a synthetic one-field oneof: that is what gives it presence.
        msg.oneof_decl.add(name=f"_{name}")
        msg.field.add(
            name=name,
            number=number,
            type=kind,
            label=field_type.LABEL_OPTIONAL,
            proto3_optional=True,
            oneof_index=len(msg.oneof_decl) - 1,
        )
    entry = msg.nested_type.add(name="QueryEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=field_type.TYPE_STRING, label=field_type.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=field_type.TYPE_STRING, label=field_type.LABEL_OPTIONAL)
    msg.field.add(
        name="query",
        number=7,
        type=field_type.TYPE_MESSAGE,
        label=field_type.LABEL_REPEATED,
        type_name=".Telo.Url.QueryEntry",
    )
    pool = _lib.new_descriptor_pool()
    pool.Add(file)
    return pool, _lib.message_class(pool.FindMessageTypeByName(URL_TYPE_NAME))


#: The descriptor pool every environment is created with (it holds ``Telo.Url``).
POOL, _UrlMessage = _build_pool()
URL_CEL_TYPE: Final = _lib.message_type(URL_TYPE_NAME)


def url_to_message(url: Url) -> Any:
    """The ``Telo.Url`` message of a :class:`~telo.values.Url` (absent members left unset)."""
    fields: dict[str, Any] = {"scheme": url.scheme}
    for name in _STRING_MEMBERS:
        value = getattr(url, name)
        if value is not None:
            fields[name] = value
    if url.port is not None:
        fields["port"] = url.port
    if url.query:
        fields["query"] = dict(url.query)
    return _UrlMessage(**fields)


def is_url_message(message: Any) -> bool:
    descriptor = getattr(message, "DESCRIPTOR", None)
    return descriptor is not None and getattr(descriptor, "full_name", None) == URL_TYPE_NAME


def url_from_message(message: Any) -> Url:
    """The :class:`~telo.values.Url` of a ``Telo.Url`` message (``ValueError`` if its members make no URL)."""
    members: dict[str, Any] = {"scheme": message.scheme}
    for name in _STRING_MEMBERS:
        if message.HasField(name):
            members[name] = getattr(message, name)
    if message.HasField("port"):
        members["port"] = int(message.port)
    if len(message.query):
        members["query"] = dict(message.query)
    return Url(**members)
