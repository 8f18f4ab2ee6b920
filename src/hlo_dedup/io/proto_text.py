"""HloModuleProto -> HLO text, byte-identical to jaxlib's ``module_proto_to_text``, without XLA.

jaxlib loads the proto (``HloModule::CreateFromProto``) and prints it with
``HloPrintOptions::Default()`` plus ``print_large_constants``. This module reproduces
that: computations ordered by id and printed callees first from each root
computation (``MakeComputationPostOrder``), instructions in schedule order or in
XLA's post order (``ForEachInstructionPostOrder``), async ops in their sugared form,
names sanitised, the stack-frame table renumbered as XLA rebuilds it, and every
attribute in ``PrintWithCanonicalNameMap`` order.

The proto is decoded by the ``protobuf`` runtime with classes built from the
project's schema table (:mod:`hlo_dedup.io.proto_fields`). Every field that is set
must be one this package prints exactly (or one XLA's printer ignores); anything
else raises :class:`UnsupportedProto` naming the field. We never guess, and never
fall back to jaxlib: reading a ``.pb`` behaves the same with or without jax.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from itertools import accumulate, compress, repeat
from typing import Any

from ..plain import Record
from .proto_columns import ModuleData
from .proto_fields import Decoder
from .proto_instruction import Computation, Instructions, sanitized_name
from .proto_line import LinePrinter
from .proto_values import InvalidProto, ShapeText, UnsupportedProto, escape, frontend_attributes, shape_index

#: Opcodes printed with a payload between the parentheses instead of operands.
_PAYLOAD_OPCODES = frozenset(("parameter", "constant"))

__all__ = ["InvalidProto", "PrintedModule", "UnsupportedProto", "module_to_text", "print_module"]


def module_to_text(data: bytes) -> str:
    """The HLO text XLA prints for a serialized ``HloModuleProto``."""
    return print_module(data).text


def print_module(data: bytes | memoryview) -> PrintedModule:
    """A serialized ``HloModuleProto`` printed as XLA prints it, with where each part went.

    Raises :class:`InvalidProto` for a proto XLA would not load and
    :class:`UnsupportedProto` for content this printer cannot reproduce exactly.
    The cyclic garbage collector is paused meanwhile: everything built here is
    acyclic or short-lived, and collections over it would only cost time.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _ModulePrinter(ModuleData(data)).printed()
    finally:
        if enabled:
            gc.enable()


class PrintedModule(Record):
    """A module's text as printed from its proto, and the layout of that text, for
    building the IR on it without reading it again (:mod:`hlo_dedup.io.proto_ir`). It
    holds no part of the proto or of the printer's tables beyond what that needs, so
    they are freed before the IR is built.

    ``head`` is the text before the first computation (the header line, with the
    module's ``name`` and ``header_attributes``, then the stack-frame tables);
    ``computations`` the printed ones in print order as (name, thread, parameters),
    ``entry`` the entry's place among them; ``sequence`` the instruction (an index of
    ``names``, ``operands``, ...) of each line in print order, and ``openings`` each
    computation's (first line, root line, what is between it and the computation or
    header before it, its head up to its first line's name). A line is its
    indentation, ``ROOT`` on a root, then ``lengths`` characters: the instruction's
    name, ``shapes``, ``opcodes`` (as printed), its operands or its ``payloads`` (a
    parameter's number, a literal) and ``tails`` (what follows the ``)``). ``closing``
    ends the text.
    """

    __slots__ = ("text", "name", "header_attributes", "head", "closing", "computations", "entry", "sequence",
                 "openings", "lengths", "names", "operands", "shapes", "opcodes", "payloads", "tails")

    def __init__(self, *, text: str, name: str, header_attributes: list[tuple[str, str]], head: str, closing: str,
                 computations: list[tuple[str, str, list[int]]], entry: int, sequence: list[int],
                 openings: list[tuple[int, int, str, str]], lengths: list[int], names: list[str],
                 operands: list[list[int]], shapes: list[str], opcodes: list[str], payloads: dict[int, str],
                 tails: list[str]) -> None:
        self.text = text
        self.name = name
        self.header_attributes = header_attributes
        self.head = head
        self.closing = closing
        self.computations = computations
        self.entry = entry
        self.sequence = sequence
        self.openings = openings
        self.lengths = lengths
        self.names = names
        self.operands = operands
        self.shapes = shapes
        self.opcodes = opcodes
        self.payloads = payloads
        self.tails = tails


