"""The model against XLA:CPU on bf16 programs, with and without XLA:CPU's f32 arithmetic.

    python benchmarks/float_normalization.py                 # fsdp-remat-4-bf16, ~20 s
    python benchmarks/float_normalization.py --only tied-inference,fsdp-remat-4-bf16

XLA:CPU has no bf16 arithmetic: its dot emitter takes no bf16 (``dot_op_emitter.cc``
RET_CHECKs the element type; compiled without ``float-normalization-bf16`` a bf16 dot fails
there), so before layout assignment ``all-reduce-promotion`` turns each bf16
``reduce-scatter``/``all-reduce`` into an f32 one and ``float-normalization-bf16`` computes
every other bf16 instruction in f32, with converts to f32 before it and back to bf16 after.
Values stay bf16 where the program holds them (a gathered weight kept for the backward pass
is the bf16 convert of an f32 all-gather), but the temporaries double: the f32 all-gather,
the f32 copy of a weight each dot reads, the f32 weight gradient and, where the converts
stop the simplifier folding ``transpose(dot)`` into the dot, an f32 transposed copy of it.
A compiler with bf16 matmuls and collectives (GPU, Trainium) keeps them bf16.

For each program of `price_vs_xla` (by default the bf16 one), the module is lowered, folded
by the default pipeline, and the module as read and as folded are compiled on XLA:CPU with
XLA's dump of the module just before ``all-reduce-promotion`` and just after
``float-normalization-bf16`` (partitioned, unscheduled, not fused). Columns:

* model (text): the fold pass's estimate on the module as JAX wrote it (`price_vs_xla`);
* model, XLA bf16 module: the same model of the whole module (the change of the entry's
  peak, folded minus as read) on XLA's module before the two passes;
* model, XLA f32-arithmetic module: the same on XLA's module after them;
* XLA: XLA:CPU's change of its peak (`hlo_dedup.xla.memory`).

Needs the `xla` extra (jax/jaxlib).
"""

from __future__ import annotations

import os

_PASSES = ("all-reduce-promotion", "float-normalization-bf16")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
                           " --xla_cpu_enable_concurrency_optimized_scheduler=false"
                           f" --xla_dump_hlo_pass_re={'|'.join(_PASSES)}").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from price_vs_xla import _passes, programs

from hlo_dedup.analysis.module_liveness import analyze
from hlo_dedup.analysis.xla_dump import read_xla_memory
from hlo_dedup.io.formats import modules_from_text
from hlo_dedup.report.model import peak_changes
from hlo_dedup.report.units import human_bytes
from hlo_dedup.xla.memory import _MERGING_PASSES, _compile
from hlo_dedup.xla.oracle import device_layout


def _compiled(text: str) -> tuple[int, int, int]:
    """(model's entry peak on XLA's module before the two passes, the same after them,
    XLA's peak), compiling `text` once."""
    replicas, partitions = device_layout(text, None)
    with tempfile.TemporaryDirectory(prefix="hlo-dedup-float-normalization-") as tmp:
        _compile(text, replicas, partitions, ",".join(_MERGING_PASSES), tmp)
        dumps = Path(tmp)
        stages = [next(dumps.glob(f"*.before_{_PASSES[0]}.txt")), next(dumps.glob(f"*.after_{_PASSES[1]}.*txt"))]
        peaks = []
        for stage in stages:
            (module,) = modules_from_text(stage.read_text(), str(stage), split_input_file=False)
            peaks.append(analyze(module, compiler_model=True).peak_bytes)
        xla = read_xla_memory(next(dumps.glob("*.cpu_after_optimizations.txt"))).in_use_peak
    return peaks[0], peaks[1], xla


def row(name: str, text: str) -> tuple[str, ...]:
    module, passes = _passes(text, price_backend="native")  # bf16 as written (the column's meaning)
    folds = [f for p in passes for f in p.folds]
    model = max((after - first for first, after in peak_changes(folds).values()), default=0)
    before, after = _compiled(text), _compiled(module.to_text())
    signed = lambda n: ("+" if n > 0 else "") + human_bytes(n)  # noqa: E731
    return (name, signed(model), signed(after[0] - before[0]), signed(after[1] - before[1]),
            signed(after[2] - before[2]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", default="fsdp-remat-4-bf16", help="comma-separated program names")
    args = parser.parse_args()
    header = ("program", "model (text)", "model, XLA bf16 module", "model, XLA f32-arithmetic module", "XLA")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for name, _, lower in programs(1):
        if name in args.only.split(","):
            print("| " + " | ".join(row(name, lower())) + " |", flush=True)


if __name__ == "__main__":
    main()
