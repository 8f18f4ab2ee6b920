"""HloInstruction: one HLO operation, kept lossless.

An instruction read from text keeps a `SourceSpan` into its module's source. As long as
nothing about it changes, the printer re-emits that text byte for byte; any edit (operands,
root flag, attributes, shape) marks the span edited so the printer regenerates the line in
XLA's format. Attributes stay raw `(key, value)` strings until a typed accessor asks for
one (like XLA's lazily parsed backend config), which keeps reading cheap on
million-instruction modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator

from ..syntax.lexer import at_top_level
from . import attributes as _attributes
from .opcodes import (
    ALWAYS_SIDE_EFFECTING,
    LAYOUT_CONSTRAINABLE_COLLECTIVES,
    OPCODES,
    is_known_opcode,
)
from .shape import Shape, shapes_compatible_ignoring_fp_precision, shapes_equal
from .source import SPAN_END, SPAN_START, SPAN_TAIL_START, SourceSpan, SpanFields

if TYPE_CHECKING:
    from .computation import HloComputation
    from .metadata import OpMetadata
    from .module import HloModule
    from .replica_groups import ReplicaGroups


_NONE: tuple = ()


class HloIrError(RuntimeError):
    """An IR operation violated one of XLA's preconditions (XLA would RET_CHECK)."""


