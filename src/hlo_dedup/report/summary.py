"""The short human summary a run prints on stderr.

A single-file run lists each module's passes, their folds and hazards; a batch run gives one
line per module of an XLA dump, its stages in pipeline order (`jit_step: before_optimizations
6 folds; cpu_after_optimizations 0 folds`: what XLA's own CSE already merged shows at once),
one line per other file, the skipped files counted by kind, the failures (each file's one-line
error), then the files and totals. Both end with the same `total:` line and a `time:` line.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from ..io.formats import display_name
from ..passes import PassResult
from .model import (
    PHASES,
    InputResult,
    RunReport,
    module_totals,
    peak_changes,
    peak_rises,
    peak_schedules,
    rescheduled_peaks,
    stage_totals,
)
from .units import bytes_change, human_bytes, human_seconds, plural

MAX_LISTED = 20  # folds or hazards listed per pass


def render_summary(report: RunReport, errors: Sequence[str] = ()) -> str:
    """The summary of `report`; `errors` are lines about the run's own outputs (batch mode)."""
    if report.batch is None:
        (result,) = report.inputs
        return input_summary(result, report.price_backend)
    return "\n".join(_batch_lines(report, errors)) + "\n"


def input_summary(result: InputResult, price_backend: str = "native") -> str:
    """One input's modules, passes, folds and hazards, its totals and its time per phase;
    `price_backend` is the backend the memory model priced for (`--price-backend`)."""
    lines: list[str] = []
    modules = result.modules
    for m in modules:
        lines.append(f"module {m.name} ({display_name(m.input)}"
                     + (f", #{m.index + 1}" if len(modules) > 1 else "") + "):")
        if not m.passes:
            lines.append("  no passes run")
        for p in m.passes:
            lines.extend(_pass_lines(p))
            lines.extend(_fate_lines(p, price_backend))
        if m.xla_price is not None:
            lines.extend(xla_price_lines(m.xla_price))
    lines.append(_total_line(module_totals(modules)))
    lines.append("time: " + ", ".join(f"{k} {human_seconds(result.timings.get(k, 0.0))}" for k in PHASES))
    return "\n".join(lines) + "\n"


def _total_line(t: dict[str, int], label: str = "total", counted: str = "") -> str:
    """`label: N of M modules changed, ...`; `counted` names the M in other words."""
    return (
        f"{label}: {t['changed_modules']} of {counted or plural(t['modules'], 'module')} changed, "
        f"{plural(t['folds'], 'fold')}, {plural(t['hazards'], 'hazard')}"
        + (f" ({t['hazards_refused']} refused)" if t["hazards_refused"] else "")
        + (f", removed {human_bytes(t['bytes_output'])} output"
           + (f" / {human_bytes(t['bytes_per_device'])} per device" if t["bytes_per_device"] else "")
           if t["bytes_output"] else "")
    )


def signed_bytes(n: int) -> str:
    """A change of size: '+1.5 KiB', '-512 B', '0 B'."""
    return ("+" if n > 0 else "") + human_bytes(n)


def xla_price_lines(price: dict) -> list[str]:
    """--price=xla: XLA:CPU's own peak of the module before and after the passes, of each
    compiled computation whose peak changed, and what a budget made of the folds."""
    before, after = price["peak_bytes_before"], price["peak_bytes_after"]
    lines = [f"  XLA:CPU peak {human_bytes(before)} -> {human_bytes(after)} ({signed_bytes(after - before)}), "
             f"allocated {human_bytes(price['allocated_bytes_before'])} -> "
             f"{human_bytes(price['allocated_bytes_after'])} ({plural(price['compiles'], 'compile')}, "
             f"{human_seconds(price['seconds'])})"]
    for c in price["computations"][:MAX_LISTED]:
        lines.append(f"    {c['computation']}: {human_bytes(c['peak_bytes_before'])} -> "
                     f"{human_bytes(c['peak_bytes_after'])}")
    dropped = len(price["folds_dropped"])
    if price["within_budget"] is False:
        lines.append(f"    over the --max-peak-increase budget with {plural(dropped, 'fold')} dropped")
    elif dropped:
        lines.append(f"    {plural(dropped, 'fold')} dropped to keep XLA's peak rise within --max-peak-increase")
    return lines


