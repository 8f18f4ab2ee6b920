"""HloComputation: an ordered list of instructions with a root and parameters."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable, Iterator

from .instruction import HloInstruction, HloIrError
from .shape import shapes_compatible
from .source import ComputationSpan

if TYPE_CHECKING:
    from .module import HloModule

_NUMERIC_SUFFIX = re.compile(r"^(.*?)\.(\d+)$")


class HloComputation:
    """A computation. Instruction order is the text order (the schedule, if scheduled)."""

    __slots__ = (
        "name",
        "parent",
        "_instructions",
        "_by_name",
        "parameters",
        "root",
        "is_entry",
        "execution_thread",
        "span",
        "_sig",
        "_changed",
        "_reorder",
        "fusion_instruction",
    )

    def __init__(self, name: str, *, is_entry: bool = False, execution_thread: str = "main",
                 span: ComputationSpan | None = None) -> None:
        self.name = name
        self.parent: HloModule | None = None
        self._instructions: dict[HloInstruction, None] = {}
        self._by_name: dict[str, HloInstruction] = {}
        self.parameters: list[HloInstruction] = []
        self.root: HloInstruction | None = None
        self.is_entry = is_entry
        self.execution_thread = execution_thread
        self.span = span
        self._sig = True  # False once the printed signature must be regenerated
        self._changed = False
        self._reorder = False  # True once instructions may be out of definition order
        self.fusion_instruction: HloInstruction | None = None

    def __repr__(self) -> str:
        return f"<HloComputation {self.name} ({len(self._instructions)} instructions)>"

    # ----------------------------------------------------------------- access
    @property
    def instructions(self) -> list[HloInstruction]:
        """Instructions in order (text order for parsed modules; new ones appended), as a
        list the caller may keep while editing the computation."""
        return list(self._instructions)

    def __iter__(self) -> Iterator[HloInstruction]:
        """The instructions in order, without a copy: like XLA's `instructions()` range, do
        not add or remove instructions while iterating (use `instructions` for that)."""
        return iter(self._instructions)

    def __contains__(self, inst: object) -> bool:
        return inst in self._instructions

    def __len__(self) -> int:
        return len(self._instructions)

    @property
    def instruction_count(self) -> int:
        return len(self._instructions)

    def positions(self) -> dict[HloInstruction, int]:
        """Each instruction's index in `instructions` (a copy of the order's own dict, filled
        in place: no rehashing as it grows)."""
        positions: dict[HloInstruction, int] = self._instructions.copy()  # type: ignore[assignment]
        positions.update(zip(self._instructions, range(len(positions))))
        return positions

    def shape_texts(self) -> list[str | None]:
        """Each instruction's `shape_text`, in order: for an analysis that reads them all (one
        attribute load each instead of a property call, a fifth of the cost)."""
        return [inst._shape_text for inst in self._instructions]

    def get_instruction(self, name: str) -> HloInstruction | None:
        return self._by_name.get(name)

    def name_lookup(self) -> Callable[[str], HloInstruction | None]:
        """A fast `name -> instruction or None` function that sees later additions (readers
        resolve millions of operand names with it)."""
        return self._by_name.get

    @property
    def percent(self) -> bool:
        """True when names are spelled `%name` (the text's style; XLA's default)."""
        return self.span.percent if self.span is not None else True

    @property
    def definition_ordered(self) -> bool:
        """True while `instructions` is known to list every instruction after its operands
        (as read; nothing added or re-rooted since)."""
        return not self._reorder

    def parameter(self, number: int) -> HloInstruction:
        return self.parameters[number]

    @property
    def num_parameters(self) -> int:
        return len(self.parameters)

    def is_fusion_computation(self) -> bool:
        return self.fusion_instruction is not None

    def mark_changed(self) -> None:
        self._changed = True

    # -------------------------------------------------------------- mutation
    def append_instruction(self, inst: HloInstruction) -> HloInstruction:
        """Append an instruction as read, keeping its name: for readers building a
        computation in order, which keep names unique themselves. A pass adds instructions
        with `add_instruction`."""
        inst.parent = self
        self._instructions[inst] = None
        self._by_name[inst.name] = inst
        return inst

    def add_instruction(self, inst: HloInstruction, new_name: str = "") -> HloInstruction:
        """AddInstruction: append `inst`, giving it a module-unique name (XLA-style `.N`)."""
        if inst.parent is not None:
            raise HloIrError(f"instruction {inst.name!r} already belongs to a computation")
        wanted = new_name or inst.name
        inst.name = self._unique_name(wanted)
        span = inst.span
        span.edited = True
        span.lead = (next(iter(self._instructions)).span.lead if self._instructions else "") or "\n  "
        span.percent = self.percent
        self.append_instruction(inst)
        if self.parent is not None:
            self.parent._note_name(inst.name)
            self.parent.touch()
        self._reorder = True
        self._changed = True
        return inst

    def _unique_name(self, wanted: str) -> str:
        taken = self.parent.instruction_names() if self.parent is not None else set(self._by_name)
        if wanted not in taken:
            return wanted
        m = _NUMERIC_SUFFIX.match(wanted)
        base = m.group(1) if m else wanted
        n = 1
        prefix = base + "."
        for name in taken:
            suffix = name[len(prefix):]
            if name.startswith(prefix) and suffix.isascii() and suffix.isdigit() and len(suffix) <= 18:
                n = max(n, int(suffix) + 1)
        while f"{base}.{n}" in taken:
            n += 1
        return f"{base}.{n}"

    def set_root(self, new_root: HloInstruction, *, accept_different_shape: bool = False) -> None:
        """set_root_instruction: move the ROOT marker (shape-checked unless told otherwise)."""
        old = self.root
        if old is new_root:
            return
        if (
            not accept_different_shape
            and old is not None
            and self.fusion_instruction is None
            and not shapes_compatible(old.shape, new_root.shape)
        ):
            raise HloIrError(
                f"RET_CHECK failure ShapeUtil::Compatible(root, new_root) in {self.name}: "
                f"{old.shape.to_text()} vs {new_root.shape.to_text()}"
            )
        self.root = new_root
        if old is not None:
            old.mark_changed()
            if old.shape_text != new_root.shape_text:
                self._sig = False
        new_root.mark_changed()
        self._reorder = True

    def is_safely_removable(
        self,
        inst: HloInstruction,
        *,
        ignore_control_dependency: bool = False,
        remove_dead_param_from_entry: bool = False,
    ) -> bool:
        """IsSafelyRemovable (xla-semantics §3.1), without call-graph callers."""
        if not ignore_control_dependency and inst.has_control_dependencies():
            return False
        if inst.opcode == "parameter":
            if inst.parent is None:
                return True
            if self.is_entry and not remove_dead_param_from_entry:
                return False
            return self.fusion_instruction is not None
        return True

    def dead_and_callers(self) -> tuple[list[HloInstruction], list[HloInstruction]]:
        """The instructions XLA's IsDead holds for (no users, not the root), in order, and
        the instructions that call computations, in order: where HloDCE starts in a
        computation and where it goes next. One loop without a call per instruction; a
        module's thousands of small fusion bodies make a comprehension's own start-up a
        visible share, so there is none."""
        root = self.root
        dead: list[HloInstruction] = []
        callers: list[HloInstruction] = []
        for inst in self._instructions:
            if not inst._users and inst is not root:
                dead.append(inst)
            if inst.called_computations:
                callers.append(inst)
        return dead, callers

    def remove_instruction(self, inst: HloInstruction) -> None:
        """RemoveInstruction: the instruction must be dead, safely removable, edge-free."""
        if inst.parent is not self:
            raise HloIrError(f"{inst.name!r} is not in computation {self.name!r}")
        if not inst.is_dead():
            raise HloIrError(f"RET_CHECK failure instruction->IsDead() for {inst.name!r}")
        if inst.has_control_dependencies():
            raise HloIrError(f"RET_CHECK failure: {inst.name!r} has control dependencies")
        if not self.is_safely_removable(inst):
            raise HloIrError(f"RET_CHECK failure IsSafelyRemovable({inst.name!r})")
        self.force_remove_instruction(inst)

    def force_remove_instruction(self, inst: HloInstruction) -> None:
        """ForceRemoveInstruction: remove a dead instruction without the safety check
        (parameters too); its remaining control edges are dropped."""
        if inst.parent is not self:
            raise HloIrError(f"{inst.name!r} is not in computation {self.name!r}")
        if not inst.is_dead():
            raise HloIrError(f"RET_CHECK failure instruction->IsDead() for {inst.name!r}")
        inst._detach_from_source()
        inst.detach()
        del self._instructions[inst]
        if self._by_name.get(inst.name) is inst:
            del self._by_name[inst.name]
        inst.parent = None
        self._changed = True
        if self.parent is not None:
            self.parent.touch()
            self.parent._forget_name(inst.name)

    def remove_instruction_and_unused_operands(self, inst: HloInstruction) -> bool:
        """RemoveInstructionAndUnusedOperands: remove `inst`, then operands it left dead.

        Side-effecting operands (other than `inst` itself) and operands with control edges
        stay. Dead fusion parameters are removed with the matching fusion operand.
        Returns True if any parameter was removed.
        """
        if inst.is_root:
            raise HloIrError(f"RET_CHECK failure: cannot remove root {inst.name!r}")
        if not inst.is_dead():
            raise HloIrError(f"RET_CHECK failure instruction->IsDead() for {inst.name!r}")
        if not self.is_safely_removable(inst):
            raise HloIrError(f"RET_CHECK failure IsSafelyRemovable({inst.name!r})")
        removed: set[HloInstruction] = set()
        params: list[HloInstruction] = []
        worklist = [inst]
        head = 0
        while head < len(worklist):
            item = worklist[head]
            head += 1
            if item in removed or item.parent is not self or not item.is_dead():
                continue
            if not self.is_safely_removable(item):
                continue
            if item is not inst and item.has_side_effect():
                continue
            worklist.extend(item.operands)
            removed.add(item)
            if item.opcode == "parameter":
                params.append(item)
            else:
                self.force_remove_instruction(item)
        if not params:
            return False
        fusion = self.fusion_instruction
        if fusion is None or fusion.parent is None:
            return False
        for param in sorted(params, key=lambda p: -p.parameter_number):
            number = param.parameter_number
            self.remove_parameter(number)
            operand = fusion.operands[number]
            del fusion.operands[number]
            if operand not in fusion.operands:
                operand._users.pop(fusion, None)
            fusion.mark_changed()
            caller = fusion.parent
            if operand.is_dead() and caller.is_safely_removable(operand):
                caller.remove_instruction_and_unused_operands(operand)
        return True

    def remove_parameter(self, number: int) -> None:
        """RemoveParameter: drop dead parameter `number`; later ones become `param_<n>`."""
        param = self.parameters[number]
        if param.user_count or param.is_root:
            raise HloIrError(f"parameter {number} of {self.name!r} is still used")
        self.force_remove_instruction(param)
        del self.parameters[number]
        for n in range(number, len(self.parameters)):
            old = self.parameters[n]
            fresh = HloInstruction(
                self._unique_name(f"param_{n}"), "parameter", old.shape_text, (), old.attributes,
                payload=str(n),
            )
            fresh.span = old.span.styled_like()
            self._insert_before(fresh, old)
            old.replace_all_uses_with_different_shape(fresh)
            self.force_remove_instruction(old)
            self.parameters[n] = fresh
        self._sig = False
        self._changed = True

    def _insert_before(self, inst: HloInstruction, anchor: HloInstruction) -> None:
        items = list(self._instructions)
        at = items.index(anchor)
        items.insert(at, inst)
        inst.parent = self
        self._instructions = dict.fromkeys(items)
        self._by_name[inst.name] = inst
        if self.parent is not None:
            self.parent._note_name(inst.name)

    def rename_instruction(self, inst: HloInstruction, name: str) -> None:
        """SetAndSanitizeName for a name known to be free in the module."""
        if self._by_name.get(inst.name) is inst:
            del self._by_name[inst.name]
        module = self.parent
        if module is not None:
            module._forget_name(inst.name)
            module._note_name(name)
        inst.name = name
        self._by_name[name] = inst
        inst.mark_changed()

    # ------------------------------------------------------------- analysis
    def post_order(self) -> list[HloInstruction]:
        """MakeInstructionPostOrder: DFS from each user-less instruction in list order;
        control predecessors and operands before the instruction."""
        visited: set[HloInstruction] = set()
        order: list[HloInstruction] = []
        for start in self._instructions:
            if start._users or start in visited:
                continue
            stack: list[tuple[HloInstruction, bool]] = [(start, False)]
            while stack:
                node, expanded = stack.pop()
                if expanded:
                    order.append(node)
                    continue
                if node in visited:
                    continue
                visited.add(node)
                stack.append((node, True))
                for op in reversed(node.operands):
                    if op not in visited:
                        stack.append((op, False))
                for pred in reversed(node.control_predecessors):
                    if pred not in visited:
                        stack.append((pred, False))
        if len(order) != len(self._instructions):
            raise HloIrError(f"computation {self.name!r} contains a cycle")
        return order

    def has_side_effect(self) -> bool:
        """True if any instruction (recursively through called computations) has one.

        Callees are settled first, deepest first, without recursion: a chain of thousands
        of calls is valid HLO. A computation reached again through a cycle of calls (which
        only malformed input has) counts as side-effect free there."""
        module = self.parent
        cache = module._side_effect_cache() if module is not None else {}
        known = cache.get(self)
        if known is not None:
            return known
        order: list[HloComputation] = []
        entered = {self}
        stack = [(self, _callees(self))]
        while stack:
            comp, callees = stack[-1]
            for callee in callees:
                if callee not in entered and callee not in cache:
                    entered.add(callee)
                    stack.append((callee, _callees(callee)))
                    break
            else:
                stack.pop()
                order.append(comp)
        for comp in order:
            cache[comp] = any(
                inst.has_side_effect_no_recurse() or any(cache.get(c, False) for c in inst.called_computations)
                for inst in comp._instructions
            )
        return cache[self]

    def to_text(self) -> str:
        from .printer import format_computation

        return format_computation(self)


def _callees(comp: HloComputation) -> Iterator[HloComputation]:
    return (callee for inst in comp._instructions for callee in inst.called_computations)


def deduplicate_fusion_operands(fusion: HloInstruction) -> None:
    """DeduplicateFusionOperands: a fusion operand used twice keeps its first parameter."""
    if not fusion.called_computations:
        return
    body = fusion.called_computations[0]
    first_index: dict[HloInstruction, int] = {}
    duplicates: list[int] = []
    for i, op in enumerate(fusion.operands):
        if op in first_index:
            duplicates.append(i)
        else:
            first_index[op] = i
    if not duplicates or len(body.parameters) != len(fusion.operands):
        return
    for i in reversed(duplicates):
        keep = body.parameters[first_index[fusion.operands[i]]]
        body.parameters[i].replace_all_uses_with_different_shape(keep)
        body.remove_parameter(i)
        del fusion.operands[i]
    fusion.mark_changed()
