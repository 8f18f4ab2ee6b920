"""HLO protos: `HloModuleProto`, and the `HloProto` / `HloSnapshot` wrappers XLA dumps write.

Who does what:

* **Module -> HLO text** (reading) is :mod:`hlo_dedup.io.proto_text`, which prints the
  module exactly as jaxlib's ``module_proto_to_text`` would, needing only ``protobuf``
  (the ``proto`` extra): reading a ``.pb`` never imports jax.
* **HLO text -> module** (writing) is jaxlib's own C++ (``hlo_dedup.xla.text_to_module_proto``):
  only XLA's parser knows how to build an ``HloModuleProto``.
* **The wrappers** jaxlib rejects are peeled with the `protobuf` package. Both hold the
  module's bytes in field 1 (`HloProto.hlo_module = 1`, `HloSnapshot.hlo = 1` holding an
  `HloProto`). Message classes for exactly those fields are built at run time from a
  `FileDescriptorProto` defined below (`descriptor_pb2` + `message_factory`), with the module
  declared as `bytes`: a length-delimited field reads the same whether the schema calls it a
  message or bytes, so we get the module's exact bytes without knowing its schema, and every
  other field (buffer assignment, snapshot arguments) stays an unknown field we ignore.
* **Text protos (`pbtxt`)** need the whole schema, because text format names every field.
  `hlo_dedup.io.hlo_schema` holds a generated table of the messages reachable from
  `HloSnapshot` (field names, numbers, types, enum values and oneofs of jaxlib's own
  `xla/service/hlo.proto` and `xla/xla_data.proto`); `google.protobuf.text_format` parses and
  prints with classes built from it, and the module's binary form then goes through
  :mod:`hlo_dedup.io.proto_text`.

Like hlo-opt's loader, input is tried as HloSnapshot, then HloProto, then HloModuleProto; because
protobuf parsing is lenient, a container is accepted only if what it holds looks like a module
(valid UTF-8 names and at least one named computation), and the full load has the last word.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from ..xla import INSTALL_HINT as WRITE_HINT

if TYPE_CHECKING:
    from .proto_text import PrintedModule

READ_HINT = "pip install 'hlo-dedup[proto]'"

#: hlo-opt's order (xla/tools/hlo_module_loader.cc `LoadModuleFromData`).
CONTAINERS: tuple[str, ...] = ("HloSnapshot", "HloProto", "HloModuleProto")


class ProtoError(ValueError):
    """The bytes or text are not an HLO proto container XLA accepts."""


class ProtoSupportMissing(ImportError):
    """protobuf (the `proto` extra, for reading) or jax/jaxlib (the `xla` extra, for
    writing) is not installed."""

    def __init__(self, what: str, detail: str = "", *, writing: bool = False) -> None:
        needs = "jax, jaxlib and protobuf" if writing else "protobuf"
        message = f"{what} needs {needs}: {WRITE_HINT if writing else READ_HINT}"
        super().__init__(f"{message} ({detail})" if detail else message)


# ------------------------------------------------------------------------------------------
# Wire-level wrappers (binary)


@functools.lru_cache(maxsize=None)
def _wire_classes() -> Any:
    """Message classes for the few fields we read, from a descriptor defined here."""
    try:
        import google.protobuf.message  # noqa: F401  (the runtime must be there)
    except ImportError as exc:
        raise ProtoSupportMissing("reading HLO protos", str(exc)) from None
    from .descriptors import TYPE_BYTES, TYPE_MESSAGE, TYPE_NUMBERS, FieldSpec, MessageClasses, MessageSpec, encode_file

    string = TYPE_NUMBERS["string"]
    messages = [
        # HloProto { HloModuleProto hlo_module = 1; } read as bytes (wire-compatible).
        MessageSpec("HloProto", [FieldSpec("hlo_module", 1, TYPE_BYTES)]),
        # HloSnapshot { HloProto hlo = 1; }
        MessageSpec("HloSnapshot", [FieldSpec("hlo", 1, TYPE_MESSAGE, ".hlo_dedup.wire.HloProto")]),
        # Probes that check that bytes look like an HloModuleProto (strings must be UTF-8).
        MessageSpec("ComputationProbe", [FieldSpec("name", 1, string)]),
        MessageSpec("ModuleProbe", [
            FieldSpec("name", 1, string),
            FieldSpec("entry_computation_name", 2, string),
            FieldSpec("computations", 3, TYPE_MESSAGE, ".hlo_dedup.wire.ComputationProbe", repeated=True),
        ]),
        # HloModuleProto.device_assignment = 15: the replicas x computations a dump ran on.
        MessageSpec("DeviceAssignment", [
            FieldSpec("replica_count", 1, TYPE_NUMBERS["int32"]),
            FieldSpec("computation_count", 2, TYPE_NUMBERS["int32"]),
        ]),
        MessageSpec("ModuleDevices", [
            FieldSpec("device_assignment", 15, TYPE_MESSAGE, ".hlo_dedup.wire.DeviceAssignment"),
        ]),
    ]  # fmt: skip
    return MessageClasses(encode_file("hlo_dedup/wire.proto", "hlo_dedup.wire", messages, []), "hlo_dedup.wire")


def _decode(cls: Any, data: bytes) -> Any | None:
    from google.protobuf.message import DecodeError

    try:
        return cls.FromString(data)
    except (DecodeError, ValueError, RuntimeError):
        return None


def looks_like_module(data: bytes | memoryview) -> bool:
    """True if `data` parses as an HloModuleProto with at least one named computation."""
    if not data:
        return False
    probe = _decode(_wire_classes()["ModuleProbe"], data)
    return probe is not None and len(probe.computations) > 0 and all(c.name for c in probe.computations)


def device_assignment_counts(module: bytes | memoryview) -> tuple[int, int] | None:
    """(replicas, partitions) of a serialized HloModuleProto's device assignment, which XLA
    writes into a dump's module (its printer shows it nowhere); None when it has none."""
    found = _decode(_wire_classes()["ModuleDevices"], bytes(module))
    if found is None or not found.HasField("device_assignment"):
        return None
    assignment = found.device_assignment
    if assignment.replica_count < 1 or assignment.computation_count < 1:
        return None
    return assignment.replica_count, assignment.computation_count