class _ModulePrinter:
    def __init__(self, data: ModuleData) -> None:
        self.module = module = data.module
        self.decoder = Decoder()
        self.shapes = ShapeText(self.decoder.decode, self.decoder.view)
        self.lines = LinePrinter(self.decoder, self.shapes)
        by_id: dict[int, Computation] = {}
        table = self.table = Instructions(data)
        for comp in table.computations:
            if comp.id in by_id:
                raise InvalidProto(f"computation id {comp.id} is used twice")
            by_id[comp.id] = comp
        self.computations = [by_id[i] for i in sorted(by_id)]  # HloModule sorts by proto id
        entry = by_id.get(module.entry_computation_id)
        if entry is None:
            raise InvalidProto(f"entry computation id {module.entry_computation_id} is not a computation")
        self.entry = entry
        if not module.HasField("host_program_shape"):
            raise InvalidProto("the module has no host_program_shape")
        self._check_unique_names()
        self._apply_async_threads()
        self.schedule = self._schedule(by_id)

    # -- loading ------------------------------------------------------------------------

    def _check_unique_names(self) -> None:
        names = [c.name for c in self.computations]
        if len(set(names)) != len(names):
            raise InvalidProto("computation names are not unique")
        if len(set(self.table.names)) != len(self.table.names):
            raise InvalidProto("instruction names are not unique in the module")

    def _apply_async_threads(self) -> None:
        """``HloAsyncStartInstruction::set_async_execution_thread``, run as each
        async-start is created: its wrapped computations take its thread."""
        table = self.table
        starts = [i for i in table.called if table.opcodes[i] == "async-start"]
        for i in sorted(starts):  # proto order
            table.set_async_thread(i, table.view(i).async_execution_thread or "main")

    def _schedule(self, by_id: dict[int, Computation]) -> dict[int, list[int]]:
        module = self.module
        if not module.HasField("schedule"):
            return {}
        schedule = self.decoder.decode("HloScheduleProto", module.schedule)
        ids = self.table.ids
        sequences: dict[int, list[int]] = {}
        for entry in schedule.sequences:
            comp = by_id.get(entry.key)
            if comp is None:
                raise InvalidProto(f"the schedule names computation id {entry.key}, which does not exist")
            order = [comp.index(x, ids) for x in entry.value.instruction_ids]
            if None in order or sorted(order) != list(range(comp.start, comp.stop)):  # type: ignore[type-var]
                raise InvalidProto(f"the schedule of {comp.name} does not list each instruction once")
            sequences[entry.key] = order  # type: ignore[assignment]
        for comp in self.computations:
            if comp.id not in sequences and not comp.is_fusion:
                raise InvalidProto(f"computation {comp.name} is not scheduled")
        return sequences

    # -- printing -----------------------------------------------------------------------

    def printed(self) -> PrintedModule:
        """The module: its header, then each computation's head and instruction lines in
        print order, joined in one pass over each line's prefix (indentation, ``ROOT``,
        what goes between computations) and text; and where each part of the text is.

        The printer is spent after this: it lets go of the proto and its tables once the
        lines' pieces are made, so that they are not held beside the joined text."""
        table = self.table
        frames = _StackFrames(self.module, self.decoder)
        frames.collect(map(table.metadata.__getitem__, table.order), self.lines)
        columns = self.lines.columns(table, frames.remap)
        printed = [c for c in self._computation_order() if not (c.is_async and c.single_instruction)]
        # (an async computation of one instruction prints through its sugared async-start)
        unscheduled = [c for c in printed if c.id not in self.schedule]
        post_order = table.post_order(unscheduled)
        offsets = dict(zip([c.position for c in unscheduled], accumulate([0] + [c.stop - c.start for c in unscheduled])))
        sequence: list[int] = []
        openings: list[tuple[int, int, str, str]] = []  # (first line, root line, closing before, head)
        name = sanitized_name(self.module.name)
        attributes = self._header_attributes()
        header = "HloModule " + name + "".join([f", {key}={value}" for key, value in attributes])
        frames_text = frames.text()
        between = header + frames_text + "\n\n"
        for comp in printed:
            order = self.schedule.get(comp.id)
            if order is None:
                at = offsets[comp.position]
                order = post_order[at : at + comp.stop - comp.start]
            openings.append((len(sequence), len(sequence) + order.index(comp.root), between, self.computation_head(comp)))
            sequence += order
            between = self.closing(comp) + "\n\n"
        computations = [(c.name, c.thread, c.parameters) for c in printed]
        entry = printed.index(self.entry)
        names, operands = table.names, table.operands
        del table, printed, unscheduled, post_order, frames
        vars(self).clear()  # the proto and the tables read from it
        # Each instruction's line, then line after line its prefix and the line.
        refs, shapes, opcodes, args, tails = columns
        del columns
        payloads = {i: args[i] for i in compress(range(len(opcodes)), map(_PAYLOAD_OPCODES.__contains__, opcodes))}
        lines = list(map("".join, zip(refs, repeat(" = "), shapes, repeat(" "), opcodes, repeat("("), args,
                                      repeat(")"), tails)))
        del refs, args
        pieces = ["\n  "] * (2 * len(sequence))
        pieces[1::2] = list(map(lines.__getitem__, sequence))
        del lines  # (the lines of instructions not printed: an async op's wrapped one)
        lengths = list(map(len, pieces[1::2]))
        for first, root, before, head in openings:
            pieces[2 * first] = before + head
            pieces[2 * root] += "ROOT "
        pieces.append(between)
        text = "".join(pieces)  # (a `+ between` after the join would copy the whole text again)
        del pieces
        return PrintedModule(
            text=text, name=name, header_attributes=attributes, head=header + frames_text[:-1], closing=between,
            computations=computations, entry=entry, sequence=sequence, openings=openings, lengths=lengths,
            names=names, operands=operands, shapes=shapes, opcodes=opcodes, payloads=payloads, tails=tails,
        )

    def _computation_order(self) -> list[Computation]:
        """``MakeComputationPostOrder(dfs_postorder=true)``."""
        called = {c.position for cs in self.table.called.values() for c in cs}
        added: set[int] = set()
        order: list[Computation] = []
        for comp in self.computations:
            if comp.position in called:
                continue
            for embedded in self.table.embedded_computations(comp):
                if embedded.position not in added:
                    added.add(embedded.position)
                    order.append(embedded)
            added.add(comp.position)
            order.append(comp)
        if len(order) != len(self.computations):
            raise InvalidProto("some computations are only reachable through a cycle of calls")
        return order

    def _header_attributes(self) -> list[tuple[str, str]]:
        """The header line's attributes (key, value text), in print order."""
        module = self.module
        attributes = []
        if self.schedule:
            attributes.append(("is_scheduled", "true"))
        aliasing = self._input_output_alias()
        if aliasing:
            attributes.append(("input_output_alias", "{ " + aliasing + " }"))
        donors = self._buffer_donors()
        if donors:
            attributes.append(("buffer_donor", "{ " + donors + " }"))
        attributes.append(("entry_computation_layout", "{" + self._entry_layout() + "}"))
        if module.frontend_attributes:
            text = frontend_attributes(self.decoder.decode("FrontendAttributes", module.frontend_attributes))
            if text != "{}":
                attributes.append(("frontend_attributes", text))
        return attributes

    def _entry_layout(self) -> str:
        """``ComputationLayout::Print`` of the host program shape."""
        program = self.decoder.decode("ProgramShapeProto", self.module.host_program_shape)
        text = "("
        for i, param in enumerate(program.parameters):
            if i:
                text += f", /*index={i}*/" if i % 5 == 0 else ", "
            text += self.shapes.text(param.SerializeToString())
        if not program.HasField("result"):
            raise InvalidProto("the host program shape has no result")
        return text + ")->" + self.shapes.text(program.result.SerializeToString())

    def _input_output_alias(self) -> str:
        """``HloInputOutputAliasConfig::ToShortString``, in output shape-index order."""
        if not self.module.HasField("input_output_alias"):
            return ""
        aliasing = self.decoder.decode("HloInputOutputAliasProto", self.module.input_output_alias)
        root = self.shapes.proto(self.table.shapes[self.entry.root])
        entries = []
        seen = set()
        for e in aliasing.entries:
            index = tuple(e.output_shape_index)
            if index in seen:
                raise InvalidProto(f"output {shape_index(index)} is aliased twice")
            seen.add(index)
            _check_shape_index(root, index)
            kind = "must-alias" if e.kind == 2 else "may-alias"
            text = f"{shape_index(index)}: ({e.parameter_number}, {shape_index(e.parameter_shape_index)}, {kind})"
            entries.append((index, text))
        entries.sort(key=lambda item: item[0])
        return ", ".join(text for _, text in entries)

    def _buffer_donors(self) -> str:
        """``HloBufferDonorConfig::ToShortString``, ordered by (parameter, index)."""
        if not self.module.HasField("buffer_donor"):
            return ""
        donor = self.decoder.decode("HloBufferDonorProto", self.module.buffer_donor)
        donors = sorted({(e.parameter_number, tuple(e.parameter_shape_index)) for e in donor.entries})
        return ", ".join(f"({p}, {shape_index(i)})" for p, i in donors)

    def closing(self, comp: Computation) -> str:
        return "\n}" if comp.thread == "main" else f'\n}}, execution_thread="{comp.thread}"'

    def computation_head(self, comp: Computation) -> str:
        shapes, names, text_without_layout = self.table.shapes, self.table.names, self.shapes.text_without_layout
        params = ", ".join([f"{names[p]}: {text_without_layout(shapes[p])}" for p in comp.parameters])
        result = text_without_layout(shapes[comp.root])
        return ("ENTRY %" if comp is self.entry else "%") + f"{comp.name} ({params}) -> {result} {{\n  "


