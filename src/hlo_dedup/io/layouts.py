"""What a file is, by its name, in the trees frameworks write: XLA dumps, Neuron compile caches
and work directories, NxD-Inference artifacts.

* **XLA dumps** (`--xla_dump_to`, xla/service/dump.cc `FilenameFor`) name every file
  `[<timestamp>.]module_<NNNN>[.<module name>].<suffix>`; the module name is left out when the
  name would pass 255 characters. An HLO module is dumped as `<stage>.txt` (text),
  `<stage>.hlo.pb` (an `HloProto`, `.hlo.pb.gz` with `--xla_dump_compress_protos`) or, for an
  execution snapshot, `execution_<NNNN>.hlo_snapshot.pb`. Stages: `before_optimizations`,
  `[<backend>_]after_optimizations` (`cpu_`, `gpu_`, `sm_8.0_gpu_`), between two passes
  (`--xla_dump_hlo_pass_re`) `<NNNN>.<pipeline>.after_<pass>.before_<next pass>`, and during a
  pass `<NNNN>.<pass>.<step>`. Everything else in a dump is an artifact: buffer assignment,
  live ranges, memory-usage reports, LLVM IR, object code, DebugOptions, graph renderings,
  module metadata, and the PJRT reproducer directory (`compile_options.pb`, `topology.pb`,
  `module.mlir`).
* **Neuron compile cache**: `neuronxcc-<version>/MODULE_<hash>+<hash>/` holds
  `model.hlo_module.pb` (the `HloModuleProto` neuronx-cc compiled) beside `model.neff`,
  `compile_flags.json`, `model.done` and, when the weights' layout was changed,
  `wrapped_neff.hlo`, which only its content tells apart (see `hlo_dedup.io.sniff`).
* **Neuron compile work directory**: `model.MODULE_<hash>+<hash>.hlo_module.pb`.
* **NxD-Inference**: `graph.hlo` is a binary `HloModuleProto` despite its name (the content
  decides the format), beside `graph.neff`, `metaneff.pb` and `command.txt`.

A trailing `.gz` never changes what a file is. Names that say nothing either way (a `.txt`
that is not a stage dump, a `.pb`, no extension) are left to the content.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .formats import without_compression

# (suffix of the lower-cased name, kind, what it is): artifacts of the layouts above.
_ARTIFACT_SUFFIXES: tuple[tuple[str, str, str], ...] = (
    ("-buffer-assignment.txt", "XLA buffer assignment", "XLA's buffer assignment of the module"),
    ("-buffer-assignment-values.txt", "XLA buffer assignment", "XLA's buffer assignment, by value"),
    ("-live-range.txt", "XLA live ranges", "XLA's buffer live ranges"),
    ("-memory-usage-report.txt", "XLA memory-usage report", "XLA's memory-usage report"),
    ("-memory-usage-report.pb", "XLA memory-usage report", "XLA's memory-usage report (proto)"),
    (".debug_options", "XLA DebugOptions", "the DebugOptions XLA compiled with"),
    (".metadata.textproto", "XLA module metadata", "XLA's module metadata (pass timings)"),
    (".ll", "LLVM IR", "LLVM IR XLA generated"),
    (".o", "object code", "machine code XLA generated"),
    (".ptx", "PTX", "PTX XLA generated"),
    (".dot", "graph rendering", "a Graphviz rendering of the module"),
    (".html", "graph rendering", "an HTML rendering of the module"),
    (".url", "graph rendering", "a link to a rendering of the module"),
    (".mlir", "MLIR", "an MLIR (StableHLO) module"),
    (".mlirbc", "MLIR", "an MLIR (StableHLO) bytecode module"),
    (".neff", "NEFF", "a compiled Neuron executable (NEFF)"),
)
_ARTIFACT_NAMES: dict[str, tuple[str, str]] = {
    "compile_options.pb": ("PJRT compile options", "the CompileOptionsProto of a PJRT reproducer"),
    "topology.pb": ("PJRT topology", "the device topology of a PJRT reproducer"),
    "compile_flags.json": ("neuronx-cc flags", "the neuronx-cc flags of a compile-cache entry"),
    "model.done": ("Neuron cache marker", "the marker of a finished compile-cache entry"),
    "metaneff.pb": ("NxD MetaNeff", "the input/output description of a NEFF (NxD-Inference)"),
}

#: The names of the HLO stages a dump file can carry (the part after the module name).
_STAGE = (
    r"before_optimizations"
    r"|(?:[A-Za-z][\w.]*_)?after_optimizations"  # cpu_, gpu_, sm_8.0_gpu_
    r"|\d{4}\.[\w\-]+\.after_[^/]+\.before_[^/]+"  # between passes
    r"|\d{4}\.[\w\-]+\.[\w\-]+"  # during a pass
    r"|execution_\d{4}"  # a snapshot of one execution
)
_DUMP_FILE = re.compile(r"(?:(?P<ts>\d+)\.)?module_(?P<id>\d{4,})\.(?P<rest>.+)")
_NAME_AND_STAGE = re.compile(rf"(?:(?P<name>.+)\.)?(?P<stage>{_STAGE})")
_DUMP_FORMATS = (".hlo_snapshot.pb", ".hlo.pb", ".txt", ".pbtxt")
_CACHE_ENTRY = re.compile(r"MODULE_\w+\+\w+")
_WORKDIR_FILE = re.compile(r"model\.(?P<entry>MODULE_\w+\+\w+)\.hlo_module\.pb", re.IGNORECASE)
_HLO_SUFFIXES = (".hlo", ".hlo.pb", ".hlo_module.pb", ".hlo_snapshot.pb")
#: Names whose content decides although they end like HLO.
_DECIDED_BY_CONTENT = frozenset({"wrapped_neff.hlo"})


@dataclass(frozen=True)
class Artifact:
    """A file a layout says is not HLO: `kind` groups it in summaries, `what` says what it is."""

    kind: str
    what: str


@dataclass(frozen=True)
class LayoutName:
    """What a file's name (and its directory's) says.

    `hlo`: True, the name says it is an HLO module; None, only the content can tell.
    `module` and `stage`: the module's name and the dump stage, where the name gives them.
    `unit`: the compilation the file belongs to (`module_0012`, `MODULE_<h>+<h>`).
    `twin`: files in one directory with the same `twin` hold the same module at the same stage
    in different formats or compressions (None: no twin is possible).
    """

    layout: str  # "xla-dump", "neuron-cache", "neuron-workdir" or "" (none known)
    hlo: bool | None
    module: str | None = None
    stage: str | None = None
    unit: str | None = None
    twin: str | None = None


def artifact(name: str) -> Artifact | None:
    """The artifact a file name (no directory) denotes, if the layouts say it is one."""
    lower = without_compression(name.lower())
    if lower in _ARTIFACT_NAMES:
        return Artifact(*_ARTIFACT_NAMES[lower])
    for suffix, kind, what in _ARTIFACT_SUFFIXES:
        if lower.endswith(suffix):
            return Artifact(kind, what)
    return None


def read_name(name: str, parent: str = "") -> LayoutName:
    """What `name` (a file name) in a directory named `parent` is, by the layouts' naming."""
    base = without_compression(name)
    lower = base.lower()
    dump = _DUMP_FILE.fullmatch(base)
    if dump is not None:
        for ext in _DUMP_FORMATS:
            if lower.endswith(ext):
                found = _NAME_AND_STAGE.fullmatch(dump["rest"][: -len(ext)])
                if found is not None:
                    unit = f"module_{dump['id']}" if dump["ts"] is None else f"{dump['ts']}.module_{dump['id']}"
                    return LayoutName("xla-dump", True, found["name"], found["stage"], unit, base[: -len(ext)])
    workdir = _WORKDIR_FILE.fullmatch(base)
    if workdir is not None:
        return LayoutName("neuron-workdir", True, unit=workdir["entry"], twin=base)
    if lower == "model.hlo_module.pb" and _CACHE_ENTRY.fullmatch(parent):
        return LayoutName("neuron-cache", True, unit=parent, twin=base)
    if lower in _DECIDED_BY_CONTENT:
        return LayoutName("neuron-cache" if _CACHE_ENTRY.fullmatch(parent) else "", None, twin=base)
    return LayoutName("", True if lower.endswith(_HLO_SUFFIXES) else None, twin=base)


def stage_order(stage: str) -> tuple[int, int, str]:
    """A sort key that puts a module's stages in pipeline order: before optimizations, the
    per-pass dumps by step, after optimizations, execution snapshots."""
    if stage == "before_optimizations":
        return (0, 0, stage)
    step = re.match(r"(\d{4})\.", stage)
    if step is not None:
        return (1, int(step.group(1)), stage)
    if stage.endswith("after_optimizations"):
        return (2, 0, stage)
    return (3, 0, stage)


__all__ = ["Artifact", "LayoutName", "artifact", "read_name", "stage_order"]
