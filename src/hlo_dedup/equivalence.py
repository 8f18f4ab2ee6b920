"""Do two modules compute the same? Run BEFORE and AFTER on XLA:CPU and compare bitwise.

This is what `hlo-dedup verify BEFORE AFTER` and `hlo-dedup INPUT --verify` do (the structural
HloVerifier is something else: `hlo_dedup.verify_structure`).

    from hlo_dedup.equivalence import check_equivalence
    report = check_equivalence(before_text, after_text, seed=0)
    report.status, report.exit_code, report.summary()
    # ('equal', 0, 'equal: 3 outputs bitwise identical (8 devices: 1 replica x 8 partitions, seed 0)')

``check_equivalence_many(pairs)`` checks several pairs in one XLA child process (jax's start-up
dominates the cost of small modules); XLA runs are cached per (text, seed, mode, device count),
since a module run twice gives the same bits.

Both modules are compiled by XLA's CPU backend through :mod:`hlo_dedup.xla.oracle`, in one child
process with ``replica_count * num_partitions`` virtual devices. Every entry parameter gets a
deterministic random value that depends only on the seed, the parameter's index, its dtype and
dimensions and (for per-device programs) the device, so two modules with the same entry signature
are fed identical inputs. The signatures are checked first: modules whose entry parameters or
device layouts differ cannot be compared and are reported ``different``.

Entry parameters that are tuples are fed leaf by leaf. Post-optimization text (after XLA's own
pipeline or a GPU backend's: fusions with backend configs, ``is_scheduled=true``) is made
runnable first: each fusion becomes a call of its fused computation, which computes the same,
and the schedule is dropped, so XLA:CPU fuses and schedules the module again; mesh replica groups
are spelled out as lists of devices, which survive the conversion a run goes through
(:func:`cpu_runnable_text`).

Statuses: ``equal`` (every output bitwise equal, NaN payloads and signed zeros included, for every
seed tried), ``different`` (the first differing output with its max abs/rel diff), ``error`` (XLA
could not compile or run one of the modules — its message is kept, on one line; tokens as entry
parameters and custom calls XLA:CPU has no kernel for, such as Neuron's
``AwsNeuronCustomNativeKernel`` or a GPU backend's ``__cublas$gemm``, land here, and so does a
crash of XLA, which happens in the child process). ``exit_code`` maps them to 0 / 1 / 2, the exit
statuses of ``hlo-dedup verify`` and of ``hlo-dedup --verify``.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any, Literal, Sequence

__all__ = ["EquivalenceReport", "clear_run_cache", "check_equivalence_many", "check_equivalence", "cpu_runnable_text"]

Status = Literal["equal", "different", "error"]
_EXIT_CODES = {"equal": 0, "different": 1, "error": 2}
_CUSTOM_CALL = re.compile(r"custom call to (\S+?)(?: for |\s*$)")
_NEURON_TARGET = re.compile(r"^(?:AwsNeuron|Neuron|__neuron|neuron)", re.IGNORECASE)
_LAYOUT_BITCAST = "Unexpected bitcast operation seen during layout assignment"
_SCHEDULED = re.compile(r",\s*is_scheduled=true\b")
_MESH_GROUPS = "replica_groups=mesh["
#: Attributes only a fusion has; the call that replaces it has none of them.
_FUSION_ONLY = ("kind", "calls", "backend_config", "output_to_operand_aliasing")


@dataclass(frozen=True)
class EquivalenceReport:
    """Outcome of :func:`check_equivalence`; ``summary()`` is the one-line human form."""

    status: Status
    message: str
    seed: int
    runs: int
    num_replicas: int | None = None
    num_partitions: int | None = None
    per_device: bool | None = None
    num_outputs: int | None = None
    output_index: int | None = None  # first differing output
    differing_seed: int | None = None  # the seed whose inputs exposed the difference
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    mismatched_elements: int | None = None
    failed: Literal["before", "after"] | None = None  # which module XLA could not handle

    @property
    def equal(self) -> bool:
        return self.status == "equal"

    @property
    def exit_code(self) -> int:
        return _EXIT_CODES[self.status]

    def _devices(self) -> str:
        if self.num_replicas is None or self.num_partitions is None:
            return ""
        n = self.num_replicas * self.num_partitions
        replicas = f"{self.num_replicas} replica{'s' if self.num_replicas != 1 else ''}"
        partitions = f"{self.num_partitions} partition{'s' if self.num_partitions != 1 else ''}"
        return f"{n} device{'s' if n != 1 else ''}: {replicas} x {partitions}"

    def summary(self) -> str:
        """One line."""
        if self.status == "equal":
            seeds = f"seed {self.seed}" if self.runs == 1 else f"seeds {self.seed}..{self.seed + self.runs - 1}"
            outputs = f"{self.num_outputs} output{'s' if self.num_outputs != 1 else ''}"
            return f"equal: {outputs} bitwise identical ({self._devices()}, {seeds})"
        return f"{self.status}: " + " ".join(part.strip() for part in self.message.splitlines() if part.strip())

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("max_abs_diff", "max_rel_diff"):  # JSON has no NaN/inf
            value = data[key]
            if value is not None and not math.isfinite(value):
                data[key] = str(value)
        data["exit_code"] = self.exit_code
        return data


# --- run cache: runs are bitwise deterministic, so a text already run with a seed is not rerun ----

_CACHE_LIMIT_BYTES = 256 << 20
_run_cache: OrderedDict[tuple, Any] = OrderedDict()


def clear_run_cache() -> None:
    """Forget the cached XLA runs (they are reused only for the same text, seed, mode and child size)."""
    _run_cache.clear()


def _cache_key(text: str, seed: int, spmd: bool | None, devices: int) -> tuple:
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
    return digest, seed, spmd, devices


def _cache_put(key: tuple, result: Any) -> None:
    _run_cache[key] = result
    _run_cache.move_to_end(key)
    total = sum(sum(o.nbytes for o in r.outputs) for r in _run_cache.values())
    while total > _CACHE_LIMIT_BYTES and len(_run_cache) > 1:
        _, dropped = _run_cache.popitem(last=False)
        total -= sum(o.nbytes for o in dropped.outputs)


# --- helpers -----------------------------------------------------------------------------------


def _clarify(message: str) -> str:
    """XLA's message, prefixed with a plain explanation for the failures users will meet."""
    match = _CUSTOM_CALL.search(message)
    if match:
        target = match.group(1)
        why = (" (a Neuron kernel: it runs only on Trainium/Inferentia)"
               if _NEURON_TARGET.match(target) else "")
        return (f"unsupported custom call {target!r}{why}: XLA:CPU has no implementation for it, so "
                f"this module cannot be run on the CPU oracle [XLA: {message}]")
    if _LAYOUT_BITCAST in message:
        return ("a bitcast whose meaning depends on the layouts another backend assigned "
                "(post-optimization text): XLA:CPU assigns layouts anew, so this module cannot be run on the "
                f"CPU oracle [XLA: {message}]")
    return message


