"""The versioned JSON report (`--report`), validated by `schema.json` beside this file.

    {
      "schema_version": 2,
      "tool": {"name": "hlo-dedup", "version": "0.1.0"},
      "input": "model.hlo", "output": "out.hlo",          # "-" is standard input/output
      "input_format": "hlo", "output_format": "hlo",
      "pipeline": ["neuron-preprocess-kernel-duplicate-remover", ...],
      "strict": false, "max_peak_increase": null, "spmd": true, "price": "model",
      "price_backend": "native",
      "modules": [{
        "name": "jit_f", "input": "model.hlo", "index": 0, "changed": true, "seconds": 0.001,
        "verify": {"status": "equal", "summary", ...},        # with --verify only
        "xla_price": {"peak_bytes_before", "peak_bytes_after", "peak_increase_bytes",
                      "allocated_bytes_before", "allocated_bytes_after", "computations": [...],
                      "compiles", "folds_dropped": [...], "within_budget", "seconds"},  # --price=xla only
        "passes": [{
          "name": "...", "changed": true, "seconds": 0.0008,
          "folds": [{"computation", "kept", "removed", "key": {...}, "bytes_output",
                     "bytes_per_device", "replacement": null, "hazardous": false,
                     "memory": {"live_range_extension", "peak_bytes_before", "peak_bytes_after",
                                "crosses_peak", "peak_instruction"}}],
          "hazards": [{"computation", "kept", "removed", "reasons": [...], "refused": false}]
        }],
        "all_gathers": [{"computation", "name", "opcode", "fate", "folded_into", "reason",
                         "stop": {"opcode", "instruction"}, "key", "bytes_output", "op_name",
                         "source", "tensor", "layer"}],
        "kernels": [... the same, for AwsNeuronCustomNativeKernel custom-calls],
        "near_misses": [{"kind", "reason", "computations", "instructions"}],
        "memory": {"computations": [{"computation", "peak_bytes_before", "peak_bytes_after",
                                     "peak_bytes_rescheduled", "schedule"}],
                   "peak_increase_bytes"}
      }],
      "totals": {"modules", "changed_modules", "passes_run", "folds", "hazards",
                 "hazards_refused", "bytes_output", "bytes_per_device", "all_gathers",
                 "folds_refused", "peak_increase_bytes"},
      "timings": {"parse": s, "passes": s, "print": s, "total": s}
    }

`bytes_output` is the size of each removed value (an all-gather's gathered result, or a
kernel's result); `bytes_per_device` is what each device no longer receives for a removed
all-gather (output × (n−1)/n). Adding a field keeps `schema_version`; renaming or removing one,
or changing a meaning, bumps it (version 2 made `key.index_path` root first and added the fates,
near misses and memory prices). Memory figures are estimates of live bytes
(`hlo_dedup.analysis.liveness`); each price's `schedule` says what order they assume: the
"module's schedule" (an `is_scheduled=true` module) or a "memory-minimizing schedule" (a
module before optimizations, fused and scheduled as a compiler would, priced on the
schedule made before the folds); `xla_price` (--price=xla) is XLA:CPU's own peak of the
module compiled before and after (`hlo_dedup.price`).

A batch run writes these fields over all its files (`timings` summed over files) plus `batch`
(workers, files ok/failed, wall time, and `skipped`: every file found but not processed, with
its reason) and `inputs` (one entry per file: status, exit_status, error, output, module and
dump stage, modules, totals, timings); formats may then be `mixed`. With --report-only,
`report_only` is true and `output` null: no module output was written.
"""

from __future__ import annotations

import json
from typing import Any

from ..passes import InstructionFate, PassResult
from ..passes.gather_names import layer_of
from .memo import Memo
from .model import (
    InputResult,
    ModuleRun,
    RunReport,
    module_totals,
    peak_schedules,
    rescheduled_peaks,
    rounded_timings,
    stage_totals,
)

SCHEMA_VERSION = 2
SCHEMA_FILE = "schema.json"


def report_json(report: RunReport) -> dict[str, Any]:
    """The report as JSON data (a batch run's has `batch` and `inputs`)."""
    from .. import __version__

    per_input = [rounded_timings(r.timings) for r in report.inputs]
    timings = {k: round(sum(t[k] for t in per_input), 6) for k in ("parse", "passes", "print")}
    timings["total"] = round(sum(timings.values()), 6)
    data: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "hlo-dedup", "version": __version__},
        "input": report.input,
        "output": report.output,
        "input_format": report.input_format,
        "output_format": report.output_format,
        "pipeline": list(report.pipeline),
        "strict": report.strict,
        "max_peak_increase": report.max_peak_increase,
        "price": report.price,
        "price_backend": report.price_backend,
        "spmd": report.spmd,
        "modules": [_module_json(m) for m in report.modules],
        "totals": report.totals(),
        "timings": timings,
    }
    if report.report_only:
        data["report_only"] = True
    batch = report.batch
    if batch is not None:
        data["batch"] = {
            "arguments": list(batch.arguments),
            "output_dir": batch.output_dir,
            "workers": batch.workers,
            "files": len(report.inputs),
            "ok": sum(r.ok for r in report.inputs),
            "failed": sum(not r.ok for r in report.inputs),
            "bytes_in": sum(r.bytes_in for r in report.inputs),
            "bytes_out": sum(r.bytes_out or 0 for r in report.inputs if r.ok),
            "wall_seconds": round(batch.wall_seconds, 6),
            "skipped": [{"path": s.path, "kind": s.kind, "reason": s.reason} for s in batch.skipped],
        }
        by_stage = stage_totals(report.inputs)
        if by_stage:
            data["batch"]["totals_by_stage"] = by_stage
        data["inputs"] = [_input_json(r) for r in report.inputs]
    if report.price == "none":
        _unpriced(data)
    return data


