"""Do two modules compute the same? Run BEFORE and AFTER on XLA:CPU and compare bitwise.

This is what `hlo-dedup verify BEFORE AFTER` and `hlo-dedup INPUT --verify` do (the structural
HloVerifier is something else: `hlo_dedup.verify_structure`).

    from hlo_dedup.equivalence import check_equivalence
    report = check_equivalence(before_text, after_text, seed=0)
    report.status, report.exit_code, report.summary()
    # ('equal', 0, 'equal: 3 outputs bitwise identical (8 devices: 1 replica x 8 partitions, ...; seed 0)')

A verdict of "different" must be as trustworthy as one of "equal", so BEFORE is first made to
show that it can serve as the reference:

* **Participants.** The module runs on the replicas x partitions it states (header, a dump's
  device assignment, or what the caller says), else on what its collectives need
  (:mod:`hlo_dedup.analysis.participants`; an all-gather over ``{}`` whose output is 4x its
  operand needs 4). A collective that cannot run on the known counts is ``error`` — never a run
  on memory nobody wrote. When one module states the counts and the other does not (a proto
  drops the header's), the stated counts hold for both.
* **Baseline.** BEFORE runs twice, in separate child processes (AFTER runs in the second, before
  BEFORE's replay). If its outputs hold a NaN or an infinity (the inputs never do), the next
  unused seed is tried instead; if they still do, or if BEFORE does not reproduce itself
  bitwise, the verdict is ``cannot_judge`` (exit 2) with the reason — with ``rtol``/``atol``,
  the replay and AFTER need only be that close. The two children's fresh memory is filled
  from different bytes (``BEFORE_FILL``, ``REPLAY_FILL``; glibc's malloc does it), so a module
  that reads memory it never wrote fails to reproduce every time, not only when the two runs
  happen to find different leftovers (and AFTER meets the same fill as the replay).
* **Time.** A module whose ``while`` never ends runs until it is stopped, so each execution
  has a limit (compiles have their own, ``COMPILE_SECONDS``). BEFORE runs first, within
  ``timeout`` (``DEFAULT_TIMEOUT``, 60 s): past it, BEFORE may loop forever and is no
  reference (``cannot_judge``, raise the timeout). AFTER, and BEFORE's replay, are then given
  ``SLOWDOWN`` (10) times what BEFORE's run took, and at least ``FLOOR_SECONDS`` (10 s, or
  ``timeout`` if less), on the wall clock and in CPU time both: an AFTER stopped there does
  not end where BEFORE does, a real difference in behaviour (``different``), while a correct
  rewrite slowed by a busy machine still needs more CPU time than that to be stopped.

Every entry parameter gets a deterministic random value (see ``hlo_dedup.xla.execute.INPUTS``)
that depends only on the seed, the parameter's index, its dtype and dimensions and (for
per-device programs) the device, so two modules with the same entry signature are fed
identical inputs. The signatures are checked first: modules whose entry parameters or stated
device counts differ cannot be compared and are reported ``different``.

Entry parameters that are tuples are fed leaf by leaf. Post-optimization text (after XLA's own
pipeline or a GPU backend's: fusions with backend configs, ``is_scheduled=true``) is made
runnable first: each fusion becomes a call of its fused computation, which computes the same,
and the schedule is dropped, so XLA:CPU fuses and schedules the module again; mesh replica groups
are spelled out as lists of devices, which survive the conversion a run goes through
(:func:`cpu_runnable_text`).

Statuses: ``equal`` (every output bitwise equal, NaN payloads and signed zeros included, for every
seed judged), ``different`` (the first differing output with its max abs/rel diff),
``cannot_judge`` (BEFORE is no reference: not reproducible, or not finite), ``error`` (XLA
could not compile or run one of the modules, or their collectives cannot run on the known
device counts — the message is kept, on one line; tokens as entry parameters and custom calls
XLA:CPU has no kernel for, such as Neuron's ``AwsNeuronCustomNativeKernel`` or a GPU backend's
``__cublas$gemm``, land here, and so does a crash of XLA, which happens in the child
process). ``exit_code`` maps them to 0 / 1 / 2 / 2, the exit statuses of ``hlo-dedup verify``
and of ``hlo-dedup --verify``.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any, Literal, Sequence

from hlo_dedup.xla.runnable import cpu_runnable_text

__all__ = ["EquivalenceReport", "clear_run_cache", "check_equivalence_many", "check_equivalence", "cpu_runnable_text"]

Status = Literal["equal", "different", "cannot_judge", "error"]
_EXIT_CODES = {"equal": 0, "different": 1, "cannot_judge": 2, "error": 2}
#: Seconds BEFORE's execution may take unless the caller says (`timeout`, --timeout).
DEFAULT_TIMEOUT = 60.0
#: Seconds a compile may take (or `timeout` if longer): large modules compile slowly.
COMPILE_SECONDS = 300.0
#: AFTER, and BEFORE's replay, may take this many times what BEFORE's run took ...
SLOWDOWN = 10
#: ... and at least this many seconds (or `timeout` if less).
FLOOR_SECONDS = 10.0
#: The bytes BEFORE's first run, and AFTER and BEFORE's replay, find in memory nobody wrote
#: (`hlo_dedup.xla.isolated.child_env`): their complements, 0xA5 and 0x5A, are finite numbers
#: in every float type, so such a read shows as a baseline that does not reproduce.
BEFORE_FILL = 0x5A
REPLAY_FILL = 0xA5
_CUSTOM_CALL = re.compile(r"custom call to (\S+?)(?: for |\s*$)")
_NEURON_TARGET = re.compile(r"^(?:AwsNeuron|Neuron|__neuron|neuron)", re.IGNORECASE)
_LAYOUT_BITCAST = "Unexpected bitcast operation seen during layout assignment"


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
    timed_out: Literal["before", "after"] | None = None  # which module's run was stopped past its limit
    participants_source: str | None = None  # command line, header, device assignment, collectives, default
    participants_detail: str | None = None  # for counts read off the collectives: which one fixed them
    judged_seeds: tuple[int, ...] | None = None  # the seeds compared (a non-finite seed is replaced)
    baseline_reproduced: bool | None = None  # BEFORE gave the same outputs in two processes
    inputs: str | None = None  # how the inputs were drawn
    rtol: float | None = None
    atol: float | None = None

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
            judged = list(self.judged_seeds or range(self.seed, self.seed + self.runs))
            consecutive = judged == list(range(judged[0], judged[0] + len(judged)))
            seeds = (f"seed {judged[0]}" if len(judged) == 1 else f"seeds {judged[0]}..{judged[-1]}" if consecutive
                     else "seeds " + ",".join(map(str, judged)))
            outputs = f"{self.num_outputs} output{'s' if self.num_outputs != 1 else ''}"
            how = "bitwise identical" if self.rtol is None and self.atol is None else (
                f"equal within rtol={self.rtol or 0:g}, atol={self.atol or 0:g}")
            origin = "" if self.participants_source in (None, "header", "default") else (
                f" from the {self.participants_source}")
            note = f"; {self.message}" if self.message != "bitwise equal" else ""
            return f"equal: {outputs} {how} ({self._devices()}{origin}, {seeds}){note}"
        status = "cannot judge" if self.status == "cannot_judge" else self.status
        return f"{status}: " + " ".join(part.strip() for part in self.message.splitlines() if part.strip())

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["judged_seeds"] = None if self.judged_seeds is None else list(self.judged_seeds)
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
    """Forget the cached XLA runs (they are reused only for the same text, seed and mode; a
    replay of BEFORE never is: it is the check that a run does give the same bits)."""
    _run_cache.clear()


def _cache_key(text: str, seed: int, spmd: bool | None, fill: int) -> tuple:
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
    return digest, seed, spmd, fill


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


def _entry_parameters(text: str) -> list[tuple[Any, str]]:
    from hlo_dedup.xla import isolated

    return isolated.entry_parameters(text)


_HEADER_COUNT = re.compile(r",\s*(?:replica_count|num_partitions)=\d+")


def _with_participants(text: str, participants: Any) -> str:
    """`text` with its header stating `participants`, which is how XLA (and the run) reads them."""
    start = text.find("HloModule")
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    if start < 0:
        return text
    header = _HEADER_COUNT.sub("", text[start:end])
    counts = f", replica_count={participants.replicas}, num_partitions={participants.partitions}"
    return text[:start] + header + counts + text[end:]


def _participants(text: str, assignment: tuple[int, int] | None) -> tuple[Any, Any]:
    """(participants, the parsed module or None) of one side: its header's counts, else its
    device assignment's, else its collectives' (ParticipantsError if they cannot be right)."""
    from hlo_dedup.analysis.participants import (Participants, ParticipantsError, infer_participants,
                                                 stated_participants)
    from hlo_dedup.text import parse_module

    try:
        module = parse_module(text)
        stated = stated_participants(module)
        if stated is None and assignment is not None:
            return Participants(*assignment, "device assignment"), module
        return infer_participants(module), module
    except ParticipantsError:
        raise
    except (ValueError, RuntimeError):  # a malformed module or attribute: XLA will say what is wrong
        return Participants(*(assignment or (1, 1)), "device assignment" if assignment else "default"), None


def _resolve(texts: tuple[str, str], assignments: tuple[Any, Any], given: Any, base: dict[str, Any]
             ) -> tuple[EquivalenceReport | None, Any]:
    """The participants both modules run on, or the report that ends the check: counts both
    modules state and that differ (`different`), collectives that cannot run on them (`error`)."""
    from hlo_dedup.analysis.participants import ParticipantsError, check_participants

    sides: list[tuple[Any, Any]] = []
    for side, text, assignment in zip(("before", "after"), texts, assignments):
        try:
            sides.append(_participants(text, assignment))
        except ParticipantsError as exc:
            if given is None:
                return EquivalenceReport("error", f"cannot run {side.upper()}: {exc}", failed=side, **base), None
            sides.append((given, None))
    (before, before_module), (after, after_module) = sides
    if given is None and before.stated and after.stated and (before.replicas, before.partitions) != (
            after.replicas, after.partitions):
        message = (f"device layouts differ: BEFORE runs on {before.describe()}, AFTER on {after.describe()}")
        return EquivalenceReport("different", message, num_replicas=before.replicas,
                                 num_partitions=before.partitions, **base), None
    chosen = given or next((p for p in (before, after) if p.stated), before)
    for side, module in (("before", before_module), ("after", after_module)):
        if module is None:
            continue
        try:
            check_participants(module, chosen)
        except (ValueError, RuntimeError) as exc:  # ParticipantsError; a malformed attribute is XLA's to report
            if not isinstance(exc, ParticipantsError):
                continue
            return EquivalenceReport("error", f"cannot run {side.upper()}: {exc}", failed=side,
                                     num_replicas=chosen.replicas, num_partitions=chosen.partitions,
                                     participants_source=chosen.source, **base), None
    return None, chosen


def check_equivalence(
    before_text: str,
    after_text: str,
    *,
    seed: int = 0,
    runs: int = 1,
    spmd: bool | None = None,
    timeout: float | None = None,
    participants: Any = None,
    device_assignments: tuple[tuple[int, int] | None, tuple[int, int] | None] = (None, None),
    rtol: float | None = None,
    atol: float | None = None,
) -> EquivalenceReport:
    """Run both modules on XLA:CPU with identical seeded inputs and compare every output bitwise.

    ``runs`` > 1 repeats the comparison with seeds ``seed .. seed + runs - 1``. ``spmd`` says how
    modules with ``num_partitions > 1`` run: True lets XLA's SPMD partitioner partition them
    (global inputs), False runs the text as already-partitioned per-device programs, None guesses
    from the ENTRY name (``*_spmd`` = already partitioned), as :func:`hlo_dedup.xla.oracle.run_module`
    does. ``participants`` (a :class:`hlo_dedup.analysis.participants.Participants`) overrides
    what the modules state; ``device_assignments`` are (replicas, partitions) a proto carried
    beside each text. ``rtol``/``atol`` accept outputs (and BEFORE's replay) that close. ``timeout``:
    the seconds BEFORE's execution may take (None: ``DEFAULT_TIMEOUT``; see the module's *Time*).
    Never raises for a module XLA rejects: that is an ``error`` report carrying XLA's message.
    """
    (report,) = check_equivalence_many([(before_text, after_text)], seed=seed, runs=runs, spmd=spmd, timeout=timeout,
                                       participants=participants, device_assignments=[device_assignments],
                                       rtol=rtol, atol=atol)
    return report


class _Pair:
    """One pair being checked: the texts that run (stating their participants), and its runs."""

    def __init__(self, before: str, after: str, participants: Any) -> None:
        self.before, self.after, self.participants = before, after, participants
        self.first: dict[int, Any] = {}  # seed -> BEFORE's outcome
        self.replay: dict[int, Any] = {}  # seed -> BEFORE's outcome in another process
        self.other: dict[int, Any] = {}  # seed -> AFTER's outcome

    @property
    def same_text(self) -> bool:
        return self.before == self.after


def check_equivalence_many(
    pairs: Sequence[tuple[str, str]],
    *,
    seed: int = 0,
    runs: int = 1,
    spmd: bool | None = None,
    timeout: float | None = None,
    participants: Any = None,
    device_assignments: Sequence[tuple[Any, Any]] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> list[EquivalenceReport]:
    """:func:`check_equivalence` for several (BEFORE, AFTER) pairs, their runs sharing child processes.

    Starting a child (importing jax) costs more than running a small module, so the BEFOREs
    all run in one child, the AFTERs and then BEFOREs' replays in another (BEFOREs whose first
    seed gave NaN/Inf run with the next seed in a child between the two). Each child gets the
    largest device count its modules need.
    """
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    from hlo_dedup.xla import INSTALL_HINT, XlaUnavailableError

    try:
        from hlo_dedup.xla import execute, oracle  # noqa: F401  (execute: INPUTS; importing it is cheap here)
    except ImportError as exc:  # XlaUnavailableError is an ImportError
        message = str(exc)
        if not isinstance(exc, XlaUnavailableError):
            message = f"the XLA oracle needs jax and jaxlib ({INSTALL_HINT}): {exc}"
        return [EquivalenceReport("error", message, seed=seed, runs=runs) for _ in pairs]

    assignments = list(device_assignments or [(None, None)] * len(pairs))
    base = {"seed": seed, "runs": runs, "inputs": execute.INPUTS, "rtol": rtol, "atol": atol}
    seeds = list(range(seed, seed + runs))
    reports: list[EquivalenceReport | None] = []
    live: list[_Pair | None] = []
    for (before, after), assignment in zip(pairs, assignments):
        before, after = cpu_runnable_text(before), cpu_runnable_text(after)
        report, chosen = _resolve((before, after), assignment, participants, base)
        pair = None
        if report is None:
            pair = _Pair(_with_participants(before, chosen), _with_participants(after, chosen), chosen)
            report = _precheck(pair.before, pair.after, base, chosen)
        reports.append(report)
        live.append(pair if report is None else None)
    running = [pair for pair in live if pair is not None]

    # 1. BEFORE, in its own child, each run within `timeout`. 2. Where BEFORE's outputs are not
    # finite, BEFORE with the next unused seed, in a second child. 3. For each seed judged,
    # AFTER, then BEFORE's replay, in a third, each within what BEFORE's own run allows.
    limits = _Limits(oracle, DEFAULT_TIMEOUT if timeout is None else timeout)
    _run_round(oracle, [(pair.first, pair.before, s, True, limits.before) for pair in running for s in seeds],
               spmd, limits, BEFORE_FILL)
    spare = {s: seed + runs + i for i, s in enumerate(seeds)}
    _run_round(oracle, [(pair.first, pair.before, spare[s], True, limits.before) for pair in running for s in seeds
                        if _finished(oracle, pair.first[s]) and oracle.non_finite(pair.first[s]) is not None],
               spmd, limits, BEFORE_FILL)
    last: list[tuple[dict, str, int, bool, Any]] = []
    for pair in running:
        for s in seeds:
            t = _judged_seed(oracle, pair, s, spare[s])
            if t is None:
                continue
            limit = limits.after(pair.first[t])
            if not pair.same_text:
                last.append((pair.other, pair.after, t, True, limit))
            last.append((pair.replay, pair.before, t, False, limit))
    _run_round(oracle, last, spmd, limits, REPLAY_FILL)

    final = []
    for report, pair in zip(reports, live):
        final.append(report if pair is None else _verdict(oracle, pair, seeds, spare, base, rtol, atol, limits))
    return final


def _finished(oracle: Any, outcome: Any) -> bool:
    return isinstance(outcome, oracle.RunResult)


def _judged_seed(oracle: Any, pair: _Pair, s: int, spare: int) -> int | None:
    """The seed that judges `s`: `s` if BEFORE's run with it gave finite outputs, else `spare`
    if that one did; None when BEFORE did not finish or stayed non-finite (nothing to compare)."""
    for t in (s, spare):
        outcome = pair.first.get(t)
        if not _finished(oracle, outcome):
            return None
        if oracle.non_finite(outcome) is None:
            return t
    return None


class _Limits:
    """How long verify's runs may take. A compile, `COMPILE_SECONDS` (or `timeout` if longer):
    its time says nothing of what the module computes. BEFORE's execution, `timeout`: past it,
    BEFORE may loop forever and is no reference. AFTER's, and BEFORE's replay, `SLOWDOWN` times
    what BEFORE's own run took, and at least `FLOOR_SECONDS` (or `timeout` if less), on the
    wall clock and in CPU time both, so that a busy machine does not make a correct rewrite
    look endless."""

    def __init__(self, oracle: Any, timeout: float) -> None:
        self.oracle = oracle
        self.compile = max(COMPILE_SECONDS, timeout)
        self.before = oracle.Limit(timeout)
        self.floor = min(FLOOR_SECONDS, timeout)

    def after(self, before: Any) -> Any:
        return self.oracle.Limit(max(self.floor, SLOWDOWN * before.seconds),
                                 max(self.floor, SLOWDOWN * before.cpu_seconds))


def _run_round(oracle: Any, jobs: list[tuple[dict, str, int, bool, Any]], spmd: bool | None, limits: _Limits,
               fill: int) -> None:
    """Run (text, seed) jobs, each within its execution limit, in one child whose fresh memory
    holds `fill`, and file each outcome in its dict under its seed; a job marked cacheable is
    taken from, and put in, the run cache (a replay never is)."""
    pending = []
    for outcomes, text, s, cacheable, limit in jobs:
        key = _cache_key(text, s, spmd, fill)
        if cacheable and key in _run_cache:
            outcomes[s] = _run_cache[key]
        else:
            pending.append((outcomes, text, s, cacheable, key, limit))
    if not pending:
        return
    results = oracle.run_modules([(text, s) for _, text, s, _, _, _ in pending], spmd=spmd, timeout=limits.compile,
                                 limits=[limit for *_, limit in pending], fill=fill)
    for (outcomes, _, s, cacheable, key, _), result in zip(pending, results):
        outcomes[s] = result
        if cacheable and isinstance(result, oracle.RunResult):
            _cache_put(key, result)


def _precheck(before_text: str, after_text: str, base: dict[str, Any], participants: Any) -> EquivalenceReport | None:
    """A report if the pair cannot be run or fed the same inputs (unreadable, different signatures)."""
    base = {**base, "num_replicas": participants.replicas, "num_partitions": participants.partitions,
            "participants_source": participants.source, "participants_detail": participants.detail or None}
    params: dict[str, list[tuple[Any, str]]] = {}
    for side, text in (("before", before_text), ("after", after_text)):
        try:
            params[side] = _entry_parameters(text)
        except Exception as exc:  # noqa: BLE001 - XlaError (a crash of XLA included), jaxlib's own types
            message = f"XLA cannot read {side.upper()}: {_clarify(str(exc))}"
            return EquivalenceReport("error", message, failed=side, **base)
    before_params, after_params = params["before"], params["after"]
    if len(before_params) != len(after_params):
        message = (f"entry signatures differ: BEFORE takes {len(before_params)} parameters, AFTER "
                   f"{len(after_params)}; the modules cannot be fed the same inputs")
        return EquivalenceReport("different", message, **base)
    for index, ((a, a_text), (b, b_text)) in enumerate(zip(before_params, after_params)):
        if a != b:
            message = (f"entry parameter {index} differs: {a_text} (BEFORE) vs {b_text} (AFTER); the modules "
                       "cannot be fed the same inputs")
            return EquivalenceReport("different", message, **base)
    return None


def _verdict(oracle: Any, pair: _Pair, seeds: list[int], spare: dict[int, int], base: dict[str, Any],
             rtol: float | None, atol: float | None, limits: _Limits) -> EquivalenceReport:
    from hlo_dedup.xla.differences import describe_difference

    chosen = pair.participants
    base = {**base, "num_replicas": chosen.replicas, "num_partitions": chosen.partitions,
            "participants_source": chosen.source, "participants_detail": chosen.detail or None}
    judged: list[int] = []
    notes: list[str] = []
    count = None
    for s in seeds:
        before = pair.first[s]
        if not isinstance(before, oracle.RunResult):
            return _failure("before", before, base, limits)
        bad = oracle.non_finite(before)
        t = s
        if bad is not None:
            t = spare[s]
            before = pair.first[t]
            if not isinstance(before, oracle.RunResult):
                return _failure("before", before, base, limits)
            again = oracle.non_finite(before)
            if again is not None:
                index, n, size = again
                message = (f"BEFORE's outputs are not finite with seed {s} nor with seed {t} (output {index}: "
                           f"{n} of {size} elements NaN or infinite) though every input is finite, so equal "
                           "outputs would prove nothing; give inputs it computes finite results for")
                return EquivalenceReport("cannot_judge", message, baseline_reproduced=None, **base)
            notes.append(f"seed {s} gave BEFORE non-finite outputs, seed {t} was judged instead")
        judged.append(t)
        replay = pair.replay[t]
        if not isinstance(replay, oracle.RunResult):
            return _failure("replay", replay, base, limits, before)
        base["per_device"] = before.per_device
        count = len(before.outputs)
        again = oracle.compare_results(before, replay, rtol, atol)
        if not again.equal:
            detail = again.message
            if again.index is not None:
                x, y = before.outputs[again.index], replay.outputs[again.index]
                detail, _ = describe_difference(x, y, again.index, count, before.per_device, again)
            message = (f"BEFORE does not reproduce itself: two runs with seed {t} in separate processes differ "
                       f"({detail}); the module is not deterministic on XLA:CPU (random numbers, reads of "
                       "memory it never wrote), so its outputs are no reference"
                       + ("" if rtol is not None or atol is not None else "; --rtol/--atol compare within a tolerance"))
            return EquivalenceReport("cannot_judge", message, num_outputs=count, baseline_reproduced=False, **base)
        after = replay if pair.same_text else pair.other[t]
        if not isinstance(after, oracle.RunResult):
            return _failure("after", after, base, limits, before)
        comparison = oracle.compare_results(before, after, rtol, atol)
        if comparison.equal:
            continue
        common = {"num_outputs": count, "differing_seed": t, "baseline_reproduced": True, "judged_seeds": (t,)}
        if comparison.index is None:  # different number of outputs
            return EquivalenceReport("different", f"result shapes differ: {comparison.message}", **common, **base)
        x, y = before.outputs[comparison.index], after.outputs[comparison.index]
        per_device = before.per_device and after.per_device
        message, mismatched = describe_difference(x, y, comparison.index, count, per_device, comparison)
        if len(seeds) > 1 or t != s:
            message += f" (seed {t})"
        return EquivalenceReport(
            "different", message, output_index=comparison.index, max_abs_diff=comparison.max_abs_diff,
            max_rel_diff=comparison.max_rel_diff, mismatched_elements=mismatched, **common, **base,
        )
    return EquivalenceReport("equal", "; ".join(notes) or "bitwise equal", num_outputs=count,
                             judged_seeds=tuple(judged), baseline_reproduced=True, **base)


def _failure(run: Literal["before", "replay", "after"], outcome: Any, base: dict[str, Any], limits: _Limits,
             before: Any = None) -> EquivalenceReport:
    """The report of a run that gave no outputs: XLA could not compile or run it (`error`), or its
    execution was stopped past its limit (BEFORE: `cannot_judge`; AFTER: `different`)."""
    side = "after" if run == "after" else "before"
    if not (isinstance(outcome, limits.oracle.RunTimeout) and outcome.phase == "execution"):
        message = f"XLA:CPU could not compile/run {side.upper()}: {_clarify(str(outcome))}"
        if isinstance(outcome, limits.oracle.RunTimeout):  # the compile's
            message += f" (a compile is given {COMPILE_SECONDS:g} s, or --timeout if longer)"
        return EquivalenceReport("error", message, failed=side, **base)  # type: ignore[arg-type]
    if run == "before":
        message = (f"the original module did not finish in {outcome.limit.seconds:g} s (it may loop forever), so "
                   "there is nothing to compare with; raise --timeout to give it longer")
        return EquivalenceReport("cannot_judge", message, timed_out="before", **base)
    allowed = (f"{SLOWDOWN} x the original's time ({before.seconds:.3g} s with seed {before.seed}"
               + (f", at least {limits.floor:g} s)" if outcome.limit.seconds <= limits.floor else ")"))
    if run == "replay":
        message = (f"the original module did not finish its second run, in another process, within {allowed}, "
                   "so its time is no reference")
        return EquivalenceReport("cannot_judge", message, timed_out="before", baseline_reproduced=False, **base)
    message = (f"the rewritten module did not finish within {allowed}: it was stopped after {outcome.seconds:.3g} s "
               "and may loop forever where the original ends")
    return EquivalenceReport("different", message, timed_out="after", differing_seed=before.seed,
                             judged_seeds=(before.seed,), baseline_reproduced=True, **base)