class HloInstruction:
    """An HLO instruction with operands, ordered de-duplicated users and control edges.

    `control_predecessors`, `control_successors` and `called_computations` are sequences:
    an instruction read from text shares one empty tuple until it has an edge, since
    edges are rare and a million empty lists cost real memory. Change them through the
    IR's methods (e.g. `add_control_dependency_to`), not in place."""

    __slots__ = (
        "name",
        "opcode",
        "parent",
        "operands",
        "_users",
        "control_predecessors",
        "control_successors",
        "called_computations",
        "_shape_text",
        "_shape",
        "_payload",
        "_attr_raw",
        "_attrs",
        "_cache",
        "_span",
    )

    def __init__(
        self,
        name: str,
        opcode: str,
        shape: Shape | str | None,
        operands: Iterable[HloInstruction] = (),
        attributes: Iterable[tuple[str, str]] = (),
        *,
        payload: str | None = None,
    ) -> None:
        self.name = name
        self.opcode = opcode
        self.parent: HloComputation | None = None
        self.operands: list[HloInstruction] = list(operands)
        self._users: dict[HloInstruction, list[int] | None] = {}
        self.control_predecessors: list[HloInstruction] = []
        self.control_successors: list[HloInstruction] = []
        self.called_computations: list[HloComputation] = []
        if isinstance(shape, Shape):
            self._shape: Shape | None = shape
            self._shape_text: str | None = shape.to_text()
        else:
            self._shape = None
            self._shape_text = shape
        self._payload = payload
        self._attrs: list[tuple[str, str]] | None = list(attributes)
        self._attr_raw: str | None = None
        self._cache: dict[str, object] | None = None
        self._span: SourceSpan | SpanFields = SourceSpan()
        for op in self.operands:
            op._users[self] = None

    @classmethod
    def from_source(
        cls,
        name: str,
        opcode: str,
        shape_text: str | None,
        operands: list[HloInstruction],
        payload: str | None,
        span: SourceSpan | SpanFields,
    ) -> HloInstruction:
        """An instruction as a reader found it: its shape and attributes stay text (the
        attributes are `span`'s tail in the module source) until something asks for them;
        `span` may be just its fields, made a SourceSpan on first use. Readers build millions
        of these, so this skips the general constructor's work (`operands` is not copied)."""
        inst = cls.__new__(cls)
        inst.name = name
        inst.opcode = opcode
        inst.parent = None
        inst.operands = operands
        inst._users = {}
        # Edges and callees are rare: share one empty tuple until a list is needed.
        inst.control_predecessors = _NONE
        inst.control_successors = _NONE
        inst.called_computations = _NONE
        inst._shape_text = shape_text
        inst._shape = None
        inst._payload = payload
        inst._attrs = None
        inst._attr_raw = ""
        inst._cache = None
        inst._span = span
        for op in operands:
            op._users[inst] = None
        return inst

    @property
    def span(self) -> SourceSpan:
        """How the instruction is written (built on first use: most read ones never need it)."""
        span = self._span
        if type(span) is tuple:
            span = self._span = SourceSpan.from_fields(*span)
        return span  # type: ignore[return-value]

    @span.setter
    def span(self, span: SourceSpan) -> None:
        self._span = span

    # ----------------------------------------------------------------- basics
    def __repr__(self) -> str:
        return f"<HloInstruction {self.name} = {self.opcode}>"

    @property
    def users(self) -> list[HloInstruction]:
        """Users in XLA's order: first use first, each user once."""
        return list(self._users)

    def iter_users(self) -> Iterator[HloInstruction]:
        """The users in `users` order without copying them (XLA's users() is a reference):
        for reading only; an edit of the graph while iterating is an error."""
        return iter(self._users)

    @property
    def user_count(self) -> int:
        return len(self._users)

    def operand_indices(self, operand: HloInstruction) -> list[int]:
        """XLA's OperandIndices: every position of `operand` in this instruction's operands
        (a wide user is indexed once, so asking after each of thousands of folds is linear)."""
        return list(_positions(self, operand, operand._users.get(self)))

    def is_user_of(self, operand: HloInstruction) -> bool:
        """XLA's IsUserOf: True if this instruction is among `operand`'s users."""
        return self in operand._users

    def operand(self, i: int) -> HloInstruction:
        return self.operands[i]

    @property
    def operand_count(self) -> int:
        return len(self.operands)

    @property
    def is_root(self) -> bool:
        return self.parent is not None and self.parent.root is self

    def is_dead(self) -> bool:
        """XLA's IsDead: no users and not the root."""
        return not self._users and not self.is_root

    def has_control_dependencies(self) -> bool:
        return bool(self.control_predecessors or self.control_successors)

    @property
    def module(self) -> HloModule | None:
        return self.parent.parent if self.parent is not None else None

    # ----------------------------------------------------------------- shape
    @property
    def shape_text(self) -> str | None:
        """The shape as written (None when the source omitted it)."""
        return self._shape_text

    @property
    def shape(self) -> Shape:
        """The result shape, decoded on first use (HloParseError, located, if malformed)."""
        if self._shape is None:
            self._shape = _attributes.decode_shape(self)
        return self._shape

    def set_shape(self, shape: Shape) -> None:
        self._shape = shape
        self._shape_text = shape.to_text()
        self.mark_changed()

    # ---------------------------------------------------------- source text
    def _source(self) -> str | None:
        comp = self.parent
        module = comp.parent if comp is not None else None
        source = module.source if module is not None else None
        return source.text if source is not None else None

    @property
    def source_line(self) -> str | None:
        """The instruction's line as read, while it is unchanged; None once it must be
        regenerated (or when it was not read from text)."""
        span = self._span
        if type(span) is tuple:  # as read, never asked for its span: the line is unchanged
            start, end = span[SPAN_START], span[SPAN_END]
        elif span.edited or span.end < 0:
            return span.detached_line if self.parent is None else None
        else:
            start, end = span.start, span.end
        source = self._source()
        return None if source is None else source[start:end]

    def source_location(self) -> tuple[str, int, int] | None:
        """(file, line, column) where the instruction was read, if it was."""
        module = self.module
        if module is None or module.source is None or self.span.start < 0:
            return None
        line, column = module.source.location(self.span.start)
        return module.source.filename, line, column

    @property
    def _attr_text(self) -> str | None:
        """The raw `, key=value...` text; None once the attribute list was edited."""
        span = self._span
        tail, end = (span[SPAN_TAIL_START], span[SPAN_END]) if type(span) is tuple else (span.tail_start, span.end)
        if tail >= 0:
            source = self._source()
            if source is not None:
                return source[tail:end]
        return self._attr_raw

    def _set_attr_text(self, value: str | None) -> None:
        self.span.tail_start = -1
        self._attr_raw = value

    def _detach_from_source(self) -> None:
        """Copy what still refers to the source before the instruction leaves its module."""
        line = self.source_line
        if self.span.tail_start >= 0:
            self._set_attr_text(self._attr_text)
        self.span.edited = True
        self.span.detached_line = line

    # ------------------------------------------------------------ attributes
    @property
    def payload(self) -> str | None:
        """Raw text inside the parentheses of `parameter(N)` / `constant(...)`."""
        return self._payload

    @property
    def attributes(self) -> list[tuple[str, str]]:
        """Ordered `(key, raw_value)` pairs, split from the source on first access."""
        if self._attrs is None:
            self._attrs = _attributes.split_attribute_text(self)
        return self._attrs

    def attr(self, key: str) -> str | None:
        """Raw value of attribute `key`, or None if absent."""
        text = self._attr_text if self._attrs is None else None
        if text is not None:
            if (key + "=") not in text:
                return None
            # The first `, key=` outside every string and bracket is the attribute itself:
            # read just its value.
            at = text.find(", " + key + "=")
            if at >= 0 and at_top_level(text, at):
                value = _attributes.attribute_value_at(self, at + len(key) + 3, key)
                if value is not None:
                    return value
        for k, v in self.attributes:
            if k == key:
                return v
        return None

    def set_attr(self, key: str, raw_value: str | None) -> None:
        """Set (or with None, delete) attribute `key`, keeping attribute order."""
        attrs = list(self.attributes)
        for i, (k, _) in enumerate(attrs):
            if k == key:
                if raw_value is None:
                    del attrs[i]
                else:
                    attrs[i] = (key, raw_value)
                break
        else:
            if raw_value is not None:
                attrs.append((key, raw_value))
        self._attrs = attrs
        self._set_attr_text(None)
        self._cache = None
        self.mark_changed()

    def _decoded(self, key: str, decoder: str, *args: str):  # type: ignore[no-untyped-def]
        """Decode once with `text.attributes.<decoder>(self, *args)` and cache the value."""
        cache = self._cache
        if cache is None:
            cache = self._cache = {}
        elif key in cache:
            return cache[key]
        value = cache[key] = getattr(_attributes, decoder)(self, *args)
        return value

    # Typed accessors. Each decodes its raw attribute once and caches the result.
    @property
    def replica_groups(self) -> ReplicaGroups:
        return self._decoded("replica_groups", "decode_replica_groups")

    @property
    def dimensions(self) -> tuple[int, ...]:
        return self._decoded("dimensions", "decode_dimensions")

    @property
    def all_gather_dimension(self) -> int:
        dims = self.dimensions
        if not dims:
            raise _attributes.attribute_error(self, "dimensions", "all-gather needs dimensions={d}")
        return dims[0]

    @property
    def channel_id(self) -> int | None:
        return self._decoded("channel_id", "decode_channel_id")

    @property
    def use_global_device_ids(self) -> bool:
        return self._decoded("use_global_device_ids", "decode_bool_attr", "use_global_device_ids")

    @property
    def constrain_layout(self) -> bool:
        return self._decoded("constrain_layout", "decode_bool_attr", "constrain_layout")

    @property
    def custom_call_has_side_effect(self) -> bool:
        return self._decoded(
            "custom_call_has_side_effect", "decode_bool_attr", "custom_call_has_side_effect"
        )

    @property
    def custom_call_target(self) -> str:
        return self._decoded("custom_call_target", "decode_string_attr", "custom_call_target")

    @property
    def raw_backend_config(self) -> str:
        """The backend config as XLA stores it: unescaped string, or a raw JSON dict verbatim."""
        return self._decoded("backend_config", "decode_backend_config")

    @property
    def tuple_index(self) -> int:
        return self._decoded("index", "decode_int_attr", "index")

    @property
    def parameter_number(self) -> int:
        return self._decoded("parameter_number", "decode_parameter_number")

    @property
    def slice_starts(self) -> tuple[int, ...]:
        return self._decoded("slice", "decode_slice")[0]

    @property
    def slice_limits(self) -> tuple[int, ...]:
        return self._decoded("slice", "decode_slice")[1]

    @property
    def slice_strides(self) -> tuple[int, ...]:
        return self._decoded("slice", "decode_slice")[2]

    @property
    def metadata(self) -> OpMetadata:
        """The framework op and source line XLA recorded for this instruction."""
        return self._decoded("metadata", "decode_metadata")

    @property
    def frontend_attributes(self) -> dict[str, str]:
        return self._decoded("frontend_attributes", "decode_frontend_attributes")

    # ---------------------------------------------------------- side effects
    def has_side_effect_no_recurse(self) -> bool:
        """XLA's HasSideEffectNoRecurse (xla-semantics §2)."""
        op, configured = self.opcode, self
        if op not in OPCODES and is_known_opcode(op):
            # `<op>-start/-update/-done` sugar: XLA builds an async op whose wrapped
            # computation holds <op> with the start's attributes; HasSideEffect sees it
            # through that called computation, which this IR does not materialise.
            while configured.opcode.endswith(("-update", "-done")) and configured.operands:
                configured = configured.operands[0]
            op = op.rsplit("-", 1)[0]
        if op in ALWAYS_SIDE_EFFECTING:
            return True
        if op in LAYOUT_CONSTRAINABLE_COLLECTIVES or op == "collective-permute":
            if op != "collective-permute" and configured.constrain_layout:
                return True
            if configured.channel_id is None:
                return False
            module = configured.module
            return module is not None and not module.use_spmd_partitioning
        if op == "custom-call":
            return configured.custom_call_has_side_effect
        return False

    def has_side_effect(self) -> bool:
        """XLA's HasSideEffect: this op, or anything in a computation it calls."""
        if self.has_side_effect_no_recurse():
            return True
        return any(c.has_side_effect() for c in self.called_computations)

    # --------------------------------------------------------------- editing
    def mark_changed(self) -> None:
        """Forget the source line so the printer regenerates it, and the lines of what prints
        this instruction inside itself: users of a compact GTE (`%t#0`), the host of a nested
        operand. Walked without recursion: a compact chain can be 100,000 levels deep."""
        stack = [self]
        while stack:
            inst = stack.pop()
            span = inst.span
            span.edited = True
            span.detached_line = None
            if inst.parent is not None:
                inst.parent.mark_changed()
            if span.compact_gte_base is not None:
                stack.extend(u for u in inst._users if u.source_line is not None or u.span.compact_gte_base is not None)
            host = span.host
            if host is not None and host.source_line is not None:
                stack.append(host)

    def replace_operand_with(self, index: int, new_operand: HloInstruction) -> None:
        """ReplaceOperandWith: shape-checked (CompatibleIgnoringFpPrecision) operand swap."""
        old = self.operands[index]
        if not shapes_compatible_ignoring_fp_precision(old.shape, new_operand.shape):
            raise HloIrError(
                f"RET_CHECK failure ShapeUtil::CompatibleIgnoringFpPrecision(old->shape(), "
                f"new_operand->shape()) {old.shape.to_text()} is not compatible with "
                f"{new_operand.shape.to_text()}"
            )
        self._replace_operand_unchecked(index, new_operand)

    def _replace_operand_unchecked(self, index: int, new_operand: HloInstruction) -> None:
        old = self.operands[index]
        if old is new_operand:
            return
        self.operands[index] = new_operand
        if old not in self.operands:
            old._users.pop(self, None)
        new_operand._users[self] = None
        self.mark_changed()

    def replace_all_uses_with(self, new_producer: HloInstruction, trigger: str = "") -> None:
        """ReplaceAllUsesWith: shape check ignoring fp precision, then re-point every use."""
        if not shapes_compatible_ignoring_fp_precision(self.shape, new_producer.shape):
            message = (
                "RET_CHECK failure ShapeUtil::CompatibleIgnoringFpPrecision(shape(), "
                f"new_producer->shape()) The shape doesn't match when replacing '{self.name}' "
                f"({self.shape.to_text()}) with '{new_producer.name}' ({new_producer.shape.to_text()})"
            )
            if trigger:
                message += f". {trigger} triggered this wrong replacement."
            raise HloIrError(message)
        self.replace_all_uses_with_different_shape(new_producer)

    def replace_all_uses_with_different_shape(self, new_producer: HloInstruction) -> None:
        """Re-point users (not `new_producer` itself) and the root; control edges stay."""
        new_was_user = False
        for user, known in list(self._users.items()):
            if user is new_producer:
                new_was_user = True
                continue
            ops = user.operands
            found = _positions(user, self, known)
            for at in found:
                ops[at] = new_producer
            # Where new_producer now sits in `user`: known exactly unless it was there before.
            new_producer._users[user] = None if user in new_producer._users else found
            user.mark_changed()
            if user.opcode == "fusion":
                user.parent_fusion_dedup()
        self._users.clear()
        if new_was_user:
            self._users[new_producer] = None
        parent = self.parent
        if parent is not None and parent.root is self:
            parent.set_root(new_producer, accept_different_shape=True)

    def parent_fusion_dedup(self) -> None:
        """DeduplicateFusionOperands: merge repeated operands of this fusion."""
        from .computation import deduplicate_fusion_operands

        deduplicate_fusion_operands(self)

    def add_control_dependency_to(self, successor: HloInstruction) -> None:
        if successor not in self.control_successors:
            # Parsed instructions share an empty tuple until they get an edge.
            self.control_successors = [*self.control_successors, successor]
            successor.control_predecessors = [*successor.control_predecessors, self]
            successor.mark_changed()

    def detach(self) -> None:
        """Drop this instruction's operand/user and control edges (used on removal)."""
        for op in self.operands:
            op._users.pop(self, None)
        for pred in self.control_predecessors:
            if self in pred.control_successors:
                pred.control_successors.remove(self)
        for succ in self.control_successors:
            if self in succ.control_predecessors:
                succ.control_predecessors.remove(self)
                succ.mark_changed()

    def clone_with_new_operands(
        self, shape: Shape, new_operands: list[HloInstruction], suffix: str = ""
    ) -> HloInstruction:
        """CloneWithNewOperands: same opcode and every attribute; no parent, users or control deps.

        The operand count may differ (custom-call and other variadic ops allow it).
        """
        attrs = [(k, v) for k, v in self.attributes if k != "control-predecessors"]
        name = self.name + (f".{suffix}" if suffix else "")
        clone = HloInstruction(name, self.opcode, shape, new_operands, attrs, payload=self._payload)
        clone.called_computations = list(self.called_computations)
        clone.span = self.span.styled_like()
        return clone

    # ------------------------------------------------------------- identity
    def identical(
        self,
        other: HloInstruction,
        *,
        layout_sensitive: bool = True,
        sharding_sensitive: bool = False,
        ignore_channel_id_values: bool = False,
    ) -> bool:
        """IdenticalInternal with pointer-equal operands and computations (xla-semantics §5)."""
        from .identical import identical

        return identical(
            self,
            other,
            layout_sensitive=layout_sensitive,
            sharding_sensitive=sharding_sensitive,
            ignore_channel_id_values=ignore_channel_id_values,
        )

    # ------------------------------------------------------------- printing
    def to_text(self) -> str:
        """This instruction's line (without indentation), as written or regenerated."""
        line = self.source_line
        if line is not None:
            return line
        from .printer import format_instruction

        return format_instruction(self)

    def __str__(self) -> str:
        return self.to_text()


_WIDE = 32


def _positions(user: HloInstruction, operand: HloInstruction, known: list[int] | None) -> list[int]:
    """Where `operand` is in `user.operands`.

    `operand._users[user]` may hold the answer from an earlier call: it is reset to None
    whenever an operand is put into `user` by other means, and operands are otherwise only
    deleted, which moves the last known position onto something else or off the end; so a
    list whose positions all still hold `operand` is complete. A wide user is indexed once
    for all its operands, so folding thousands of gathers into one tuple stays linear."""
    ops = user.operands
    if known is not None and all(at < len(ops) and ops[at] is operand for at in known):
        return known
    if len(ops) < _WIDE:
        return [i for i, op in enumerate(ops) if op is operand]
    index: dict[HloInstruction, list[int]] = {}
    for i, op in enumerate(ops):
        index.setdefault(op, []).append(i)
    for op, at in index.items():
        if user in op._users:
            op._users[user] = at
    return index[operand]


__all__ = ["HloInstruction", "HloIrError", "shapes_equal"]
