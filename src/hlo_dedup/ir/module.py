"""HloModule: computations in order, the entry, header attributes and config."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from .computation import HloComputation
from .instruction import HloIrError
from .source import ModuleSource

if TYPE_CHECKING:
    from .metadata import StackFrameIndex


class HloModule:
    """An HLO module.

    `use_spmd_partitioning` defaults to True although XLA's text loader defaults it to
    false: with false, every collective carrying a `channel_id` (jax gives every
    all-gather `channel_id=1`) counts as side-effecting, so DCE could never delete a
    folded gather. JAX, GSPMD and Neuron modules are SPMD programs; pass `spmd=False` to
    the loader (CLI `--no-spmd`) for XLA's literal default.
    """

    def __init__(self, name: str, *, use_spmd_partitioning: bool = True) -> None:
        self.name = name
        self.header_attributes: list[tuple[str, str]] = []
        self._computations: dict[str, HloComputation] = {}
        self.entry: HloComputation | None = None
        self.use_spmd_partitioning = use_spmd_partitioning
        self.source: ModuleSource | None = None
        self._filename = "<string>"
        self._generation = 0
        self._side_effects: tuple[int, dict[HloComputation, bool]] = (-1, {})
        self._names: set[str] | None = None
        self._pristine_generation = -1
        self._stack_frames: StackFrameIndex | None = None

    def __repr__(self) -> str:
        return f"<HloModule {self.name} ({len(self._computations)} computations)>"

    @property
    def filename(self) -> str:
        """The file the module was read from (how messages name it)."""
        return self.source.filename if self.source is not None else self._filename

    @filename.setter
    def filename(self, name: str) -> None:
        self._filename = name
        if self.source is not None:
            self.source.filename = name

    def attach_source(self, source: ModuleSource) -> None:
        """Record the text a reader built this module from; until the next edit the module
        prints as exactly that text."""
        self.source = source
        self._pristine_generation = self._generation

    @property
    def stack_frames(self) -> StackFrameIndex:
        """The stack-frame tables the module was read with (empty when it had none)."""
        index = self._stack_frames
        if index is None:
            # Read for reports only: not every run's start-up.
            from .metadata import StackFrameIndex

            index = self._stack_frames = StackFrameIndex.parse(self.source.head if self.source else "")
        return index

    # ----------------------------------------------------------------- config
    def header_attr(self, key: str) -> str | None:
        for k, v in self.header_attributes:
            if k == key:
                return v
        return None

    def _int_header(self, key: str) -> int:
        raw = self.header_attr(key)
        if raw is None:
            return 1
        try:
            return int(raw)
        except ValueError:
            raise HloIrError(f"header attribute {key}={raw!r} is not an integer") from None

    @property
    def replica_count(self) -> int:
        return self._int_header("replica_count")

    @property
    def num_partitions(self) -> int:
        return self._int_header("num_partitions")

    @property
    def is_scheduled(self) -> bool:
        return self.header_attr("is_scheduled") == "true"

    # ------------------------------------------------------------ computations
    @property
    def computations(self) -> list[HloComputation]:
        """Computations in module order (text order for parsed modules)."""
        return list(self._computations.values())

    def __iter__(self) -> Iterator[HloComputation]:
        return iter(self.computations)

    def get_computation(self, name: str) -> HloComputation | None:
        return self._computations.get(name)

    def add_computation(self, comp: HloComputation) -> HloComputation:
        if comp.name in self._computations:
            raise HloIrError(f"duplicate computation name {comp.name!r}")
        comp.parent = self
        self._computations[comp.name] = comp
        self.touch()
        return comp

    def remove_computation(self, comp: HloComputation) -> None:
        """RemoveEmbeddedComputation: drop a computation no live instruction calls."""
        if comp is self.entry:
            raise HloIrError("cannot remove the entry computation")
        del self._computations[comp.name]
        comp.parent = None
        if self._names is not None:
            for inst in comp._instructions:
                self._names.discard(inst.name)
        self.touch()

    def instruction_count(self) -> int:
        return sum(len(c) for c in self._computations.values())

    # ----------------------------------------------------------- bookkeeping
    def touch(self) -> None:
        """Note a structural change (invalidates cached analyses)."""
        self._generation += 1

    def _side_effect_cache(self) -> dict[HloComputation, bool]:
        gen, cache = self._side_effects
        if gen != self._generation:
            cache = {}
            self._side_effects = (self._generation, cache)
        return cache

    def instruction_names(self) -> set[str]:
        if self._names is None:
            self._names = {i.name for c in self._computations.values() for i in c._instructions}
        return self._names

    def _note_name(self, name: str) -> None:
        if self._names is not None:
            self._names.add(name)

    def _forget_name(self, name: str) -> None:
        if self._names is not None:
            self._names.discard(name)

    def is_pristine(self) -> bool:
        """True while the module is exactly as read (its source text is its print)."""
        return (
            self.source is not None
            and self._generation == self._pristine_generation
            and not any(c._changed for c in self._computations.values())
        )

    def to_text(self) -> str:
        """The module as HLO text: unchanged parts byte-exact, edits in XLA's format.

        A module unchanged since it was read is its source text, so that is returned as is.
        """
        if self.is_pristine():
            return self.source.text  # type: ignore[union-attr]
        from .printer import format_module

        return format_module(self)

    def text_pieces(self) -> Iterator[str]:
        """`to_text()` in pieces whose concatenation is that text: what a writer streams,
        so that a large module's text is never built whole beside its IR."""
        if self.is_pristine():
            return iter((self.source.text,))  # type: ignore[union-attr]
        from .printer import module_text_pieces

        return module_text_pieces(self)

    def restore_from(self, other: HloModule) -> None:
        """Become `other` (a fresh read of this module's earlier text): how a failed pass
        rolls back. Instructions taken from this module before are not part of it after."""
        state = vars(self)
        state.clear()
        state.update(vars(other))
        for comp in self._computations.values():
            comp.parent = self
        self.touch()

    def __str__(self) -> str:
        return self.to_text()