def _pass_lines(p: PassResult) -> list[str]:
    folds, hazards = p.folds, p.hazards
    head = f"  {p.pass_name}: {'changed' if p.changed else 'unchanged'}"
    if folds:
        head += f", {plural(len(folds), 'fold')}"
    out_bytes = sum(f.bytes_output for f in folds)
    per_device = sum(f.bytes_per_device for f in folds)
    if out_bytes:
        head += f", removed {human_bytes(out_bytes)} output"
        if per_device:
            head += f" / {human_bytes(per_device)} per device"
    head += f" ({human_seconds(p.seconds)}{_price_share(p.price_seconds)})"
    lines = [head]
    tensors = {(i.computation, i.name): i.tensor for i in p.instructions if i.tensor} if folds else {}
    for f in folds[:MAX_LISTED]:
        extra = f" as {f.replacement}" if f.replacement else ""
        flag = " [hazardous]" if f.hazardous else ""
        tensor = tensors.get((f.computation, f.removed))
        lines.append(f"    {f.computation}: {f.kept} \u2190 {f.removed}{extra}{flag}" + (f"  ({tensor})" if tensor else ""))
    if len(folds) > MAX_LISTED:
        lines.append(f"    ... {len(folds) - MAX_LISTED} more folds (see --report)")
    for h in hazards[:MAX_LISTED]:
        verdict = "refused" if h.refused else "folded anyway"
        lines.append(f"    hazard ({verdict}) {h.computation}: {h.kept} \u2190 {h.removed}: "
                     + "; ".join(h.reasons))
    if len(hazards) > MAX_LISTED:
        lines.append(f"    ... {len(hazards) - MAX_LISTED} more hazards (see --report)")
    return lines


def _fate_lines(p: PassResult, price_backend: str) -> list[str]:
    """What the pass made of every instruction it considered, in one line of counts (or of
    why nothing folded), the memory price, refusals the hazards do not list, near misses."""
    gathers = [i for i in p.instructions if i.opcode.startswith("all-gather")]
    kernels = [i for i in p.instructions if i.opcode == "custom-call"]
    lines = [f"    {note}" for note in p.notes]
    if gathers:
        lines.append("    " + _gather_counts(gathers, p, price_backend))
        lines.extend(_weight_lines(gathers))
    if kernels:
        fates = Counter(k.fate for k in kernels)
        counts = ", ".join(f"{fates[f]} {f.replace('_', ' ')}" for f in ("first", "rewritten", "not_matched") if fates[f])
        lines.append(f"    {plural(len(kernels), 'AwsNeuronCustomNativeKernel custom-call')}: {counts}")
        unmatched = [k for k in kernels if k.fate == "not_matched"]
        if unmatched and not fates["rewritten"]:
            lines.append(f"      {unmatched[0].name}: {unmatched[0].reason}")
    refused_by_hazard = {h.removed for h in p.hazards if h.refused}
    others = [g for g in gathers if g.fate == "refused" and g.name not in refused_by_hazard]
    for g in others[:MAX_LISTED]:
        lines.append(f"    refused {g.computation}: {g.name}: {g.reason}")
    for n in p.near_misses[:MAX_LISTED]:
        shown = ", ".join(n.instructions[:4]) + (", ..." if len(n.instructions) > 4 else "")
        lines.append(f"    near miss ({shown}): {n.reason}")
    if len(p.near_misses) > MAX_LISTED:
        lines.append(f"    ... {len(p.near_misses) - MAX_LISTED} more near misses (see --report)")
    return lines


