"""HloModuleProto -> HLO text, byte-identical to jaxlib's ``module_proto_to_text``, without XLA.

jaxlib loads the proto (``HloModule::CreateFromProto``) and prints it with
``HloPrintOptions::Default()`` plus ``print_large_constants``. This module reproduces
that: computations ordered by id and printed callees first from each root
computation (``MakeComputationPostOrder``), instructions in schedule order or in
XLA's post order (``ForEachInstructionPostOrder``, channel dependencies included),
names sanitised, the stack-frame table re-numbered as XLA rebuilds it, and every
attribute in ``PrintWithCanonicalNameMap`` order.

The proto is decoded by the ``protobuf`` runtime with classes built from the
project's schema table (:mod:`hlo_dedup.io.hlo_schema`). Before printing,
:func:`hlo_dedup.io.proto_fields.check_supported` makes sure every field that is
set is one this module prints exactly (or one XLA's printer ignores); anything else
raises :class:`UnsupportedProto` naming the field. We never fall back to a guess, and
never to jaxlib: reading a ``.pb`` behaves the same with or without jax installed.
"""

from __future__ import annotations

from typing import Any

from .proto_fields import check_supported, module_class
from .proto_instruction import Computation, InstructionPrinter, sanitized_name
from .proto_values import InvalidProto, ShapeText, UnsupportedProto, frontend_attributes, has_entries, shape_index
from ..text.escape import c_escape

__all__ = ["InvalidProto", "UnsupportedProto", "module_to_text"]


def module_to_text(data: bytes) -> str:
    """The HLO text XLA prints for a serialized ``HloModuleProto``.

    Raises :class:`InvalidProto` for a proto XLA would not load and
    :class:`UnsupportedProto` for content this printer cannot reproduce exactly.
    """
    module = module_class().FromString(data)
    check_supported(module, data)
    return _ModulePrinter(module).text()


def _local_id(proto_id: int) -> int:
    """``HloInstruction::CalculateLocalId``: the low 32 bits, as int32."""
    low = proto_id & 0xFFFFFFFF
    return low - (1 << 32) if low >= 1 << 31 else low


