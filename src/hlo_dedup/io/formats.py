"""Reading and writing modules in hlo-opt's formats: HLO text, binary and text protos.

Input formats (`--format`, hlo-opt's names):

* `hlo` / `txt` — HLO text, parsed by hlo_dedup's own parser (unchanged parts print back
  byte for byte).
* `pb` — a binary `HloSnapshot`, `HloProto` or `HloModuleProto`, tried in that order as
  hlo-opt does. The module is printed as XLA would print it (without jax,
  :mod:`hlo_dedup.io.proto_text`), and that text is parsed.
* `pbtxt` — the same three containers in protobuf text format.

Without `--format` the format comes from the extension (`.pb` → pb, `.pbtxt`/`.textproto` →
pbtxt) and otherwise from the content: NxD-Inference writes binary `HloModuleProto`s named
`graph.hlo`, so a `.hlo` file (or stdin) that is not text is read as a proto.

Every input format may be gzip-compressed (`--xla_dump_compress_protos` writes `.hlo.pb.gz`,
and caches and dumps are often archived that way): gzip data is recognised by its magic
bytes and decompressed on reading; a trailing `.gz` is ignored where the name says the
format, and an output named `*.gz` is written compressed.

Output formats: `hlo` (text), `pb` (binary `HloModuleProto`, what neuronx-cc takes) and
`pbtxt` (text-format `HloModuleProto`). Proto output goes through XLA's parser (jaxlib), so only one
module can be written per file; the header's `replica_count`/`num_partitions` belong to
XLA's module config, not to `HloModuleProto`, and are not kept there.
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import sys
from typing import TYPE_CHECKING, BinaryIO, Iterable, Iterator, Sequence

from ..ir import HloModule
from ..text import HloParseError, parse_module, parse_modules, split_module_texts
from .files import HEAD_BYTES, STREAM_LIMIT, HeadCheck, read_input, read_stream, write_file

if TYPE_CHECKING:
    from .proto_text import PrintedModule

INPUT_FORMATS: tuple[str, ...] = ("hlo", "txt", "pb", "pbtxt")
OUTPUT_FORMATS: tuple[str, ...] = ("hlo", "pb", "pbtxt")
STDIO = "-"
#: The line between modules in one HLO text file (lit's and hlo-opt's --split-input-file).
SPLIT_MARKER = "// -----"

_PB_SUFFIXES = (".pb",)
_PBTXT_SUFFIXES = (".pbtxt", ".textproto", ".txtpb", ".prototxt")
#: Gzip data may expand to this many times its size, and to this many bytes whatever its size.
GZIP_RATIO = 256
GZIP_FLOOR = 64 << 20
_GZIP_CHUNK = 1 << 20
#: Compressed files: the suffix that does not change the format, and gzip's magic bytes.
GZIP_SUFFIX = ".gz"
_GZIP_MAGIC = b"\x1f\x8b"
_PBTXT_START = re.compile(r"\A(?:\s*#[^\n]*\n)*\s*(?:name|entry_computation_name|computations|hlo_module|hlo|id)\s*[:{]")


class FormatError(ValueError):
    """An input or output problem that is not an HLO text syntax error; `format()` gives one line."""

    def __init__(self, filename: str, message: str, line: int = 0, column: int = 0) -> None:
        self.filename = filename
        self.message = message
        self.line = line
        self.column = column
        super().__init__(self.format())

    def format(self) -> str:
        where = f"{self.filename}:{self.line}:{self.column}" if self.line else self.filename
        return f"{where}: error: {self.message}"


def display_name(path: str | os.PathLike[str]) -> str:
    """A path as messages show it: on one line and inert on a terminal, control characters
    and bytes that are not UTF-8 (which the file system may hold) spelled as `\\xNN`."""
    name = "<stdin>" if str(path) == STDIO else os.fspath(path)
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    return _UNPRINTABLE.sub(_spelled, name) if _UNPRINTABLE.search(name) else name


#: C0 and C1 controls, DEL, and the lone surrogates `os.fsdecode` makes of undecodable bytes.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\udc80-\udcff]")


def _spelled(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00 if code >= 0xDC80 else code:02x}"


# ------------------------------------------------------------------------------------------
# Reading


def read_source(path: str | os.PathLike[str], stdin: BinaryIO | None = None) -> bytes:
    """The bytes of a file, or of standard input for `-`, within the bounds
    `hlo_dedup.io.files` sets (OSError beyond them); gzip data comes back decompressed."""
    name = display_name(path)

    def check_head(head: bytes) -> None:
        _refuse_head(head, name, path)

    if str(path) == STDIO:
        stream = stdin or sys.stdin.buffer
        _refuse_device_stdin(stream)
        data = read_stream(stream, "<stdin>", check_head)
    else:
        data = read_input(path, check_head)
    return decompress(data, name, check_head)


def _refuse_head(head: bytes, filename: str, path: str | os.PathLike[str]) -> None:
    """Refuse an input on its first bytes when no module can start so, before the rest is
    read or decompressed: a NUL first byte is neither HLO text (the reader's error at 1:1)
    nor a protobuf field (no field has tag 0)."""
    if not head.startswith(b"\x00"):
        return
    if detect_format(path, head) in ("pb", "pbtxt"):
        raise FormatError(filename, "not a binary HloSnapshot, HloProto or HloModuleProto "
                          "(it starts with a NUL byte, which no protobuf field does)")
    raise HloParseError("unexpected character '\\x00' (the input starts with a NUL byte)",
                        filename=filename, line=1, column=1)


def _refuse_device_stdin(stream: BinaryIO) -> None:
    """Standard input redirected from a device (`< /dev/zero`) would be read to the limit."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (AttributeError, OSError, ValueError):
        return  # not a file descriptor (tests, notebooks)
    if stat.S_ISCHR(mode) and not stream.isatty():
        raise OSError(errno.EINVAL, "standard input is a character device, not a file or a pipe "
                      "(refusing to read it)", "<stdin>")


def without_compression(name: str) -> str:
    """`name` without a trailing `.gz`: the part that says the format."""
    return name[: -len(GZIP_SUFFIX)] if name.lower().endswith(GZIP_SUFFIX) else name


def decompress(data: bytes, filename: str, check_head: HeadCheck | None = None) -> bytes:
    """`data` itself, or what it decompresses to if it is gzip data (no HLO text or proto
    starts with gzip's magic bytes: 0x1f is a control character and not a valid proto tag).
    Decompressed a chunk at a time within bounds: the same bound as any input, and at most
    `GZIP_RATIO` times the compressed size (real modules compress 7-20x; a gzip bomb over
    1000x); `check_head` sees the first decompressed bytes before the rest is made."""
    if not data.startswith(_GZIP_MAGIC):
        return data
    import zlib  # here and below: compressed files only, not worth their import on every run

    bound = min(STREAM_LIMIT, max(GZIP_FLOOR, GZIP_RATIO * len(data)))
    out: list[bytes] = []
    total = 0
    view = memoryview(data)
    try:
        while view:  # one gzip member after another, as gzip reads them
            member = zlib.decompressobj(16 + zlib.MAX_WBITS)
            feed: bytes | memoryview = view
            while not member.eof:
                chunk = member.decompress(feed, _GZIP_CHUNK)
                feed = member.unconsumed_tail
                if not chunk and not feed and not member.eof:
                    raise FormatError(filename, "corrupt or truncated gzip data: it ends inside the compressed data")
                if check_head is not None and chunk:
                    check_head(chunk[:HEAD_BYTES])
                    check_head = None
                total += len(chunk)
                if total > bound:
                    raise FormatError(filename, _too_large(bound, len(data)))
                out.append(chunk)
            rest = member.unused_data.lstrip(b"\x00")  # gzip allows zero padding after a member
            if rest and not rest.startswith(_GZIP_MAGIC):
                raise FormatError(filename, f"corrupt or truncated gzip data: not gzip data after a member ({rest[:2]!r})")
            view = memoryview(rest)
    except zlib.error as exc:
        raise FormatError(filename, f"corrupt or truncated gzip data: {exc}") from None
    return b"".join(out)


def _too_large(bound: int, compressed: int) -> str:
    if bound >= STREAM_LIMIT:
        return f"gzip data expands to more than {STREAM_LIMIT >> 30} GiB"
    return (f"gzip data expands to more than {bound >> 20} MiB from {compressed} bytes, over {GZIP_RATIO} "
            "times its size (a likely gzip bomb; decompress it yourself to read it anyway)")


def compress_for(path: str | os.PathLike[str], chunks: Iterable[bytes]) -> Iterable[bytes]:
    """`chunks` as they are written to `path`: gzip-compressed for a `*.gz` name (with no time
    stamp, so the same module always gives the same bytes), chunk by chunk."""
    if str(path) != STDIO and str(path).lower().endswith(GZIP_SUFFIX):
        return _gzip_chunks(chunks)
    return chunks


def _gzip_chunks(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """What `gzip.compress(b"".join(chunks), mtime=0)` returns, without the joined input."""
    import gzip
    import zlib

    yield gzip.compress(b"", mtime=0)[:10]  # the header gzip writes (its OS byte varies by version)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    crc = size = 0
    for chunk in chunks:
        crc = zlib.crc32(chunk, crc)
        size += len(chunk)
        out = deflate.compress(chunk)
        if out:
            yield out
    yield deflate.flush() + crc.to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little")


def looks_like_text(data: bytes) -> bool:
    """True for bytes whose first 4 KiB are UTF-8 without NUL or control characters (tab,
    line breaks and form feed allowed): what HLO text always is."""
    head = data[:4096]
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # a character cut by the 4 KiB window is fine
            return False
    return not any(b < 0x09 or 0x0E <= b < 0x20 for b in head)


def _looks_binary(data: bytes) -> bool:
    """True for a serialized proto: bytes that are not text (`looks_like_text`) and start
    the way XLA writes HloSnapshot, HloProto and HloModuleProto (below), so a text module
    with a stray Latin-1 or control byte stays text."""
    return not looks_like_text(data) and _starts_like_hlo_proto(data, nested=False)


#: Fields 1-3 of the three containers, length-delimited: one of them comes first, as
#: protobuf writes fields in number order (`name`, `entry_computation_name`, `computations`
#: of HloModuleProto; `hlo_module` of HloProto; `hlo` of HloSnapshot).
_FIRST_TAGS = (0x0A, 0x12, 0x1A)
_NAME_LIKE = re.compile(rb"[\x21-\x7e]+")  # a module name: printable, no blank
#: Field numbers above this are not in HloSnapshot, HloProto or HloModuleProto (all < 40).
_MAX_FIELD = 1000
_FIELDS_TO_CHECK = 4096


def _starts_like_hlo_proto(data: bytes, nested: bool) -> bool:
    """The first field is 1-3, length-delimited, holding a name or a message, and the rest
    reads as wire format (possibly cut short). Text never starts so: `HloModule`, `ENTRY`,
    `%`, `//` and blanks are other tags, and a leading newline is followed by text with
    blanks in it, which is neither a name nor a message."""
    if not data or data[0] not in _FIRST_TAGS:
        return False
    length = read_varint(data, 1)
    if length is None:
        return False
    start, end = length[1], length[1] + length[0]
    if end > len(data):  # cut inside the first field: inside the name, or the module a container holds
        partial = data[start:]
        return not partial or bool(_NAME_LIKE.fullmatch(partial)) or (not nested and _starts_like_hlo_proto(partial, True))
    payload = data[start:end]
    if not (_NAME_LIKE.fullmatch(payload) or _wire_format(payload) == "complete"):
        return False
    return _wire_format(data[end:]) != "invalid"


def read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int] | None:
    """The protobuf varint at `pos` and the position after it; None if the bytes end
    inside it or it runs past ten bytes."""
    value = shift = 0
    for i in range(pos, min(pos + 10, len(data))):
        byte = data[i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i + 1
        shift += 7
    return None


def _wire_format(data: bytes) -> str:
    """"complete" if `data` reads as protobuf fields to its end, "cut" if the last one runs
    past it, else "invalid" (the first few thousand fields decide)."""
    pos = fields = 0
    while pos < len(data) and fields < _FIELDS_TO_CHECK:
        tag = read_varint(data, pos)
        if tag is None:
            return "cut"
        number, wire_type = tag[0] >> 3, tag[0] & 7
        pos = tag[1]
        if not 1 <= number <= _MAX_FIELD or wire_type not in (0, 1, 2, 5):
            return "invalid"
        if wire_type in (0, 2):
            value = read_varint(data, pos)
            if value is None:
                return "cut"
            pos = value[1] + (value[0] if wire_type == 2 else 0)
        else:
            pos += 8 if wire_type == 1 else 4
        fields += 1
    return "cut" if pos > len(data) else "complete"


def detect_format(path: str | os.PathLike[str], data: bytes) -> str:
    """hlo, pb or pbtxt, from the extension where it is unambiguous, else from the content."""
    name = without_compression(str(path).lower())
    if name.endswith(_PB_SUFFIXES):
        return "pb"
    if name.endswith(_PBTXT_SUFFIXES):
        return "pbtxt"
    if _looks_binary(data):
        return "pb"
    if _PBTXT_START.match(data[:4096].decode("utf-8", "replace")):
        return "pbtxt"
    return "hlo"


def _check_no_marker(text: str, filename: str) -> None:
    pieces = split_module_texts(text)
    if len(pieces) > 1:
        line = pieces[1][0]  # a piece after a marker starts on the marker's line
        raise HloParseError(
            "'// -----' separator found in input, but --split-input-file not specified",
            filename=filename, line=line, column=1,
        )


def modules_from_bytes(
    data: bytes,
    filename: str,
    *,
    spmd: bool = True,
    format: str | None = None,
    split_input_file: bool = True,
) -> list[HloModule]:
    """Parse `data` (named `filename` in errors) in `format` (None: detect)."""
    text, container = decode_input(data, filename, format)
    return modules_from_text(text, filename, container=container, spmd=spmd, split_input_file=split_input_file)


def decode_input(data: bytes, filename: str, format: str | None = None) -> tuple[str | PrintedModule, str | None]:
    """`data` as HLO text, and the proto container it came in (None for text): text formats
    decoded, a proto's module printed as XLA prints it (a `PrintedModule`, whose `text` that
    is and from which `modules_from_text` builds the IR without reading the text again).
    Nothing needs the bytes after this, so a caller that drops them builds the IR without
    the input held twice."""
    fmt = _input_format(data, filename, format)
    if fmt in ("hlo", "txt"):
        return data.decode("utf-8", "surrogateescape"), None
    container, printed = _proto_module(data, filename, fmt)
    return printed, container


def modules_from_text(text: str | PrintedModule, filename: str, *, container: str | None = None, spmd: bool = True,
                      split_input_file: bool = True) -> list[HloModule]:
    """The modules of `decode_input`'s text. A proto's module is one module; where its IR is
    not built from the printer's pieces, its text is read, and errors point into the text
    XLA printed for it, so they say so."""
    if container is not None:
        from .proto_ir import module_from_printed

        return [module_from_printed(text, filename, container, spmd=spmd)]  # type: ignore[arg-type]
    assert isinstance(text, str)
    if split_input_file:
        return parse_modules(text, filename, spmd=spmd)
    _check_no_marker(text, filename)
    return [parse_module(text, filename, spmd=spmd)]


def module_texts_from_bytes(data: bytes, filename: str, *, format: str | None = None) -> list[str]:
    """The HLO text of every module in `data`, unparsed, for XLA itself to read: HLO text as
    written (split on `// -----` lines), a proto's module as XLA prints it."""
    text, container = decode_input(data, filename, format)
    if container is not None:
        return [text.text]  # type: ignore[union-attr]
    return [piece for _, piece in split_module_texts(text)]  # type: ignore[arg-type]


def proto_device_assignment(data: bytes, filename: str, *, format: str | None = None) -> tuple[int, int] | None:
    """(replicas, partitions) of the device assignment a binary proto's module carries (an
    XLA dump's `.hlo.pb` does; its text print does not show it); None for anything else."""
    if _input_format(data, filename, format) != "pb":
        return None
    from . import proto

    try:
        _, module = proto.locate_module(data)
        return proto.device_assignment_counts(module)
    except (proto.ProtoError, proto.ProtoSupportMissing):
        return None


def _input_format(data: bytes, filename: str, format: str | None) -> str:
    fmt = format or detect_format(filename, data)
    if fmt not in INPUT_FORMATS:
        raise FormatError(filename, f"unknown input format {fmt!r} (expected one of {', '.join(INPUT_FORMATS)})")
    return fmt


def _proto_module(data: bytes, filename: str, fmt: str) -> tuple[str, PrintedModule]:
    """(container name, the module as XLA prints it) of a binary or text proto."""
    from . import proto  # here and below: protos only (text is the common case)

    try:
        if fmt == "pb":
            container, module_bytes = proto.locate_module(data)
        else:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _unreadable(data, filename, fmt, f"text proto is not UTF-8 (byte {exc.start})") from None
            container, module_bytes = proto.parse_text_proto(text)
        return container, proto.print_module_bytes(module_bytes)
    except proto.ProtoSupportMissing as exc:
        raise FormatError(filename, str(exc)) from None
    except proto.ProtoError as exc:
        line, column = proto.text_proto_error_location(exc) if fmt == "pbtxt" else (0, 0)
        raise _unreadable(data, filename, fmt, str(exc), line, column) from None


def _unreadable(data: bytes, filename: str, fmt: str, message: str, line: int = 0, column: int = 0) -> FormatError:
    """The error of `data` that does not read as `fmt`, saying what it holds instead where
    its head tells (`sniff.held_instead`)."""
    from .sniff import held_instead  # sniff reads formats: imported when an input fails only

    instead = held_instead(data, fmt)
    return FormatError(filename, message.rstrip(".") + instead if instead else message, line, column)


def read_modules(
    path: str | os.PathLike[str],
    spmd: bool = True,
    format: str | None = None,
    *,
    split_input_file: bool = True,
) -> list[HloModule]:
    """Every module in a file (`-`: standard input) in any of INPUT_FORMATS.

    HLO text is split on `// -----` lines unless `split_input_file=False`, in which case such
    a line is an error, as in hlo-opt without `--split-input-file`.
    """
    name = display_name(path)
    try:
        data = read_source(path)
    except OSError as exc:
        raise FormatError(name, exc.strerror or str(exc)) from None
    return modules_from_bytes(data, name, spmd=spmd, format=format, split_input_file=split_input_file)


# ------------------------------------------------------------------------------------------
# Writing


def output_format_for(path: str | os.PathLike[str], format: str | None = None) -> str:
    """The output format: `format` if given, else from the extension (text by default)."""
    if format is not None:
        if format not in OUTPUT_FORMATS:
            raise FormatError(display_name(path), f"unknown output format {format!r} "
                              f"(expected one of {', '.join(OUTPUT_FORMATS)})")
        return format
    name = without_compression(str(path).lower())
    if name.endswith(_PB_SUFFIXES):
        return "pb"
    if name.endswith(_PBTXT_SUFFIXES):
        return "pbtxt"
    return "hlo"


def render_modules(modules: Sequence[HloModule], format: str, filename: str = "<output>") -> bytes:
    """The bytes to write (`render_chunks`, joined)."""
    return b"".join(render_chunks(modules, format, filename))


#: Characters encoded and written at a time when text output is streamed.
_CHUNK_CHARS = 1 << 20


def render_chunks(modules: Sequence[HloModule], format: str, filename: str = "<output>") -> Iterable[bytes]:
    """The bytes to write, in chunks. Several text modules are joined by `// -----` lines, so
    that the file reads back as the same modules with --split-input-file (hlo-opt joins them
    with a bare newline, which nothing can split again); proto formats hold one module, and
    are rendered (and their errors raised) before this returns. Text is printed as it is
    written, so a large module's text is never held whole, nor twice (as text and bytes)."""
    if format == "hlo":
        return _text_chunks(modules)
    if len(modules) != 1:
        raise FormatError(filename, f"{format} output holds one module, the input has {len(modules)} "
                          "(write HLO text, or split the input)")
    from . import proto

    try:
        module_bytes = proto.hlo_text_to_module_bytes(modules[0].to_text())
        if format == "pb":
            return (module_bytes,)
        return (proto.module_bytes_to_text_proto(module_bytes).encode("utf-8"),)
    except proto.ProtoSupportMissing as exc:
        raise FormatError(filename, str(exc)) from None
    except proto.ProtoError as exc:
        raise FormatError(filename, str(exc)) from None


def _text_chunks(modules: Sequence[HloModule]) -> Iterator[bytes]:
    """`join_module_texts` of the modules' texts, encoded about `_CHUNK_CHARS` at a time."""
    pending: list[str] = []
    size = 0
    for piece in _joined_pieces(module.text_pieces() for module in modules):
        if len(piece) > _CHUNK_CHARS:  # the source text of an unchanged module, or most of it
            if pending:
                yield _encoded(pending)
                pending, size = [], 0
            for start in range(0, len(piece), _CHUNK_CHARS):
                yield _encoded([piece[start : start + _CHUNK_CHARS]])
            continue
        pending.append(piece)
        size += len(piece)
        if size >= _CHUNK_CHARS:
            yield _encoded(pending)
            pending, size = [], 0
    if pending:
        yield _encoded(pending)


def _encoded(pieces: list[str]) -> bytes:
    return "".join(pieces).encode("utf-8", "surrogateescape")


def join_module_texts(texts: Sequence[str]) -> str:
    """Texts joined by the `// -----` marker on a line of its own: modules that were split
    from one file and not changed come back as that file, byte for byte."""
    return "".join(_joined_pieces((text,) for text in texts))


def _joined_pieces(texts: Iterable[Iterable[str]]) -> Iterator[str]:
    """The pieces of each text, with the marker line yielded as a piece of its own between
    texts (a text's pieces are never copied to put the marker in front of them)."""
    last = ""  # the last character yielded so far
    for index, pieces in enumerate(texts):
        marker_due = index > 0
        for piece in pieces:
            if not piece:
                continue
            if marker_due:
                yield ("" if last == "\n" else "\n") + SPLIT_MARKER + ("" if piece[0] == "\n" else "\n")
                marker_due = False
            yield piece
            last = piece[-1]
        if marker_due:  # an empty text still gets its marker
            yield ("" if last == "\n" else "\n") + SPLIT_MARKER + "\n"
            last = "\n"


def write_output(data: bytes | Iterable[bytes], path: str | os.PathLike[str], stdout: BinaryIO | None = None) -> int:
    """Write `data` (or its chunks) to `path` as `hlo_dedup.io.files.write_file` does (through
    symlinks and special files, keeping mode and owner), or to standard output for `-`;
    returns the number of bytes written."""
    if str(path) != STDIO:
        return write_file(path, data)
    out = stdout or getattr(sys.stdout, "buffer", sys.stdout)
    text = isinstance(out, io.TextIOBase)  # a text stream without a buffer (tests, notebooks)
    written = 0
    for chunk in (data,) if isinstance(data, bytes) else data:
        out.write(chunk.decode("utf-8", "surrogateescape") if text else chunk)
        written += len(chunk)
    out.flush()
    return written


def write_module(module: HloModule, path: str | os.PathLike[str], format: str | None = None) -> None:
    """Write one module (`-`: standard output) as text, `.pb` or `.pbtxt`."""
    fmt = output_format_for(path, format)
    write_output(compress_for(path, render_chunks([module], fmt, display_name(path))), path)


__all__ = [
    "GZIP_SUFFIX",
    "INPUT_FORMATS",
    "OUTPUT_FORMATS",
    "STDIO",
    "SPLIT_MARKER",
    "FormatError",
    "compress_for",
    "decode_input",
    "decompress",
    "detect_format",
    "display_name",
    "join_module_texts",
    "module_texts_from_bytes",
    "modules_from_bytes",
    "modules_from_text",
    "output_format_for",
    "read_modules",
    "read_varint",
    "read_source",
    "render_chunks",
    "render_modules",
    "without_compression",
    "write_module",
    "write_output",
]