def _weight_lines(gathers: list) -> list[str]:  # noqa: ANN001 - InstructionFate
    """The gathers grouped by the weight they gather, where the module names it."""
    by_weight: dict[str, list] = {}
    for g in gathers:
        if g.tensor:
            by_weight.setdefault(g.tensor, []).append(g)
    if not by_weight:
        return []
    lines = ["    by weight:"]
    for tensor, group in list(by_weight.items())[:MAX_LISTED]:
        where = sorted({g.computation for g in group})
        fates = ", ".join(f"{g.name} {g.fate.replace('_', ' ')}"
                          + (f" at {g.stop[0]}" if g.stop is not None else "") for g in group[:6])
        more = f", ... {len(group) - 6} more" if len(group) > 6 else ""
        lines.append(f"      {tensor}: {fates}{more}" + (f" (in {len(where)} computations)" if len(where) > 1 else ""))
    if len(by_weight) > MAX_LISTED:
        lines.append(f"      ... {len(by_weight) - MAX_LISTED} more weights (see --report)")
    return lines


#: Seconds of pricing past which the summary says how to skip it.
SLOW_PRICE_SECONDS = 1.0


def _price_share(seconds: float) -> str:
    """What pricing took of a pass's time, and from `SLOW_PRICE_SECONDS` on how to skip it."""
    if not seconds:
        return ""
    hint = ": --price=none skips it" if seconds >= SLOW_PRICE_SECONDS else ""
    return f", of which the memory price {human_seconds(seconds)}{hint}"


def _gather_counts(gathers: list, p: PassResult, price_backend: str) -> str:  # noqa: ANN001 - InstructionFate
    fates = Counter(g.fate for g in gathers)
    n = plural(len(gathers), "all-gather")
    stops = Counter(g.stop[0] for g in gathers if g.stop is not None)
    stopped = ", ".join(f"{op} \u00d7{count}" for op, count in stops.most_common())
    if fates["folded"] or fates["refused"]:
        parts = [f"{fates['folded']} folded onto {fates['kept']} kept"] if fates["folded"] else []
        parts += [f"{fates[f]} {f.replace('_', ' ')}" for f in ("refused", "unique", "not_traced") if fates[f]]
        line = f"{n}: " + ", ".join(parts)
        changes = peak_changes(p.folds)
        traffic = f"{human_bytes(sum(f.bytes_per_device for f in p.folds))} less collective traffic per device"
        if changes:
            peak = _peak_phrase(changes, rescheduled_peaks(p.profiles), peak_schedules(p.folds), price_backend)
            line += f"; {peak} for {traffic}"
        elif p.folds:  # folded, priced by nobody: --price=none
            line += f"; {traffic}, peak memory not priced (--price=none)"
        return line
    if not fates["unique"]:
        return f"{n}, none traced to a parameter" + (f": walks stopped at {stopped}" if stopped else "")
    line = f"{n}, no two traced to the same key ({fates['unique']} traced"
    if fates["not_traced"]:
        line += f"; {fates['not_traced']} not traced: walks stopped at {stopped}"
    return line + ")"


def _peak_phrase(changes: dict[str, tuple[int, int]], rescheduled: dict[str, int], schedules: dict[str, str],
                 price_backend: str) -> str:
    """The estimated peak change of the computation it grows most: with the folded program
    scheduled anew where the model schedules, and fold by fold (what a budget compares)
    when that differs; a backend other than the native one is named."""
    rises = peak_rises(changes, rescheduled)
    worst = max(rises, key=rises.__getitem__)
    before, after = changes[worst]
    schedule = schedules.get(worst)
    backend = "" if price_backend == "native" else f", priced for {price_backend}"
    if worst not in rescheduled:
        return f"peak {bytes_change(after - before)} (est.{', ' + schedule if schedule else ''}{backend})"
    text = f"peak {bytes_change(rises[worst])} (est., {schedule or 'schedule'} of the folded program"
    if after - before != rises[worst]:
        text += f"; {bytes_change(after - before)} fold by fold on the schedule before them, as budgets price"
    return text + backend + ")"


def _input_line(r: InputResult) -> str:
    t = module_totals(r.modules)
    if t["modules"] == 1:
        line = f"{display_name(r.input)}: {'changed' if t['changed_modules'] else 'unchanged'}"
    else:
        line = f"{display_name(r.input)}: {t['changed_modules']} of {t['modules']} modules changed"
    if t["folds"]:
        line += f", {plural(t['folds'], 'fold')}"
    if t["hazards"]:
        line += f", {plural(t['hazards'], 'hazard')}" + (f" ({t['hazards_refused']} refused)" if t["hazards_refused"] else "")
    if t["bytes_output"]:
        line += f", removed {human_bytes(t['bytes_output'])} output"
    return line + f" ({human_seconds(r.seconds)})"