class _ModulePrinter:
    def __init__(self, module: Any) -> None:
        self.module = module
        self.shapes = ShapeText()
        protos = list(module.computations)
        by_id: dict[int, Computation] = {}
        self.creation_order: list[Computation] = []
        for proto in protos:
            if proto.id in by_id:
                raise InvalidProto(f"computation id {proto.id} is used twice")
            comp = Computation(proto, _local_id)
            by_id[proto.id] = comp
            self.creation_order.append(comp)
        for comp in self.creation_order:
            comp.link(by_id)
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
        comp_names: set[str] = set()
        instr_names: set[str] = set()
        for comp in self.computations:
            if comp.name in comp_names:
                raise InvalidProto(f"computation name {comp.name} is not unique")
            comp_names.add(comp.name)
            for ins in comp.instructions:
                if ins.name in instr_names:
                    raise InvalidProto(f"instruction name {ins.name} is not unique")
                instr_names.add(ins.name)

    def _apply_async_threads(self) -> None:
        """``HloAsyncStartInstruction::set_async_execution_thread``, run as each
        async-start is created: its wrapped computations take its thread."""
        for comp in self.creation_order:
            for ins in comp.creation_order:
                if ins.opcode == "async-start":
                    ins.set_async_thread(ins.proto.async_execution_thread or "main")

    def _schedule(self, by_id: dict[int, Computation]) -> dict[int, list[Any]]:
        module = self.module
        if not module.HasField("schedule"):
            return {}
        sequences: dict[int, list[Any]] = {}
        for entry in module.schedule.sequences:
            comp = by_id.get(entry.key)
            if comp is None:
                raise InvalidProto(f"the schedule names computation id {entry.key}, which does not exist")
            order = []
            for instr_id in entry.value.instruction_ids:
                ins = comp.by_local_id.get(_local_id(instr_id))
                if ins is None:
                    raise InvalidProto(f"the schedule of {comp.name} names instruction id {instr_id}")
                order.append(ins)
            if len(order) != len(comp.instructions) or len(set(map(id, order))) != len(order):
                raise InvalidProto(f"the schedule of {comp.name} does not list each instruction once")
            sequences[entry.key] = order
        for comp in self.computations:
            if comp.proto.id not in sequences and not comp.is_fusion:
                raise InvalidProto(f"computation {comp.name} is not scheduled")
        return sequences

    # -- printing -----------------------------------------------------------------------

    def text(self) -> str:
        order = self._computation_order()
        channel_dependencies = not self._single_partition_device_assignment()
        printer = InstructionPrinter(self.shapes)
        bodies = []
        for comp in order:
            if comp.is_async and comp.single_instruction:
                continue  # printed through its sugared async-start
            sequence = self.schedule.get(comp.proto.id)
            instructions = sequence if sequence is not None else comp.post_order(channel_dependencies)
            bodies.append((comp, instructions))
        frames = _StackFrames(self.module)
        for comp in self.creation_order:
            for ins in comp.instructions:
                frames.remap(ins)
        parts = [self._header(), frames.text(), "\n\n"]
        for comp, instructions in bodies:
            parts.append(self._computation_text(comp, instructions, printer))
            parts.append("\n\n")
        return "".join(parts)

    def _single_partition_device_assignment(self) -> bool:
        """``ComputeChannelDependencies`` is empty for a static one-computation device
        assignment (the config never turns on SPMD partitioning when loading a proto)."""
        module = self.module
        return module.HasField("device_assignment") and module.device_assignment.computation_count == 1

    def _computation_order(self) -> list[Computation]:
        """``MakeComputationPostOrder(dfs_postorder=true)``."""
        called: set[int] = set()
        for comp in self.computations:
            for ins in comp.instructions:
                for callee in ins.called:
                    called.add(id(callee))
        added: set[int] = set()
        order: list[Computation] = []
        for comp in self.computations:
            if id(comp) in called:
                continue
            for embedded in comp.embedded_computations():
                if id(embedded) not in added:
                    added.add(id(embedded))
                    order.append(embedded)
            added.add(id(comp))
            order.append(comp)
        if len(order) != len(self.computations):
            raise InvalidProto("some computations are only reachable through a cycle of calls")
        return order

    def _header(self) -> str:
        module = self.module
        parts = ["HloModule ", sanitized_name(module.name)]
        if self.schedule:
            parts.append(", is_scheduled=true")
        aliasing = self._input_output_alias()
        if aliasing:
            parts.append(", input_output_alias={ " + aliasing + " }")
        donors = self._buffer_donors()
        if donors:
            parts.append(", buffer_donor={ " + donors + " }")
        parts.append(", entry_computation_layout={" + self._entry_layout() + "}")
        if module.HasField("frontend_attributes") and has_entries(module.frontend_attributes):
            parts.append(", frontend_attributes=" + frontend_attributes(module.frontend_attributes))
        return "".join(parts)

    def _entry_layout(self) -> str:
        """``ComputationLayout::Print`` of the host program shape."""
        program = self.module.host_program_shape
        params = [self.shapes.text(p) for p in program.parameters]
        text = "("
        for i, param in enumerate(params):
            if i:
                text += f", /*index={i}*/" if i % 5 == 0 else ", "
            text += param
        if not program.HasField("result"):
            raise InvalidProto("the host program shape has no result")
        return text + ")->" + self.shapes.text(program.result)

    def _input_output_alias(self) -> str:
        """``HloInputOutputAliasConfig::ToShortString``, in output shape-index order."""
        if not self.module.HasField("input_output_alias"):
            return ""
        root = self.entry.root.shape_proto
        entries = []
        seen = set()
        for e in self.module.input_output_alias.entries:
            index = tuple(e.output_shape_index)
            if index in seen:
                raise InvalidProto(f"output {shape_index(index)} is aliased twice")
            seen.add(index)
            _check_shape_index(root, index, "input_output_alias output index")
            kind = "must-alias" if e.kind == 2 else "may-alias"
            entries.append((index, f"{shape_index(index)}: ({e.parameter_number}, "
                            f"{shape_index(e.parameter_shape_index)}, {kind})"))
        entries.sort(key=lambda item: item[0])
        return ", ".join(text for _, text in entries)

    def _buffer_donors(self) -> str:
        """``HloBufferDonorConfig::ToShortString``, ordered by (parameter, index)."""
        if not self.module.HasField("buffer_donor"):
            return ""
        donors = sorted({(e.parameter_number, tuple(e.parameter_shape_index)) for e in self.module.buffer_donor.entries})
        return ", ".join(f"({p}, {shape_index(i)})" for p, i in donors)

    def _computation_text(self, comp: Computation, instructions: list[Any], printer: InstructionPrinter) -> str:
        params = ", ".join(f"{p.name}: {self.shapes.text_without_layout(p.shape_proto)}" for p in comp.parameters)
        result = self.shapes.text_without_layout(comp.root.shape_proto)
        head = ("ENTRY %" if comp is self.entry else "%") + f"{comp.name} ({params}) -> {result} {{\n"
        lines = [head]
        root = comp.root
        for ins in instructions:
            lines.append("  ROOT " if ins is root else "  ")
            lines.append(printer.line(ins))
            lines.append("\n")
        lines.append("}")
        if comp.thread != "main":
            lines.append(f', execution_thread="{comp.thread}"')
        return "".join(lines)


