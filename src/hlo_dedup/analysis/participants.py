"""How many devices a module runs on (replicas x partitions), and where that number came from.

XLA takes the counts from the module's config: the text header's ``replica_count`` /
``num_partitions``, a dump's device assignment, the compile options. A module traced by
torch-xla states none of them, yet its all-gathers with ``replica_groups={}`` have an output
4x their operand: run on the one device the missing counts default to, such a gather reads
memory nobody wrote and every run gives different values. So the counts are taken from
what states them, else read off the collectives — the shard count of an all-gather or
reduce-scatter over all participants (``{}``), the ids its groups name — and a module whose
collectives cannot run on the counts it states is refused before anything runs.

Which ids a collective's groups name follows XLA's ``GetCollectiveOpGroupMode``: no
channel id — replicas; a channel id and ``use_global_device_ids=true`` — every device; a
channel id on an op that has that attribute — replicas, each group spanning every partition;
a channel id on an op without it (all-to-all, collective-permute) — partitions.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..ir import HloModule

__all__ = ["Participants", "ParticipantsError", "check_participants", "infer_participants", "stated_participants"]

_SDY_MESH = re.compile(r"#sdy\.mesh<\[([^\]]*)\]")
_GLOBAL_IDS_OPS = frozenset({"all-gather", "all-gather-start", "all-reduce", "all-reduce-start", "reduce-scatter"})
_SHARDING_OPS = frozenset({"all-gather", "all-gather-start", "reduce-scatter"})
_GROUPED_OPS = _GLOBAL_IDS_OPS | {"all-to-all", "collective-broadcast", "ragged-all-to-all"}
_PAIRED_OPS = frozenset({"collective-permute", "collective-permute-start"})


class ParticipantsError(ValueError):
    """The module's collectives cannot run on the counts it states, or disagree among
    themselves; the message is one line."""


@dataclass(frozen=True)
class Participants:
    """``replicas`` x ``partitions`` devices; ``source`` says who said so, ``detail`` why
    (for counts read off the collectives: the instruction that fixed them)."""

    replicas: int
    partitions: int
    source: str  # "command line", "header", "device assignment", "collectives" or "default"
    detail: str = ""

    @property
    def devices(self) -> int:
        return self.replicas * self.partitions

    @property
    def stated(self) -> bool:
        """Counts the module (or the user) states, as opposed to ones read off its collectives."""
        return self.source in ("command line", "header", "device assignment")

    def describe(self) -> str:
        """`4 devices: 4 replicas x 1 partition, from the collectives (...)`."""
        n, r, p = self.devices, self.replicas, self.partitions
        counts = (f"{n} device{'s' if n != 1 else ''}: {r} replica{'s' if r != 1 else ''} x "
                  f"{p} partition{'s' if p != 1 else ''}")
        origin = "no count stated or needed" if self.source == "default" else f"from the {self.source}"
        return f"{counts}, {origin}" + (f" ({self.detail})" if self.detail else "")


def stated_participants(module: HloModule) -> Participants | None:
    """The header's counts, if it states either (the other is then 1, XLA's default); jax's
    Shardy text states its partitions only as the mesh in its frontend attributes."""
    replicas = module.header_attr("replica_count")
    partitions = module.header_attr("num_partitions")
    if partitions is None:
        meshes = [math.prod(int(n) for n in re.findall(r"=(\d+)", mesh))
                  for mesh in _SDY_MESH.findall(module.header_attr("frontend_attributes") or "")]
        if meshes:
            partitions = str(max(meshes))
    if replicas is None and partitions is None:
        return None
    return Participants(module.replica_count if replicas is not None else 1,
                        int(partitions) if partitions is not None else 1, "header")


@dataclass(frozen=True)
class _Need:
    """What one collective asks of the counts: `size` participants per group (exact) or ids
    below `bound`, in the id `space` its mode names."""

    instruction: str
    space: str  # "replicas", "partitions", "devices", "replicas x partitions" (a group spans every partition)
    size: int | None = None
    bound: int | None = None
    why: str = ""


def _space(opcode: str, channel: bool, global_ids: bool) -> str:
    if not channel:
        return "replicas"
    if global_ids:
        return "devices"
    return "replicas x partitions" if opcode in _GLOBAL_IDS_OPS else "partitions"


def _shard_count(instruction) -> tuple[int, str] | None:  # noqa: ANN001
    """How many shards an all-gather / reduce-scatter over all participants joins, from its shapes."""
    shape = instruction.shape
    if instruction.opcode == "all-gather-start" and shape.tuple_shapes is not None and len(shape.tuple_shapes) == 2:
        shape = shape.tuple_shapes[1]
    if shape.tuple_shapes is not None:
        shape = shape.tuple_shapes[0] if shape.tuple_shapes else None
    operand = instruction.operands[0].shape if instruction.operands else None
    if shape is None or operand is None or not shape.is_array or not operand.is_array:
        return None
    dims = instruction.dimensions
    if len(dims) != 1 or not 0 <= dims[0] < min(shape.rank, operand.rank):
        return None
    whole, part = (shape, operand) if instruction.opcode != "reduce-scatter" else (operand, shape)
    big, small = whole.dimensions[dims[0]], part.dimensions[dims[0]]
    if small <= 0 or big <= 0 or big % small:
        return None
    verb = "scatters" if instruction.opcode == "reduce-scatter" else "gathers"
    return big // small, f"{instruction.opcode} {instruction.name} {verb} {big // small} shards ({operand} -> {shape})"


def _needs(module: HloModule) -> list[_Need]:
    needs: list[_Need] = []
    for computation in module.computations:
        for instruction in computation.instructions:
            opcode = instruction.opcode
            if opcode not in _GROUPED_OPS and opcode not in _PAIRED_OPS:
                continue
            channel = instruction.attr("channel_id") is not None
            global_ids = instruction.attr("use_global_device_ids") == "true"
            space = _space(opcode, channel, global_ids)
            if opcode in _PAIRED_OPS:
                ids = [int(i) for i in re.findall(r"\d+", instruction.attr("source_target_pairs") or "")]
                if ids:
                    needs.append(_Need(instruction.name, space, bound=max(ids) + 1,
                                       why=f"{opcode} {instruction.name} names {space} up to {max(ids)}"))
                continue
            groups = instruction.replica_groups.groups
            if groups:
                top = max(max(group) for group in groups if group) if any(groups) else -1
                needs.append(_Need(instruction.name, space, bound=top + 1,
                                   why=f"{opcode} {instruction.name} names {space} up to {top}"))
                continue
            shards = _shard_count(instruction) if opcode in _SHARDING_OPS else None
            if shards is not None:
                needs.append(_Need(instruction.name, space, size=shards[0], why=shards[1]))
    return needs


def _group_size(space: str, replicas: int, partitions: int) -> int:
    """Participants of a `{}` group in `space`."""
    return {"replicas": replicas, "partitions": partitions, "devices": replicas * partitions,
            "replicas x partitions": replicas * partitions}[space]


def _id_limit(space: str, replicas: int, partitions: int) -> int:
    return {"replicas": replicas, "partitions": partitions, "devices": replicas * partitions,
            "replicas x partitions": replicas}[space]


def check_participants(module: HloModule, participants: Participants) -> None:
    """ParticipantsError if a collective of `module` cannot run on `participants`: an
    all-gather over all of them whose shard count is not their number, ids past the last."""
    r, p = participants.replicas, participants.partitions
    for need in _needs(module):
        if need.size is not None and need.size != _group_size(need.space, r, p):
            raise ParticipantsError(
                f"{need.why}, but the module runs on {participants.describe()}: its all-participant group has "
                f"{_group_size(need.space, r, p)}; state the counts with --replicas/--partitions")
        if need.bound is not None and need.bound > _id_limit(need.space, r, p):
            raise ParticipantsError(
                f"{need.why}, but the module runs on {participants.describe()}; state the counts with "
                "--replicas/--partitions")


def infer_participants(module: HloModule) -> Participants:
    """The header's counts, else what the collectives need (ParticipantsError if they
    disagree), else one device. Counts read off collectives go to the replicas unless only
    partition-numbered collectives say anything."""
    stated = stated_participants(module)
    if stated is not None:
        return stated
    needs = _needs(module)
    exact = [need for need in needs if need.size is not None]
    sizes = sorted({need.size for need in exact})
    if len(sizes) > 1:
        first = exact[0]
        other = next(need for need in exact if need.size != first.size)
        raise ParticipantsError(f"the collectives disagree on the participants: {first.why}, {other.why}; "
                                "state the counts with --replicas/--partitions")
    bound = max((need.bound for need in needs if need.bound is not None), default=1)
    count = sizes[0] if sizes else bound
    if count <= 1:
        return Participants(1, 1, "default")
    reason = exact[0].why if exact else next(need.why for need in needs if need.bound == bound)
    on_partitions = all(need.space == "partitions" for need in needs)
    found = Participants(1, count, "collectives", reason) if on_partitions else Participants(count, 1, "collectives", reason)
    check_participants(module, found)
    return found
