"""What a run did, as plain data: per module, per input, and for the whole run.

`hlo_dedup.run.run_input` fills one `InputResult` per input; a single-file run wraps its one
result in a `RunReport`, a batch run (`hlo_dedup.batch`) the results its worker processes
sent back (hence plain, picklable records). Every aggregate output — the JSON report,
the stderr summary, the Graphviz picture — is rendered from a `RunReport`, so both modes
print the same thing the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ..plain import FrozenRecord, Record, init_frozen
from ..passes import FoldRecord, Hazard, InstructionFate, NearMiss, PassResult

if TYPE_CHECKING:
    from ..analysis.live_profile import LiveProfile
    from ..io.discovery import Skipped  # made by discovery, which a single-file run does not load

#: Exit statuses: 1 only for a pass that failed (e.g. a RET_CHECK) or a --verify difference;
#: 2 for usage, I/O and parse errors and for a module XLA:CPU cannot run under --verify.
EXIT_OK, EXIT_PASS_FAILED, EXIT_INPUT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130
STATUS_NAMES = {EXIT_OK: "ok", EXIT_PASS_FAILED: "pass_failed", EXIT_INPUT_ERROR: "input_error",
                EXIT_INTERRUPTED: "interrupted"}
PHASES = ("parse", "passes", "print")


class ModuleRun(Record):
    """One module's passes (after a pass failure: those before the failing one), with
    --verify the verdict of running it before and after on XLA:CPU, and with --price=xla
    XLA:CPU's own peaks before and after (`hlo_dedup.price`)."""

    __slots__ = ("name", "input", "index", "passes", "seconds", "verify", "xla_price")

    def __init__(self, name: str, input: str, index: int, passes: list[PassResult] | None = None,
                 seconds: float = 0.0, verify: dict[str, Any] | None = None,
                 xla_price: dict[str, Any] | None = None) -> None:
        self.name = name
        self.input = input
        self.index = index
        self.passes: list[PassResult] = [] if passes is None else passes
        self.seconds = seconds
        self.verify = verify
        self.xla_price = xla_price

    @property
    def changed(self) -> bool:
        return any(p.changed for p in self.passes)

    @property
    def folds(self) -> list[FoldRecord]:
        return [f for p in self.passes for f in p.folds]

    @property
    def hazards(self) -> list[Hazard]:
        return [h for p in self.passes for h in p.hazards]

    @property
    def all_gathers(self) -> list[InstructionFate]:
        """Every all-gather with its fate (empty when the all-gather pass did not run)."""
        return [i for p in self.passes for i in p.instructions if i.opcode.startswith("all-gather")]

    @property
    def kernels(self) -> list[InstructionFate]:
        """Every AwsNeuronCustomNativeKernel with its fate (from the preprocess-kernel pass)."""
        return [i for p in self.passes for i in p.instructions if i.opcode == "custom-call"]

    @property
    def near_misses(self) -> list[NearMiss]:
        return [n for p in self.passes for n in p.near_misses]

    @property
    def profiles(self) -> list[LiveProfile]:
        """Per computation with priced folds, its live bytes before and after them."""
        return [c for p in self.passes for c in p.profiles]

    def peak_changes(self) -> dict[str, tuple[int, int]]:
        """Per computation with priced folds: its estimated peak bytes before and after them."""
        return peak_changes(self.folds)

    @property
    def peak_increase(self) -> int:
        """The largest rise of a computation's estimated peak (0 when none rises), with
        the folded program scheduled anew where the model schedules (`peak_rises`)."""
        return max([*peak_rises(self.peak_changes(), rescheduled_peaks(self.profiles)).values(), 0])