def _check_shape_index(shape: Any, index: tuple[int, ...], what: str) -> None:
    for i in index:
        if shape.element_type != 13 or not 0 <= i < len(shape.tuple_shapes):
            raise InvalidProto(f"{what} {shape_index(index)} is not in the shape")
        shape = shape.tuple_shapes[i]


class _StackFrames:
    """The module's stack-frame table as XLA rebuilds it while loading: each
    instruction's frame chain is re-added, root frame first, computation by
    computation in proto order and instruction by instruction in id order."""

    def __init__(self, module: Any) -> None:
        self.source = module.stack_frame_index if module.HasField("stack_frame_index") else None
        self.files: dict[str, int] = {}
        self.functions: dict[str, int] = {}
        self.locations: dict[tuple[int, ...], int] = {}
        self.frames: dict[tuple[int, int], int] = {}
        self.memo: dict[int, int] = {}

    def remap(self, ins: Any) -> None:
        old = ins.stack_frame_id
        if old:
            new = self.memo.get(old)
            if new is None:
                new = self.memo[old] = self._add(old)
            ins.stack_frame_id = new

    def _add(self, old: int) -> int:
        source = self.source
        if source is None or not 0 < old <= len(source.stack_frames):
            return 0  # XLA warns "Invalid stack_frame_id" and drops it
        chain = []
        seen = set()
        while old:
            if old in seen or not 0 < old <= len(source.stack_frames):
                raise InvalidProto("the stack frame table has a cycle or a dangling parent")
            seen.add(old)
            frame = source.stack_frames[old - 1]
            chain.append(frame)
            old = frame.parent_frame_id
        parent = 0
        for frame in reversed(chain):
            if not 0 < frame.file_location_id <= len(source.file_locations):
                raise InvalidProto("a stack frame names a missing file location")
            loc = source.file_locations[frame.file_location_id - 1]
            if not (0 < loc.file_name_id <= len(source.file_names) and 0 < loc.function_name_id <= len(source.function_names)):
                raise InvalidProto("a file location names a missing file or function")
            file_id = self.files.setdefault(source.file_names[loc.file_name_id - 1], len(self.files) + 1)
            func_id = self.functions.setdefault(source.function_names[loc.function_name_id - 1], len(self.functions) + 1)
            key = (file_id, func_id, loc.line, loc.column, loc.end_line, loc.end_column)
            loc_id = self.locations.setdefault(key, len(self.locations) + 1)
            parent = self.frames.setdefault((loc_id, parent), len(self.frames) + 1)
        return parent

    def text(self) -> str:
        """``HloModule::PrintStackFrameIndex``."""
        if not self.frames:
            return ""
        out = ["\n\nFileNames\n"]
        out.extend(f'{i} "{c_escape(name)}"\n' for name, i in self.files.items())
        out.append("\nFunctionNames\n")
        out.extend(f'{i} "{c_escape(name)}"\n' for name, i in self.functions.items())
        out.append("\nFileLocations\n")
        for (file_id, func_id, line, column, end_line, end_column), i in self.locations.items():
            out.append(f"{i} {{file_name_id={file_id} function_name_id={func_id} line={line} "
                       f"end_line={end_line} column={column} end_column={end_column}}}\n")
        out.append("\nStackFrames\n")
        for (loc_id, parent), i in self.frames.items():
            out.append(f"{i} {{file_location_id={loc_id} parent_frame_id={parent + 1}}}\n")
        return "".join(out)