def _check_shape_index(shape: Any, index: tuple[int, ...]) -> None:
    for i in index:
        if shape.element_type != 13 or not 0 <= i < len(shape.tuple_shapes):
            raise InvalidProto(f"input_output_alias output index {shape_index(index)} is not in the shape")
        shape = shape.tuple_shapes[i]


class _StackFrames:
    """The module's stack-frame table as XLA rebuilds it while loading: each
    instruction's frame chain is re-added, root frame first, computation by
    computation in proto order and instruction by instruction in id order."""

    def __init__(self, module: Any, decoder: Decoder) -> None:
        self.source = (
            decoder.decode("StackFrameIndexProto", module.stack_frame_index)
            if module.HasField("stack_frame_index")
            else None
        )
        self.files: dict[str, int] = {}
        self.functions: dict[str, int] = {}
        self.locations: dict[tuple[int, ...], int] = {}
        self.frames: dict[tuple[int, int], int] = {}
        self.new_ids: dict[int, int] = {}  # an instruction's frame id -> the new one (0: dropped)
        self._added: dict[int, int] = {}  # every frame of the table added so far -> its new id

    def collect(self, metadata_list: Iterable[bytes], lines: LinePrinter) -> None:
        new_ids = self.new_ids
        for metadata in dict.fromkeys(metadata_list):  # first occurrences, in order
            if metadata:
                old = lines.metadata_of(metadata)[1]
                if old and old not in new_ids:
                    new_ids[old] = self._add(old)

    def remap(self, old: int) -> int:
        return self.new_ids[old]

    def _add(self, old: int) -> int:
        source = self.source
        if source is None or not 0 < old <= len(source.stack_frames):
            return 0  # XLA warns "Invalid stack_frame_id" and drops it
        # Walk up to the first frame already added (each is added once: a chain shared by
        # thousands of instructions, or one thousands deep, is not walked again).
        added = self._added
        chain = []
        seen = set()
        while old and old not in added:
            if old in seen or not 0 < old <= len(source.stack_frames):
                raise InvalidProto("the stack frame table has a cycle or a dangling parent")
            seen.add(old)
            frame = source.stack_frames[old - 1]
            chain.append((old, frame))
            old = frame.parent_frame_id
        parent = added[old] if old else 0
        for old, frame in reversed(chain):
            if not 0 < frame.file_location_id <= len(source.file_locations):
                raise InvalidProto("a stack frame names a missing file location")
            loc = source.file_locations[frame.file_location_id - 1]
            if not (0 < loc.file_name_id <= len(source.file_names)
                    and 0 < loc.function_name_id <= len(source.function_names)):
                raise InvalidProto("a file location names a missing file or function")
            file_id = self.files.setdefault(source.file_names[loc.file_name_id - 1], len(self.files) + 1)
            func_id = self.functions.setdefault(source.function_names[loc.function_name_id - 1], len(self.functions) + 1)
            key = (file_id, func_id, loc.line, loc.column, loc.end_line, loc.end_column)
            loc_id = self.locations.setdefault(key, len(self.locations) + 1)
            parent = added[old] = self.frames.setdefault((loc_id, parent), len(self.frames) + 1)
        return parent

    def text(self) -> str:
        """``HloModule::PrintStackFrameIndex``."""
        if not self.frames:
            return ""
        out = ["\n\nFileNames\n"]
        out.extend(f'{i} "{escape(name)}"\n' for name, i in self.files.items())
        out.append("\nFunctionNames\n")
        out.extend(f'{i} "{escape(name)}"\n' for name, i in self.functions.items())
        out.append("\nFileLocations\n")
        for (file_id, func_id, line, column, end_line, end_column), i in self.locations.items():
            out.append(f"{i} {{file_name_id={file_id} function_name_id={func_id} line={line} "
                       f"end_line={end_line} column={column} end_column={end_column}}}\n")
        out.append("\nStackFrames\n")
        for (loc_id, parent), i in self.frames.items():
            out.append(f"{i} {{file_location_id={loc_id} parent_frame_id={parent + 1}}}\n")
        return "".join(out)