class InputResult(Record):
    """One input taken through read -> passes -> output: what it did, and how it ended.

    `error` is the one line the command prints for a failure (None on success);
    `input_format` is known once the input parsed. In a batch run, `module` and `stage` say
    which module of an XLA dump the file holds and at which stage (None where no layout
    says so); summaries group by them.
    """

    __slots__ = ("input", "output", "input_format", "output_format", "modules", "timings", "exit_status", "error",
                 "bytes_in", "bytes_out", "seconds", "log", "module", "stage")

    def __init__(self, input: str, output: str | None, input_format: str | None = None,
                 output_format: str | None = None, modules: list[ModuleRun] | None = None,
                 timings: dict[str, float] | None = None, exit_status: int = EXIT_OK, error: str | None = None,
                 bytes_in: int = 0, bytes_out: int | None = None, seconds: float = 0.0, log: str = "",
                 module: str | None = None, stage: str | None = None) -> None:
        self.input = input
        self.output = output
        self.input_format = input_format
        self.output_format = output_format
        self.modules: list[ModuleRun] = [] if modules is None else modules
        self.timings: dict[str, float] = dict.fromkeys(PHASES, 0.0) if timings is None else timings
        self.exit_status = exit_status
        self.error = error
        self.bytes_in = bytes_in
        self.bytes_out = bytes_out  # what was written; None when nothing was
        self.seconds = seconds
        self.log = log  # batch mode: what the run logged (VLOG lines, --verify lines)
        self.module = module
        self.stage = stage

    @property
    def ok(self) -> bool:
        return self.exit_status == EXIT_OK

    @property
    def status(self) -> str:
        return STATUS_NAMES.get(self.exit_status, "pass_failed")


class BatchInfo(FrozenRecord):
    """What only a batch run has: its arguments, workers, wall time and the files it skipped
    (`output_dir` None: --report-only)."""

    __slots__ = ("arguments", "output_dir", "workers", "wall_seconds", "skipped")

    def __init__(self, arguments: tuple[str, ...], output_dir: str | None, workers: int, wall_seconds: float,
                 skipped: tuple[Skipped, ...] = ()) -> None:
        init_frozen(self, arguments, output_dir, workers, wall_seconds, skipped)


class RunReport(Record):
    """A whole run: its options, every input's result and, for a batch run, `batch`.

    `input`/`output`/the formats describe the run as a whole: a single-file run's own, or a
    batch run's arguments, output directory and common formats (`mixed` when they differ).
    `output` is None and `report_only` true when no module output was written (--report-only).
    `price` is who priced the folds in memory: `model` or `xla` (--price); `price_backend`
    the backend the model priced for (--price-backend: `native` or `xla-cpu`).
    """

    __slots__ = ("input", "output", "input_format", "output_format", "pipeline", "strict", "spmd", "inputs",
                 "batch", "max_peak_increase", "report_only", "price", "price_backend")

    def __init__(self, input: str, output: str | None, input_format: str, output_format: str,
                 pipeline: Sequence[str], strict: bool = False, spmd: bool = True,
                 inputs: list[InputResult] | None = None, batch: BatchInfo | None = None,
                 max_peak_increase: int | None = None, report_only: bool = False, price: str = "model",
                 price_backend: str = "native") -> None:
        self.input = input
        self.output = output
        self.input_format = input_format
        self.output_format = output_format
        self.pipeline = pipeline
        self.strict = strict
        self.spmd = spmd
        self.inputs: list[InputResult] = [] if inputs is None else inputs
        self.batch = batch
        self.max_peak_increase = max_peak_increase
        self.report_only = report_only
        self.price = price
        self.price_backend = price_backend

    @property
    def modules(self) -> list[ModuleRun]:
        return [m for r in self.inputs for m in r.modules]

    def totals(self) -> dict[str, int]:
        return module_totals(self.modules)


def peak_changes(folds: Sequence[FoldRecord]) -> dict[str, tuple[int, int]]:
    """Per computation with priced folds: its estimated peak bytes before the first and
    after the last of them (folds are priced in order)."""
    out: dict[str, tuple[int, int]] = {}
    for fold in folds:
        if fold.memory is not None:
            before = out.get(fold.computation, (fold.memory["peak_bytes_before"], 0))[0]
            out[fold.computation] = (before, fold.memory["peak_bytes_after"])
    return out