def cpu_runnable_text(text: str) -> str:
    """`text` as XLA:CPU can compile it from scratch, and run the collectives written in it.

    XLA:CPU runs its whole pipeline on what it is given. Post-optimization text carries what
    only the backend that wrote it reads: fusions, whose kind and backend config the CPU
    emitter rejects ("Fusion must have backend config", "Unsupported fusion kind"), and a
    schedule. A fusion computes what a call of its fused computation computes, so each becomes
    that call; the header's `is_scheduled=true` goes; XLA:CPU then fuses and schedules anew.

    Mesh replica groups (`mesh['a'=4,'b'=2], device_ids=(...) {'a'}`) are spelled out as the
    list of groups they stand for: the HLO -> StableHLO conversion a run goes through drops
    their `device_ids`, and on the way back every group is read against one of the module's
    meshes, so a module with several meshes would run collectives over other devices than
    written (groups of one device under an eight-device all-gather read memory never written).
    Other text, and text hlo_dedup's reader rejects (XLA reports it), is returned as is.
    """
    fused = " fusion(" in text or "is_scheduled=true" in text
    if not fused and _MESH_GROUPS not in text:
        return text
    from hlo_dedup.text import parse_module

    try:
        module = parse_module(text)
    except (ValueError, RuntimeError):  # HloParseError, the IR's errors: XLA will say what is wrong
        return text
    for computation in module.computations:
        for instruction in computation.instructions:
            groups = instruction.attr("replica_groups")
            if groups is not None and groups.startswith("mesh["):
                instruction.set_attr("replica_groups", _listed_groups(groups))
            if instruction.opcode != "fusion" or instruction.attr("calls") is None:
                continue
            callee = instruction.attr("calls")
            for key in _FUSION_ONLY:
                instruction.set_attr(key, None)
            instruction.opcode = "call"
            instruction.set_attr("to_apply", callee)
    lowered = module.to_text()
    header_end = lowered.find("\n")
    header = _SCHEDULED.sub("", lowered[:header_end])
    return header + lowered[header_end:]


