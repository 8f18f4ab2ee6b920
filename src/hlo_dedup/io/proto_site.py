"""What the per-opcode attribute printers share: :class:`Site` (one instruction as
they see it), the table they register in, and the small helpers most of them use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator

from .proto_values import InvalidProto, UnsupportedProto, shape_index

if TYPE_CHECKING:
    from .proto_instruction import Computation, Instructions
    from .proto_line import LinePrinter


class Site:
    """One instruction as the attribute printers see it: its view message (sub-messages
    as bytes), its computation, and the module's decoder and shape texts."""

    __slots__ = ("table", "i", "view", "printer")

    def __init__(self, table: "Instructions", i: int, printer: "LinePrinter", view: Any = None) -> None:
        self.table = table
        self.i = i
        self.view = table.view(i) if view is None else view
        self.printer = printer

    @property
    def name(self) -> str:
        return self.table.names[self.i]

    @property
    def opcode(self) -> str:
        return self.table.opcodes[self.i]

    @property
    def operand_count(self) -> int:
        return len(self.table.operands[self.i])

    @property
    def called(self) -> list["Computation"]:
        return self.table.called.get(self.i, [])

    def decode(self, message: str, field: str) -> Any:
        return self.printer.decoder.decode(message, getattr(self.view, field))

    def shape(self) -> Any:
        """The instruction's ShapeProto."""
        return self.printer.shapes.proto(self.table.shapes[self.i])

    def operand_shape(self, k: int) -> Any:
        table = self.table
        return self.printer.shapes.proto(table.shapes[table.operands[self.i][k]])

    def shape_text(self, data: bytes) -> str:
        return self.printer.shapes.text(data)


Attributes = Callable[[Site], Iterator[str]]


class AttributePrinters(dict[str, Attributes]):
    """Opcode -> the function returning its attribute strings (``key=value``) in XLA's
    order; ``quiet_unless`` maps an opcode to the instruction fields without which its
    printer prints nothing (so lines can skip it when no instruction sets them)."""

    def __init__(self) -> None:
        super().__init__()
        self.quiet_unless: dict[str, tuple[str, ...]] = {}

    def register(self, *opcodes: str, quiet_unless: tuple[str, ...] = ()) -> Callable[[Attributes], Attributes]:
        def wrap(fn: Attributes) -> Attributes:
            for opcode in opcodes:
                self[opcode] = fn
                if quiet_unless:
                    self.quiet_unless[opcode] = quiet_unless
            return fn

        return wrap


def ints(values: Any) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def enum_name(table: dict[int, str], value: int, field: str) -> str:
    """The printed name of an enum value; a value we have no name for is unsupported."""
    try:
        return table[value]
    except KeyError:
        raise UnsupportedProto(field, f"value {value}") from None


def one_dimension(ins: Site) -> int:
    dims = ins.view.dimensions
    if len(dims) != 1:
        raise InvalidProto(f"{ins.opcode} {ins.name} needs exactly one dimension")
    return dims[0]


def required(ins: Site, field: str) -> bytes:
    """The bytes of a message field the loader needs for this opcode."""
    if not ins.view.HasField(field):
        raise InvalidProto(f"{ins.opcode} {ins.name} has no {field}")
    return getattr(ins.view, field)


def output_to_operand_aliasing(ins: Site) -> tuple[str, ...]:
    if not ins.printer.counts["output_operand_aliasing"]:
        return ()  # no instruction of the module has any
    pairs = ins.view.output_operand_aliasing
    if not len(pairs):
        return ()
    decode = ins.printer.decoder.decode
    items = [decode("OutputOperandAliasing", b) for b in pairs]
    return ("output_to_operand_aliasing={" + ", ".join(
        f"{shape_index(p.output_shape_index)}: ({p.operand_index}, {shape_index(p.operand_shape_index)})"
        for p in items
    ) + "}",)