def peak_rises(changes: dict[str, tuple[int, int]], rescheduled: dict[str, int]) -> dict[str, int]:
    """Per computation: the estimate of how much its peak rises, the folded program
    scheduled anew where it is (`rescheduled_peaks`), else priced fold by fold."""
    return {c: rescheduled.get(c, after) - before for c, (before, after) in changes.items()}


def rescheduled_peaks(profiles: Sequence[LiveProfile]) -> dict[str, int]:
    """Per computation with priced folds under the compiler model: its estimated peak
    after them with the folded program scheduled anew."""
    return {p.computation: p.rescheduled for p in profiles if p.rescheduled is not None}


def peak_schedules(folds: Sequence[FoldRecord]) -> dict[str, str]:
    """Per computation with priced folds: the schedule its prices assume (see
    `analysis.FoldPrice.schedule`; a report written before that field says nothing)."""
    return {f.computation: f.memory["schedule"] for f in folds if f.memory is not None and "schedule" in f.memory}


def module_totals(modules: Sequence[ModuleRun]) -> dict[str, int]:
    """The counts the report and the summary give for a set of modules."""
    passes = [p for m in modules for p in m.passes]
    folds = [f for p in passes for f in p.folds]
    hazards = [h for p in passes for h in p.hazards]
    return {
        "modules": len(modules),
        "changed_modules": sum(m.changed for m in modules),
        "passes_run": len(passes),
        "folds": len(folds),
        "hazards": len(hazards),
        "hazards_refused": sum(bool(h.refused) for h in hazards),
        "bytes_output": sum(f.bytes_output for f in folds),
        "bytes_per_device": sum(f.bytes_per_device for f in folds),
        "all_gathers": sum(len(m.all_gathers) for m in modules),
        "folds_refused": sum(i.fate == "refused" for m in modules for i in m.all_gathers),
        "peak_increase_bytes": max([m.peak_increase for m in modules] + [0]),
    }


def program_of(module_key: str) -> str:
    """The program a dump module belongs to: `jit_f (module_0008)` (a recompile XLA numbered
    apart) is `jit_f`."""
    name, sep, rest = module_key.rpartition(" (module_")
    return name if sep and rest.endswith(")") else module_key


def stage_totals(inputs: Sequence[InputResult]) -> list[dict[str, Any]]:
    """The counts of a dump run per stage, each program counted once at each stage: a sum
    over stages would count one fold as often as XLA dumped the module, and a sum over
    recompiles as often as the program was compiled. Per stage, in pipeline order: `stage`, `programs`, `recompiles_not_counted` and `module_totals` of the
    first module of each program there. Inputs outside a dump layout are not in any."""
    firsts: dict[str, dict[str, InputResult]] = {}
    repeats: dict[str, int] = {}
    for r in inputs:
        if r.module is None or r.stage is None or not r.ok:
            continue
        programs = firsts.setdefault(r.stage, {})
        program = program_of(r.module)
        if program in programs:
            repeats[r.stage] = repeats.get(r.stage, 0) + 1
        else:
            programs[program] = r
    from ..io.layouts import stage_order  # dump-tree runs only

    out = []
    for stage, programs in sorted(firsts.items(), key=lambda kv: stage_order(kv[0])):
        counts = module_totals([m for r in programs.values() for m in r.modules])
        out.append({"stage": stage, "programs": len(programs), "recompiles_not_counted": repeats.get(stage, 0),
                    **counts})
    return out


def rounded_timings(timings: dict[str, float]) -> dict[str, float]:
    """Per-phase seconds to the microsecond, plus their total (as the JSON report gives them)."""
    out = {k: round(timings.get(k, 0.0), 6) for k in PHASES}
    out["total"] = round(sum(out.values()), 6)
    return out