def _listed_groups(mesh_groups: str) -> str:
    """`{{0,2,4,6},{1,3,5,7}}`: the groups a mesh `replica_groups` value stands for."""
    from hlo_dedup.ir.replica_groups import ReplicaGroups, parse_replica_groups

    return ReplicaGroups.from_groups(parse_replica_groups(mesh_groups).groups).to_text()


def _entry_parameters(text: str) -> list[tuple[Any, str]]:
    from hlo_dedup.xla import isolated

    return isolated.entry_parameters(text)


def _elementwise_mismatch(x: Any, y: Any) -> Any:
    """Boolean array: where the two arrays differ bitwise (x, y of equal shape and dtype)."""
    import numpy as np

    if x.size == 0:
        return np.zeros(x.shape, bool)
    xb = np.ascontiguousarray(x).reshape(-1).view(np.uint8).reshape(x.size, -1)
    yb = np.ascontiguousarray(y).reshape(-1).view(np.uint8).reshape(y.size, -1)
    return np.any(xb != yb, axis=1).reshape(x.shape)


_HLO_TYPES = {
    "bool": "pred", "int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64", "uint8": "u8",
    "uint16": "u16", "uint32": "u32", "uint64": "u64", "float16": "f16", "float32": "f32",
    "float64": "f64", "bfloat16": "bf16", "complex64": "c64", "complex128": "c128", "int4": "s4",
    "uint4": "u4", "int2": "s2", "uint2": "u2",
}


def _scalar(value: Any) -> str:
    try:
        return repr(value.item())
    except (AttributeError, TypeError, ValueError):
        return str(value)


def _describe(x: Any, y: Any, index: int, count: int, per_device: bool, comparison: Any) -> tuple[str, int]:
    import numpy as np

    dims = ",".join(str(d) for d in (x.shape[1:] if per_device else x.shape))
    what = f"output {index} of {count} ({_HLO_TYPES.get(x.dtype.name, x.dtype.name)}[{dims}]"
    what += ", per device)" if per_device else ")"
    if x.shape != y.shape or x.dtype != y.dtype:
        return f"{what}: {comparison.message}", 0
    mismatch = _elementwise_mismatch(x, y)
    n = int(mismatch.sum())
    first = tuple(int(i) for i in np.argwhere(mismatch)[0])
    where = f"device {first[0]} index {list(first[1:])}" if per_device else f"index {list(first)}"
    parts = [f"{what} differs in {n} of {x.size} elements; first at {where}: "
             f"{_scalar(x[first])} vs {_scalar(y[first])}"]
    try:
        with np.errstate(all="ignore"):
            wide = np.complex128 if x.dtype.kind == "c" else np.float64
            nan_only = int(np.sum(np.isnan(x.astype(wide)) != np.isnan(y.astype(wide))))
    except (TypeError, ValueError):
        nan_only = 0
    if nan_only:
        parts.append(f"{nan_only} NaN in one and not the other")
    parts.append(f"max abs diff {comparison.max_abs_diff:.6g}, max rel diff {comparison.max_rel_diff:.6g}")
    return "; ".join(parts), n