def _module_bytes_in(container: str, data: bytes) -> bytes | memoryview | None:
    classes = _wire_classes()
    if container == "HloModuleProto":
        return data
    if container == "HloProto":
        msg = _decode(classes["HloProto"], data)
        if msg is None:
            return None
        # The last record of field 1, as protobuf reads a bytes field, seen in place: no
        # copy of the module beside the input while it is printed.
        found = _last_length_delimited(data, 1)
        return msg.hlo_module if found is None else memoryview(data)[found[0] : found[1]]
    msg = _decode(classes["HloSnapshot"], data)
    return None if msg is None or not msg.HasField("hlo") else msg.hlo.hlo_module


def _last_length_delimited(data: bytes, number: int) -> tuple[int, int] | None:
    """Where the payload of the last length-delimited record of field `number` lies in
    `data`, a message protobuf has decoded (its records are well formed). None when there
    is no such record, or for a record this scan does not skip (a group)."""
    from .formats import read_varint

    pos, end, found = 0, len(data), None
    while pos < end:
        tag = read_varint(data, pos)
        if tag is None:
            return None
        key, pos = tag
        wire = key & 7
        if wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire in (0, 2):
            value = read_varint(data, pos)
            if value is None:
                return None
            pos = value[1]
            if wire == 2:
                if key >> 3 == number:
                    found = (pos, pos + value[0])
                pos += value[0]
        else:
            return None
    return found if pos == end else None


def locate_module(data: bytes) -> tuple[str, bytes | memoryview]:
    """(container name, serialized HloModuleProto) of a binary HloSnapshot/HloProto/HloModuleProto;
    an HloProto's module is a view of `data`, not a copy (a dump's `.hlo.pb` is one)."""
    if not data:
        raise ProtoError("empty input is not an HLO proto")
    for container in CONTAINERS:
        module = _module_bytes_in(container, data)
        if module is not None and looks_like_module(module):
            return container, module
    raise ProtoError("not a binary HloSnapshot, HloProto or HloModuleProto (no module with computations found)")


# ------------------------------------------------------------------------------------------
# Text protos (pbtxt), through the generated schema table


@functools.lru_cache(maxsize=None)
def _schema_classes() -> dict[str, Any]:
    try:
        from google.protobuf import descriptor_pool, message_factory
    except ImportError as exc:
        raise ProtoSupportMissing("text protos (pbtxt)", str(exc)) from None
    from . import hlo_schema

    pool = descriptor_pool.DescriptorPool()
    pool.Add(hlo_schema.file_descriptor_proto())
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"xla.{name}"))
        for name in ("HloModuleProto", "HloProto", "HloSnapshot")
    }


