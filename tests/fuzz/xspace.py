"""The XSpace protobuf (tsl/profiler/protobuf/xplane.proto), declared here in full so that a real
``.xplane.pb`` can be parsed, edited field by field and written back (rooftop itself declares only the
subset it reads)."""

from __future__ import annotations

from functools import cache
from typing import Any

# (field, number, type, oneof): "*T" is repeated, "map:T" is map<int64, T>
_SCHEMA: dict[str, list[tuple[str, int, str, str]]] = {
    "XSpace": [("planes", 1, "*XPlane", ""), ("errors", 2, "*string", ""), ("warnings", 3, "*string", ""),
               ("hostnames", 4, "*string", "")],
    "XPlane": [("id", 1, "int64", ""), ("name", 2, "string", ""), ("lines", 3, "*XLine", ""),
               ("event_metadata", 4, "map:XEventMetadata", ""), ("stat_metadata", 5, "map:XStatMetadata", ""),
               ("stats", 6, "*XStat", "")],
    "XLine": [("id", 1, "int64", ""), ("display_id", 10, "int64", ""), ("name", 2, "string", ""),
              ("display_name", 11, "string", ""), ("timestamp_ns", 3, "int64", ""), ("duration_ps", 9, "int64", ""),
              ("events", 4, "*XEvent", "")],
    "XEvent": [("metadata_id", 1, "int64", ""), ("offset_ps", 2, "int64", "data"),
               ("num_occurrences", 5, "int64", "data"), ("duration_ps", 3, "int64", ""), ("stats", 4, "*XStat", "")],
    "XStat": [("metadata_id", 1, "int64", ""), ("double_value", 2, "double", "value"),
              ("uint64_value", 3, "uint64", "value"), ("int64_value", 4, "int64", "value"),
              ("str_value", 5, "string", "value"), ("bytes_value", 6, "bytes", "value"),
              ("ref_value", 7, "uint64", "value")],
    "XEventMetadata": [("id", 1, "int64", ""), ("name", 2, "string", ""), ("display_name", 4, "string", ""),
                       ("metadata", 3, "bytes", ""), ("stats", 5, "*XStat", ""), ("child_id", 6, "*int64", "")],
    "XStatMetadata": [("id", 1, "int64", ""), ("name", 2, "string", ""), ("description", 3, "string", "")],
}  # fmt: skip


@cache
def messages() -> dict[str, Any]:
    """Message classes for the schema above."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="fuzz/xplane.proto", package="fuzz.xp", syntax="proto3")

    def add_field(msg: Any, name: str, number: int, kind: str, oneof: str) -> None:
        label = fdp.LABEL_REPEATED if kind[0] == "*" or kind.startswith("map:") else fdp.LABEL_OPTIONAL
        kind = kind.lstrip("*")
        if kind.startswith("map:"):
            entry = msg.nested_type.add(name="".join(p.title() for p in name.split("_")) + "Entry")
            entry.options.map_entry = True
            add_field(entry, "key", 1, "int64", "")
            add_field(entry, "value", 2, kind[4:], "")
            kind = f"{msg.name}.{entry.name}"
        field = msg.field.add(name=name, number=number, label=label)
        if oneof:
            names = [o.name for o in msg.oneof_decl]
            if oneof not in names:
                msg.oneof_decl.add(name=oneof)
                names.append(oneof)
            field.oneof_index = names.index(oneof)
        if hasattr(fdp, f"TYPE_{kind.upper()}"):
            field.type = getattr(fdp, f"TYPE_{kind.upper()}")
        else:
            field.type, field.type_name = fdp.TYPE_MESSAGE, f".fuzz.xp.{kind}"

    for name, fields in _SCHEMA.items():
        msg = file.message_type.add(name=name)
        for field_name, number, kind, oneof in fields:
            add_field(msg, field_name, number, kind, oneof)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"fuzz.xp.{n}")) for n in _SCHEMA}


def parse_space(data: bytes) -> Any:
    space = messages()["XSpace"]()
    space.ParseFromString(data)
    return space