# --- the check ---------------------------------------------------------------------------------


def check_equivalence(
    before_text: str,
    after_text: str,
    *,
    seed: int = 0,
    runs: int = 1,
    spmd: bool | None = None,
    timeout: float = 300,
) -> EquivalenceReport:
    """Run both modules on XLA:CPU with identical seeded inputs and compare every output bitwise.

    ``runs`` > 1 repeats the comparison with seeds ``seed .. seed + runs - 1``. ``spmd`` says how
    modules with ``num_partitions > 1`` run: True lets XLA's SPMD partitioner partition them
    (global inputs), False runs the text as already-partitioned per-device programs, None guesses
    from the ENTRY name (``*_spmd`` = already partitioned), as :func:`hlo_dedup.xla.oracle.run_module`
    does. Never raises for a module XLA rejects: that is an ``error`` report carrying XLA's message.
    """
    (report,) = check_equivalence_many([(before_text, after_text)], seed=seed, runs=runs, spmd=spmd, timeout=timeout)
    return report


def check_equivalence_many(
    pairs: Sequence[tuple[str, str]],
    *,
    seed: int = 0,
    runs: int = 1,
    spmd: bool | None = None,
    timeout: float = 300,
) -> list[EquivalenceReport]:
    """:func:`check_equivalence` for several (BEFORE, AFTER) pairs, all run in one XLA child process.

    Starting the child (importing jax) costs more than running a small module, so checking the
    modules of a multi-module file, or a test corpus, this way is several times faster. The child
    gets the largest device count any module needs; each module runs on the first devices.
    """
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    from hlo_dedup.xla import INSTALL_HINT, XlaError, XlaUnavailableError

    try:
        from hlo_dedup.xla import oracle
    except ImportError as exc:  # XlaUnavailableError is an ImportError
        message = str(exc)
        if not isinstance(exc, XlaUnavailableError):
            message = f"the XLA oracle needs jax and jaxlib ({INSTALL_HINT}): {exc}"
        return [EquivalenceReport("error", message, seed=seed, runs=runs) for _ in pairs]

    pairs = [(cpu_runnable_text(before), cpu_runnable_text(after)) for before, after in pairs]
    # 1. Device layouts and entry signatures: identical inputs need identical parameters.
    reports: list[EquivalenceReport | None] = []
    layouts: list[tuple[int, int] | None] = []
    for before_text, after_text in pairs:
        report, layout = _precheck(oracle, before_text, after_text, seed, runs)
        reports.append(report)
        layouts.append(layout)

    # 2. Run every (module, seed) not cached yet, all in one child process.
    runnable = [pair for pair, report in zip(pairs, reports) if report is None]
    texts = [text for pair in runnable for text in pair]
    devices = oracle.child_device_count(texts) if texts else 1
    jobs = {
        _cache_key(text, s, spmd, devices): (text, s)
        for s in range(seed, seed + runs)
        for text in texts
    }
    outcomes: dict[tuple, Any] = {k: _run_cache[k] for k in jobs if k in _run_cache}
    pending = [k for k in jobs if k not in outcomes]
    if pending:
        results = oracle.run_modules([jobs[k] for k in pending], spmd=spmd, timeout=timeout)
        for key, result in zip(pending, results):
            outcomes[key] = result
            if not isinstance(result, XlaError):
                _cache_put(key, result)

    # 3. Compare each pair, seed by seed.
    final: list[EquivalenceReport] = []
    for (before_text, after_text), report, layout in zip(pairs, reports, layouts):
        if report is None:
            assert layout is not None
            runs_of = [
                (s, outcomes[_cache_key(before_text, s, spmd, devices)],
                 outcomes[_cache_key(after_text, s, spmd, devices)])
                for s in range(seed, seed + runs)
            ]
            report = _compare(oracle, XlaError, runs_of, layout, seed, runs)
        final.append(report)
    return final