def _module_lines(inputs: Sequence[InputResult]) -> list[str]:
    """One line per dump module (its stages in pipeline order) and per other file done, in
    the order of their first file."""
    groups: dict[str, list[InputResult]] = {}
    order: list[str | InputResult] = []
    for r in inputs:
        if r.module is not None and r.stage is not None:
            if r.module not in groups:
                groups[r.module] = []
                order.append(r.module)
            groups[r.module].append(r)
        elif r.ok:
            order.append(r)
    lines = []
    for item in order:
        if isinstance(item, InputResult):
            lines.append(_input_line(item))
            continue
        from ..io.layouts import stage_order  # dump-tree runs only

        stages = sorted(groups[item], key=lambda r: stage_order(r.stage or ""))
        lines.append(f"{item}: " + "; ".join(f"{r.stage} {_stage_result(r)}" for r in stages))
    return lines


def _stage_result(r: InputResult) -> str:
    if not r.ok:
        return "failed"
    t = module_totals(r.modules)
    text = plural(t["folds"], "fold")
    if t["hazards"]:
        text += f" ({plural(t['hazards'], 'hazard')}" + (f", {t['hazards_refused']} refused" if t["hazards_refused"] else "") + ")"
    return text


def _skipped_line(report: RunReport) -> list[str]:
    skipped = report.batch.skipped if report.batch else ()
    if not skipped:
        return []
    kinds = Counter(s.kind for s in skipped)
    listed = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
    return [f"skipped {plural(len(skipped), 'file')}: {listed} (each file and why: --report FILE, or --v=1 on stderr)"]


def _batch_total_lines(inputs: Sequence[InputResult]) -> list[str]:
    """Totals per dump stage (each program once there), then over the files outside a dump
    layout; over everything when no file is in one."""
    by_stage = stage_totals(inputs)
    if not by_stage:
        return [_total_line(module_totals([m for r in inputs for m in r.modules]))]
    lines = []
    for t in by_stage:
        line = _total_line(t, f"total at {t['stage']}", plural(t["programs"], "program"))
        if t["recompiles_not_counted"]:
            line += f" ({plural(t['recompiles_not_counted'], 'recompile')} counted once)"
        lines.append(line)
    others = [m for r in inputs if r.module is None or r.stage is None for m in r.modules]
    if others:
        lines.append(_total_line(module_totals(others), "total of the other files"))
    return lines


def _batch_lines(report: RunReport, errors: Sequence[str]) -> list[str]:
    """One line per module or file done, the skipped files, one line per failure (the
    single-file message), then totals."""
    assert report.batch is not None
    inputs = report.inputs
    lines = _module_lines(inputs)
    lines += _skipped_line(report)
    lines += [r.error or f"{display_name(r.input)}: error: failed" for r in inputs if not r.ok]
    lines += list(errors)
    ok = sum(r.ok for r in inputs)
    read = sum(r.bytes_in for r in inputs)
    wrote = sum(r.bytes_out or 0 for r in inputs if r.ok)
    skipped = f", {len(report.batch.skipped)} skipped" if report.batch.skipped else ""
    lines.append(f"files: {ok} ok, {len(inputs) - ok} failed (of {len(inputs)}){skipped}; "
                 f"read {human_bytes(read)}, " + ("wrote nothing (--report-only)" if report.report_only
                                                   else f"wrote {human_bytes(wrote)}"))
    lines += _batch_total_lines(inputs)
    wall, workers = report.batch.wall_seconds, report.batch.workers
    rate = f", {len(inputs) / wall:.1f} files/s" if wall > 0 and inputs else ""
    summed = {k: round(sum(round(r.timings.get(k, 0.0), 6) for r in inputs), 6) for k in PHASES}
    lines.append(f"time: {human_seconds(wall)} wall, {plural(workers, 'worker')}{rate} (summed over files: "
                 + ", ".join(f"{k} {human_seconds(summed[k])}" for k in PHASES) + ")")
    return lines