def _unpriced(data: dict[str, Any]) -> None:
    """--price=none: no rise is known, so the rises are null rather than 0 (unchanged)."""
    for scope in (data, *data.get("inputs", ())):
        scope["totals"]["peak_increase_bytes"] = None
        for module in scope["modules"]:
            module["memory"]["peak_increase_bytes"] = None


def render_json(report: RunReport) -> str:
    """`--report`: the report as indented JSON text."""
    return dumps_indented(report_json(report)) + "\n"


def dumps_indented(value: Any) -> str:
    """`json.dumps(value, indent=2, ensure_ascii=False)`, byte for byte, without the
    standard library's generator-per-level encoder (Python's C encoder does no indent): a
    report of thousands of folds is a hundred thousand values, and this writes each with a
    type check and an append."""
    out: list[str] = []
    _write(value, out, "\n")
    return "".join(out)


_ENCODE_STRING = json.encoder.encode_basestring  # the C one where Python has it
_INFINITY = float("inf")


def _float(value: float) -> str:
    from math import isnan

    if isnan(value):
        return "NaN"
    if value == _INFINITY:
        return "Infinity"
    if value == -_INFINITY:
        return "-Infinity"
    return float.__repr__(value)


#: Lists of exactly one of these types are joined in one C loop (replica groups, names).
_JOINED: dict[type, Any] = {int: int.__repr__, str: _ENCODE_STRING}
#: Encoded dict keys: a report repeats a few dozen field names thousands of times.
_KEY_TEXT: Memo[str, str] = Memo(_ENCODE_STRING)


def _write(value: Any, out: list[str], newline: str) -> None:
    """Append `value` at the indent `newline` ("\\n" and two spaces per level) ends with.
    Scalars inside a container are written in its loop, each line one formatted string:
    a call or a concatenation per value is most of the cost of a large report."""
    kind = type(value)
    if kind is dict:
        if not value:
            out.append("{}")
            return
        inner = newline + "  "
        separator = "{" + inner
        for key, item in value.items():
            key_text = _KEY_TEXT[key] if type(key) is str else _key(key)
            t = type(item)
            if t is str:
                out.append(f"{separator}{key_text}: {_ENCODE_STRING(item)}")
            elif item is None:
                out.append(f"{separator}{key_text}: null")
            elif t is int:
                out.append(f"{separator}{key_text}: {int.__repr__(item)}")
            elif t is bool:
                out.append(f"{separator}{key_text}: {'true' if item else 'false'}")
            elif t is float:
                out.append(f"{separator}{key_text}: {_float(item)}")
            else:
                out.append(f"{separator}{key_text}: ")
                _write(item, out, inner)
            separator = "," + inner
        out.append(newline + "}")
    elif kind is list or kind is tuple:
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        kinds = set(map(type, value))
        joined = _JOINED.get(kinds.pop()) if len(kinds) == 1 else None
        if joined is not None:
            out.append(f"[{inner}{(',' + inner).join(map(joined, value))}{newline}]")
            return
        separator = "[" + inner
        for item in value:
            t = type(item)
            if t is str:
                out.append(separator + _ENCODE_STRING(item))
            elif item is None:
                out.append(separator + "null")
            elif t is int:
                out.append(separator + int.__repr__(item))
            elif t is bool:
                out.append(separator + ("true" if item else "false"))
            elif t is float:
                out.append(separator + _float(item))
            else:
                out.append(separator)
                _write(item, out, inner)
            separator = "," + inner
        out.append(newline + "]")
    elif kind is str:
        out.append(_ENCODE_STRING(value))
    elif value is None:
        out.append("null")
    elif kind is int:
        out.append(int.__repr__(value))
    elif kind is bool:
        out.append("true" if value else "false")
    elif kind is float:
        out.append(_float(value))
    else:
        _write_other(value, out, newline)