def _precheck(
    oracle: Any, before_text: str, after_text: str, seed: int, runs: int
) -> tuple[EquivalenceReport | None, tuple[int, int] | None]:
    """A report if the pair cannot or need not be run (unreadable, different signatures), else the layout."""
    base: dict[str, Any] = {"seed": seed, "runs": runs}
    layouts: dict[str, tuple[int, int]] = {}
    params: dict[str, list[tuple[Any, str]]] = {}
    for side, text in (("before", before_text), ("after", after_text)):
        try:
            layouts[side] = oracle.device_layout(text, None)
            params[side] = _entry_parameters(text)
        except Exception as exc:  # noqa: BLE001 - XlaError (a crash of XLA included), jaxlib's own types
            message = f"XLA cannot read {side.upper()}: {_clarify(str(exc))}"
            return EquivalenceReport("error", message, failed=side, **base), None
    replicas, partitions = layouts["before"]
    base.update(num_replicas=replicas, num_partitions=partitions)
    if layouts["before"] != layouts["after"]:
        (r1, p1), (r2, p2) = layouts["before"], layouts["after"]
        message = (f"device layouts differ: BEFORE runs on {r1} replica(s) x {p1} partition(s), "
                   f"AFTER on {r2} x {p2} (replica_count / num_partitions in the header)")
        return EquivalenceReport("different", message, **base), None
    before_params, after_params = params["before"], params["after"]
    if len(before_params) != len(after_params):
        message = (f"entry signatures differ: BEFORE takes {len(before_params)} parameters, AFTER "
                   f"{len(after_params)}; the modules cannot be fed the same inputs")
        return EquivalenceReport("different", message, **base), None
    for index, ((a, a_text), (b, b_text)) in enumerate(zip(before_params, after_params)):
        if a != b:
            message = (f"entry parameter {index} differs: {a_text} (BEFORE) vs {b_text} (AFTER); the modules "
                       "cannot be fed the same inputs")
            return EquivalenceReport("different", message, **base), None
    return None, layouts["before"]


def _compare(
    oracle: Any, xla_error: type, runs_of: list[tuple[int, Any, Any]], layout: tuple[int, int], seed: int, runs: int
) -> EquivalenceReport:
    base: dict[str, Any] = {"seed": seed, "runs": runs, "num_replicas": layout[0], "num_partitions": layout[1]}
    count = None
    for s, before, after in runs_of:
        for side, outcome in (("before", before), ("after", after)):
            if isinstance(outcome, xla_error):
                message = f"XLA:CPU could not compile/run {side.upper()}: {_clarify(str(outcome))}"
                return EquivalenceReport("error", message, failed=side, **base)
        base["per_device"] = before.per_device
        count = len(before.outputs)
        comparison = oracle.compare_results(before, after)
        if comparison.equal:
            continue
        if comparison.index is None:  # different number of outputs
            return EquivalenceReport("different", f"result shapes differ: {comparison.message}",
                                  num_outputs=count, differing_seed=s, **base)
        x, y = before.outputs[comparison.index], after.outputs[comparison.index]
        per_device = before.per_device and after.per_device
        message, mismatched = _describe(x, y, comparison.index, count, per_device, comparison)
        if runs > 1:
            message += f" (seed {s})"
        return EquivalenceReport(
            "different", message, num_outputs=count, output_index=comparison.index, differing_seed=s,
            max_abs_diff=comparison.max_abs_diff, max_rel_diff=comparison.max_rel_diff,
            mismatched_elements=mismatched, **base,
        )
    return EquivalenceReport("equal", "bitwise equal", num_outputs=count, **base)
