"""What a run did: a short human summary (stderr) and a versioned JSON report (`--report`).

The JSON follows `report_schema.json` (JSON Schema draft 2020-12) beside this file:

    {
      "schema_version": 1,
      "tool": {"name": "hlo-dedup", "version": "0.1.0"},
      "input": "model.hlo", "output": "out.hlo",          # "-" is standard input/output
      "input_format": "hlo", "output_format": "hlo",
      "pipeline": ["neuron-preprocess-kernel-duplicate-remover", ...],
      "strict": false, "spmd": true,
      "modules": [{
        "name": "jit_f", "input": "model.hlo", "index": 0, "changed": true, "seconds": 0.001,
        "passes": [{
          "name": "...", "changed": true, "seconds": 0.0008,
          "folds": [{"computation", "kept", "removed", "key": {...}, "bytes_output",
                     "bytes_per_device", "replacement": null, "hazardous": false}],
          "hazards": [{"computation", "kept", "removed", "reasons": [...], "refused": false}]
        }]
      }],
      "totals": {"modules", "changed_modules", "passes_run", "folds", "hazards",
                 "hazards_refused", "bytes_output", "bytes_per_device"},
      "timings": {"parse": s, "passes": s, "print": s, "total": s}
    }

`bytes_output` is the size of each removed value (an all-gather's gathered result, or a
kernel's result); `bytes_per_device` is what each device no longer receives for a removed
all-gather (output × (n−1)/n). Adding a field keeps `schema_version`; renaming or removing one,
or changing a meaning, bumps it.

A batch run (`hlo-dedup DIR... --output-dir OUT`, hlo_dedup.batch) writes these fields over all
its files plus `batch` (workers, files ok/failed, wall time) and `inputs` (one entry per file:
status, exit_status, error, output, modules, totals, timings); formats may then be `mixed`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from .passes.pass_base import PassResult

SCHEMA_VERSION = 1
SCHEMA_FILE = "report_schema.json"
MAX_LISTED = 20  # folds or hazards listed per pass in the human summary


@dataclass
class ModuleRun:
    """One module's passes."""

    name: str
    input: str
    index: int
    passes: list[PassResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return any(p.changed for p in self.passes)


@dataclass
class RunReport:
    """A whole run: its options, each module's passes and the time per phase."""

    input: str
    output: str
    input_format: str
    output_format: str
    pipeline: Sequence[str]
    strict: bool = False
    spmd: bool = True
    modules: list[ModuleRun] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=lambda: {"parse": 0.0, "passes": 0.0, "print": 0.0})

    # -------------------------------------------------------------------------- totals
    def totals(self) -> dict[str, int]:
        passes = [p for m in self.modules for p in m.passes]
        folds = [f for p in passes for f in p.folds]
        hazards = [h for p in passes for h in p.hazards]
        return {
            "modules": len(self.modules),
            "changed_modules": sum(m.changed for m in self.modules),
            "passes_run": len(passes),
            "folds": len(folds),
            "hazards": len(hazards),
            "hazards_refused": sum(bool(h.refused) for h in hazards),
            "bytes_output": sum(f.bytes_output for f in folds),
            "bytes_per_device": sum(f.bytes_per_device for f in folds),
        }

    # ---------------------------------------------------------------------------- JSON
    def to_json(self) -> dict[str, Any]:
        from . import __version__

        timings = {k: round(self.timings.get(k, 0.0), 6) for k in ("parse", "passes", "print")}
        timings["total"] = round(sum(timings.values()), 6)
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "hlo-dedup", "version": __version__},
            "input": self.input,
            "output": self.output,
            "input_format": self.input_format,
            "output_format": self.output_format,
            "pipeline": list(self.pipeline),
            "strict": self.strict,
            "spmd": self.spmd,
            "modules": [_module_json(m) for m in self.modules],
            "totals": self.totals(),
            "timings": timings,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"

    # --------------------------------------------------------------------------- human
    def summary_lines(self) -> list[str]:
        lines: list[str] = []
        for m in self.modules:
            lines.append(f"module {m.name} ({'<stdin>' if m.input == '-' else m.input}"
                         + (f", #{m.index + 1}" if len(self.modules) > 1 else "") + "):")
            if not m.passes:
                lines.append("  no passes run")
            for p in m.passes:
                lines.extend(_pass_lines(p))
        t = self.totals()
        lines.append(
            "total: "
            + f"{t['changed_modules']} of {t['modules']} module{'s' if t['modules'] != 1 else ''} changed, "
            + f"{t['folds']} fold{'s' if t['folds'] != 1 else ''}, "
            + f"{t['hazards']} hazard{'s' if t['hazards'] != 1 else ''}"
            + (f" ({t['hazards_refused']} refused)" if t["hazards_refused"] else "")
            + (f", removed {human_bytes(t['bytes_output'])} output"
               + (f" / {human_bytes(t['bytes_per_device'])} per device" if t["bytes_per_device"] else "")
               if t["bytes_output"] else "")
        )
        lines.append("time: " + ", ".join(f"{k} {human_seconds(self.timings.get(k, 0.0))}"
                                          for k in ("parse", "passes", "print")))
        return lines

    def summary(self) -> str:
        return "\n".join(self.summary_lines()) + "\n"


def _module_json(m: ModuleRun) -> dict[str, Any]:
    return {
        "name": m.name,
        "input": m.input,
        "index": m.index,
        "changed": m.changed,
        "seconds": round(m.seconds, 6),
        "passes": [_pass_json(p) for p in m.passes],
    }


def _pass_json(p: PassResult) -> dict[str, Any]:
    return {
        "name": p.pass_name,
        "changed": bool(p.changed),
        "seconds": round(p.seconds, 6),
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


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(getattr(value, "value", value))


def _pass_lines(p: PassResult) -> list[str]:
    folds, hazards = p.folds, p.hazards
    head = f"  {p.pass_name}: {'changed' if p.changed else 'unchanged'}"
    if folds:
        head += f", {len(folds)} fold{'s' if len(folds) != 1 else ''}"
    out_bytes = sum(f.bytes_output for f in folds)
    per_device = sum(f.bytes_per_device for f in folds)
    if out_bytes:
        head += f", removed {human_bytes(out_bytes)} output"
        if per_device:
            head += f" / {human_bytes(per_device)} per device"
    head += f" ({human_seconds(p.seconds)})"
    lines = [head]
    for f in folds[:MAX_LISTED]:
        extra = f" as {f.replacement}" if f.replacement else ""
        flag = " [hazardous]" if f.hazardous else ""
        lines.append(f"    {f.computation}: {f.kept} \u2190 {f.removed}{extra}{flag}")
    if len(folds) > MAX_LISTED:
        lines.append(f"    ... {len(folds) - MAX_LISTED} more folds (see --report)")
    for h in hazards[:MAX_LISTED]:
        verdict = "refused" if h.refused else "folded anyway"
        lines.append(f"    hazard ({verdict}) {h.computation}: {h.kept} \u2190 {h.removed}: "
                     + "; ".join(h.reasons))
    if len(hazards) > MAX_LISTED:
        lines.append(f"    ... {len(hazards) - MAX_LISTED} more hazards (see --report)")
    return lines


def human_bytes(n: int) -> str:
    """1536 -> '1.5 KiB' (binary units; plain bytes below 1 KiB)."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if value < 1024 or unit == "PiB":
            return f"{value:.1f} {unit}"
    raise AssertionError  # unreachable


def human_seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f} \u00b5s"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def load_schema() -> dict[str, Any]:
    """The JSON Schema of the report, shipped as package data."""
    from importlib.resources import files

    return json.loads(files("hlo_dedup").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))