def _write_other(value: Any, out: list[str], newline: str) -> None:
    """What `json` does with the other values: subclasses by the types they extend, in its
    order of checks; floats with its NaN and infinity spellings."""
    if isinstance(value, str):
        out.append(_ENCODE_STRING(value))
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(_float(value))
    elif isinstance(value, (list, tuple)):
        _write(list(value), out, newline)
    elif isinstance(value, dict):
        _write(dict(value), out, newline)
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _key(key: Any) -> str:
    """A dict key that is not a str, as `json` writes it (a quoted string)."""
    if isinstance(key, str):
        text = key
    elif isinstance(key, float):
        text = _float(key)
    elif key is True or key is False or key is None:
        text = {True: "true", False: "false", None: "null"}[key]
    elif isinstance(key, int):
        text = int.__repr__(key)
    else:
        raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
    return _ENCODE_STRING(text)


def load_schema() -> dict[str, Any]:
    """The JSON Schema of the report, shipped as package data."""
    from importlib.resources import files

    return json.loads(files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def _input_json(r: InputResult) -> dict[str, Any]:
    return {
        "input": r.input,
        "output": r.output if r.ok else None,
        "status": r.status,
        "exit_status": r.exit_status,
        "error": r.error,
        "input_format": r.input_format,
        "output_format": r.output_format,
        "module": r.module,
        "stage": r.stage,
        "bytes_in": r.bytes_in,
        "bytes_out": r.bytes_out if r.ok else None,
        "seconds": round(r.seconds, 6),
        "modules": [_module_json(m) for m in r.modules],
        "totals": module_totals(r.modules),
        "timings": rounded_timings(r.timings),
    }


def _module_json(m: ModuleRun) -> dict[str, Any]:
    schedules = peak_schedules(m.folds)
    rescheduled = rescheduled_peaks(m.profiles)
    data = {
        "name": m.name,
        "input": m.input,
        "index": m.index,
        "changed": m.changed,
        "seconds": round(m.seconds, 6),
        "passes": [_pass_json(p) for p in m.passes],
        "notes": [note for p in m.passes for note in p.notes],
        "all_gathers": [_fate_json(i) for i in m.all_gathers],
        "kernels": [_fate_json(i) for i in m.kernels],
        "near_misses": [
            {"kind": n.kind, "reason": n.reason, "computations": list(n.computations),
             "instructions": list(n.instructions)}
            for n in m.near_misses
        ],
        "memory": {
            "computations": [{"computation": name, "peak_bytes_before": before, "peak_bytes_after": after,
                              **({"peak_bytes_rescheduled": rescheduled[name]} if name in rescheduled else {}),
                              **({"schedule": schedules[name]} if name in schedules else {})}
                             for name, (before, after) in m.peak_changes().items()],
            "peak_increase_bytes": m.peak_increase,
        },
    }
    if m.verify is not None:
        data["verify"] = dict(m.verify)
    if m.xla_price is not None:
        data["xla_price"] = dict(m.xla_price)
    return data


def _fate_json(i: InstructionFate) -> dict[str, Any]:
    return {
        "computation": i.computation,
        "name": i.name,
        "opcode": i.opcode,
        "fate": i.fate,
        "folded_into": i.folded_into,
        "reason": i.reason,
        "stop": {"opcode": i.stop[0], "instruction": i.stop[1]} if i.stop is not None else None,
        "key": _jsonable(i.key) if i.key is not None else None,
        "bytes_output": i.bytes_output,
        "op_name": i.op_name,
        "source": i.source,
        "tensor": i.tensor,
        "layer": layer_of(i.tensor) if i.tensor else None,
    }


def _pass_json(p: PassResult) -> dict[str, Any]:
    return {
        "name": p.pass_name,
        "changed": bool(p.changed),
        "seconds": round(p.seconds, 6),
        "price_seconds": round(p.price_seconds, 6),
        "folds": [
            {
                "computation": f.computation,
                "kept": f.kept,
                "removed": f.removed,
                "key": _jsonable(f.key),
                "bytes_output": int(f.bytes_output),
                "bytes_per_device": int(f.bytes_per_device),
                "replacement": f.replacement,
                "hazardous": bool(f.hazardous),
                "memory": _memory_json(f.memory),
            }
            for f in p.folds
        ],
        "hazards": [
            {
                "computation": h.computation,
                "kept": h.kept,
                "removed": h.removed,
                "reasons": list(h.reasons),
                "refused": bool(h.refused),
            }
            for h in p.hazards
        ],
    }


def _memory_json(price: dict[str, Any] | None) -> dict[str, Any] | None:
    if price is None:
        return None
    keys = ("live_range_extension", "peak_bytes_before", "peak_bytes_after", "crosses_peak", "peak_instruction",
            "schedule")
    return {k: price[k] for k in keys if k in price}


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _jsonable(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:  # most of a key: names, numbers, lists of them
        return value
    if kind is list or kind is tuple:
        return [v if type(v) in _PLAIN else _jsonable(v) for v in value]
    if kind is dict:
        return {k if type(k) is str else str(k): v if type(v) in _PLAIN else _jsonable(v) for k, v in value.items()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(getattr(value, "value", value))