def _text_error(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def parse_text_proto(text: str) -> tuple[str, bytes]:
    """(container name, serialized HloModuleProto) of a text-format HloSnapshot/HloProto/HloModuleProto.

    On failure the error of the HloModuleProto attempt is reported (as `line:col: message`),
    since that is the container most hand-written or converted files are.
    """
    from google.protobuf import text_format

    _check_text_proto_depth(text)
    classes = _schema_classes()
    errors: dict[str, Exception] = {}
    for container in CONTAINERS:
        msg = classes[container]()
        try:
            text_format.Parse(text, msg)
        except text_format.ParseError as exc:
            errors[container] = exc
            continue
        except RecursionError:  # deeper than Python's stack, however the depth check missed it
            raise ProtoError("text proto nests too deeply") from None
        if container == "HloSnapshot":
            if not msg.HasField("hlo") or not msg.hlo.HasField("hlo_module"):
                continue
            module = msg.hlo.hlo_module
        elif container == "HloProto":
            if not msg.HasField("hlo_module"):
                continue
            module = msg.hlo_module
        else:
            module = msg
        if not module.computations:
            continue
        return container, module.SerializeToString()
    err = errors.get("HloModuleProto")
    if err is not None:
        raise ProtoError(f"not a text HloSnapshot, HloProto or HloModuleProto: {_text_error(err)}")
    raise ProtoError("text proto holds no HLO module with computations")


#: Deepest message nesting a text proto may have: XLA's protobuf reads no deeper (its
#: default recursion limit), and the text reader would run out of Python stack first.
MAX_TEXT_PROTO_DEPTH = 100
_TEXT_PROTO_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|\'(?:[^\'\\\n]|\\.)*\'?|#[^\n]*|[{<}>\n]')


def _check_text_proto_depth(text: str) -> None:
    """ProtoError at the `{` or `<` that opens a message deeper than MAX_TEXT_PROTO_DEPTH."""
    depth = 0
    line, line_start = 1, 0
    for m in _TEXT_PROTO_TOKENS.finditer(text):
        token = m.group()
        if token == "\n":
            line, line_start = line + 1, m.end()
        elif token in "{<":
            depth += 1
            if depth > MAX_TEXT_PROTO_DEPTH:
                column = m.start() - line_start + 1
                raise ProtoError(f"{line}:{column} : text proto nests deeper than {MAX_TEXT_PROTO_DEPTH} "
                                 "messages (the most XLA reads)")
        elif token in "}>":
            depth = max(depth - 1, 0)


def text_proto_error_location(exc: ProtoError) -> tuple[int, int]:
    """Line and column a text-proto error names (`N:M : ...`), or (0, 0)."""
    m = re.search(r"\b(\d+):(\d+)\s*:", str(exc))
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def module_bytes_to_text_proto(module: bytes) -> str:
    """The HloModuleProto as a text proto (protobuf's text format, as XLA's DebugString)."""
    from google.protobuf import text_format

    msg = _schema_classes()["HloModuleProto"].FromString(module)
    return text_format.MessageToString(msg)


# ------------------------------------------------------------------------------------------
# Module -> HLO text (our printer), HLO text -> module (jaxlib)


def module_bytes_to_hlo_text(module: bytes) -> str:
    """XLA's HLO text of a serialized HloModuleProto, as jaxlib prints it, without jax.

    Raises ProtoError for bytes XLA would not load, and for content the printer cannot
    reproduce exactly (the message names the field).
    """
    return print_module_bytes(module).text


def print_module_bytes(module: bytes | memoryview) -> PrintedModule:
    """`module_bytes_to_hlo_text`'s text, with where the printer put each part of it (from
    which the IR is built without reading the text)."""
    try:
        from google.protobuf.message import DecodeError
    except ImportError as exc:
        raise ProtoSupportMissing("reading HLO protos", str(exc)) from None
    from . import proto_text

    try:
        return proto_text.print_module(module)
    except DecodeError as exc:
        raise ProtoError(f"not a valid HloModuleProto: {_text_error(exc)}") from None
    except proto_text.InvalidProto as exc:
        raise ProtoError(f"XLA would reject the HloModuleProto: {exc}") from None
    except proto_text.UnsupportedProto as exc:
        raise ProtoError(f"{exc}; convert the module to HLO text with XLA (e.g. hlo-opt) first") from None


def hlo_text_to_module_bytes(text: str) -> bytes:
    """Serialized HloModuleProto of HLO text, by XLA's parser (raises ProtoError if XLA
    rejects the text or crashes on it)."""
    from hlo_dedup.xla import XlaError, XlaUnavailableError, isolated

    try:
        return isolated.text_to_module_proto(text)
    except XlaUnavailableError as exc:
        raise ProtoSupportMissing("writing HLO protos", exc.detail, writing=True) from None
    except XlaError as exc:
        raise ProtoError(f"XLA could not parse the module to write it as a proto: {_text_error(exc)}") from None
