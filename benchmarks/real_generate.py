"""Real benchmark modules: a transformer training step written by JAX and XLA on the CPU.

The program is one SGD step of a decoder-only transformer trained FSDP-style on 8 virtual
CPU devices: every weight is sharded on its first dimension, each layer runs under
`jax.checkpoint`, so the backward pass recomputes the layer and gathers its weights a second
time. The layer count (unrolled, one Python loop iteration per layer; no `scan`) is the size
knob. From it come the module classes users actually feed to hlo-dedup:

* **before optimizations** — the module XLA's compiler receives, `*.before_optimizations.txt`
  (metadata with `stack_frame_id`, the FileNames/FunctionNames/FileLocations/StackFrames
  tables): with **Shardy** (jax's default: `xla.sdy.*` custom-calls and frontend attributes),
  with **GSPMD** (`jax_use_shardy_partitioner=False`: `Sharding` custom-calls), and a
  **shard_map** program whose explicit `all_gather`s appear in the module (so the all-gather
  pass has duplicates to fold);
* **after SPMD partitioning** — XLA's per-pass dump right after `spmd-partitioning`
  (ENTRY `..._spmd`, local shapes, the partitioner's all-gathers, duplicates not yet CSE'd);
* **after optimizations** — XLA:CPU's `*.cpu_after_optimizations.txt`: scheduled, thousands of
  fusion computations, long metadata.

Every file is XLA's own dump (`--xla_dump_to`) of the compile of the lowered program, text and
binary (`*.hlo.pb`, an HloProto holding the HloModuleProto) of the same module. The compile
stops as soon as the last stage kept is on disk (XLA:CPU's code generation is not needed).
Everything is cached under `benchmarks/out/real/` with `MANIFEST.json` (what each file is, its
size, XLA's count of its instructions and computations, and how long it took to make); each
build runs once, in fresh processes.

    python benchmarks/real_generate.py            # every module (~25 min the first time)
    python benchmarks/real_generate.py --quick    # the ~4 MB modules only (~1 min)
    python benchmarks/real_generate.py --list     # what exists and what each file is
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out" / "real"
MANIFEST = OUT / "MANIFEST.json"
DEVICES = 8
# Model shape: small dimensions keep XLA:CPU's compile short; the text's size depends on the
# layer count, not on these.
WIDTH, HEADS, FFN, SEQ, BATCH = 256, 4, 1024, 128, 16

#: The one-layer module the start-up figures use.
TINY = "pre-shardy-L1"

STAGES = {
    "pre": "before optimizations",
    "spmd": "after SPMD partitioning",
    "opt": "after optimizations (XLA:CPU, scheduled)",
}


@dataclass(frozen=True)
class Build:
    """One JAX program at one size, and the stages of XLA's compile to keep."""

    program: str  # "jit" (sharding annotations, the partitioner inserts collectives) | "shard_map"
    partitioner: str  # "shardy" | "gspmd"
    layers: int
    stages: tuple[str, ...]
    quick: bool
    table: bool = True  # False: only for the start-up figures, not a row of the tables

    @property
    def key(self) -> str:
        prog = "" if self.program == "jit" else "-shardmap"
        return f"{self.partitioner}{prog}-L{self.layers}"

    def module_name(self, stage: str) -> str:
        return f"{stage}-{self.key}"


ALL = ("pre", "spmd", "opt")
BUILDS = (
    Build("jit", "shardy", 1, ("pre",), quick=True, table=False),
    Build("jit", "shardy", 48, ALL, quick=True),
    Build("jit", "gspmd", 48, ("pre", "spmd"), quick=True),  # after optimizations = Shardy's
    Build("shard_map", "shardy", 48, ("pre",), quick=True),
    Build("jit", "shardy", 480, ALL, quick=False),
    Build("jit", "gspmd", 480, ("pre",), quick=False),
    Build("shard_map", "shardy", 480, ("pre",), quick=False),
    # >= 200 MB and >= 1M instructions. XLA:CPU's optimizations at this size take too long.
    Build("jit", "shardy", 2500, ("pre", "spmd"), quick=False),
)

#: Where each stage is in an XLA dump (`--xla_dump_to`), and how it got there.
DUMPED = {
    "pre": ("*.before_optimizations", "XLA dump *.before_optimizations.txt: the module the compiler received"),
    "spmd": ("*.after_spmd-partitioning.*", "XLA dump right after the spmd-partitioning pass "
             "(--xla_dump_hlo_pass_re=spmd-partitioning)"),
    "opt": ("*.cpu_after_optimizations", "XLA:CPU dump *.cpu_after_optimizations.txt"),
}


# ------------------------------------------------------------------------------------------
# The JAX program (imported only in a build's own process)


def _program(build: Build):  # type: ignore[no-untyped-def]
    """(jitted train step, abstract arguments) for `build`."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((DEVICES,), ("fsdp",), axis_types=(AxisType.Auto,))
    shapes = {"ln1": (WIDTH,), "wq": (WIDTH, WIDTH), "wk": (WIDTH, WIDTH), "wv": (WIDTH, WIDTH),
              "wo": (WIDTH, WIDTH), "ln2": (WIDTH,), "w1": (WIDTH, FFN), "w2": (FFN, WIDTH)}
    weight_spec = {k: P("fsdp", *([None] * (len(s) - 1))) for k, s in shapes.items()}
    act_spec = P("fsdp", None, None)

    def rms_norm(x, scale):  # type: ignore[no-untyped-def]
        return x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * scale

    def block(x, p):  # type: ignore[no-untyped-def]
        """Pre-norm attention + GELU MLP on gathered bf16 weights; x is f32 [batch, seq, width]."""
        batch = x.shape[0]
        h = rms_norm(x, p["ln1"]).astype(jnp.bfloat16)
        heads = lambda w: (h @ w).reshape(batch, SEQ, HEADS, WIDTH // HEADS)  # noqa: E731
        q, k, v = heads(p["wq"]), heads(p["wk"]), heads(p["wv"])
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / np.sqrt(WIDTH // HEADS)
        scores = jnp.where(jnp.tril(jnp.ones((SEQ, SEQ), bool)), scores, -1e9)
        attn = jax.nn.softmax(scores, axis=-1).astype(jnp.bfloat16)
        out = jnp.einsum("bhqk,bkhd->bqhd", attn, v).reshape(batch, SEQ, WIDTH)
        x = x + (out @ p["wo"]).astype(jnp.float32)
        h = rms_norm(x, p["ln2"]).astype(jnp.bfloat16)
        return x + (jax.nn.gelu(h @ p["w1"]) @ p["w2"]).astype(jnp.float32)

    def forward(layer, params, x):  # type: ignore[no-untyped-def]
        for p in params:  # unrolled: one copy of the layer per iteration
            x = jax.checkpoint(layer)(x, p)
        return x

    def sgd(params, grads):  # type: ignore[no-untyped-def]
        return jax.tree.map(lambda w, g: w - 1e-3 * g, params, grads)

    if build.program == "jit":
        replicated = NamedSharding(mesh, P())

        def jit_layer(x, p):  # type: ignore[no-untyped-def]
            # Replicating the sharded weight makes the partitioner all-gather it; under remat the
            # backward pass re-gathers it.
            p = {k: lax.with_sharding_constraint(w, replicated).astype(jnp.bfloat16) for k, w in p.items()}
            return block(lax.with_sharding_constraint(x, NamedSharding(mesh, act_spec)), p)

        def loss(params, x, y):  # type: ignore[no-untyped-def]
            return jnp.mean((forward(jit_layer, params, x) - y) ** 2)

        def train_step(params, x, y):  # type: ignore[no-untyped-def]
            value, grads = jax.value_and_grad(loss)(params, x, y)
            return sgd(params, grads), value
    else:
        def manual_layer(x, p):  # type: ignore[no-untyped-def]
            p = {k: lax.all_gather(w, "fsdp", tiled=True).astype(jnp.bfloat16) for k, w in p.items()}
            return block(x, p)

        def local_step(params, x, y):  # type: ignore[no-untyped-def]
            # The whole step is one manual program, so the forward gathers and the backward
            # pass's re-gathers sit in the same computation (the gradient of each gather is a
            # reduce-scatter).
            def local_loss(params):  # type: ignore[no-untyped-def]
                return lax.pmean(jnp.mean((forward(manual_layer, params, x) - y) ** 2), "fsdp")

            value, grads = jax.value_and_grad(local_loss)(params)
            return sgd(params, grads), value

        specs = [weight_spec] * build.layers
        train_step = jax.shard_map(local_step, mesh=mesh, in_specs=(specs, act_spec, act_spec),
                                   out_specs=(specs, P()))

    def arg(shape, spec):  # type: ignore[no-untyped-def]
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))

    params = [{k: arg(s, weight_spec[k]) for k, s in shapes.items()} for _ in range(build.layers)]
    x = arg((BATCH, SEQ, WIDTH), act_spec)
    param_shardings = [{k: NamedSharding(mesh, s) for k, s in weight_spec.items()}] * build.layers
    act = NamedSharding(mesh, act_spec)
    step = jax.jit(train_step, in_shardings=(param_shardings, act, act),
                   out_shardings=(param_shardings, NamedSharding(mesh, P())), donate_argnums=0)
    return step, (params, x, x)


def _dumped(directory: Path, stage: str) -> tuple[Path, Path] | None:
    """(text, proto) of `stage` in an XLA dump directory, if both are there."""
    pattern = DUMPED[stage][0]
    found = [sorted(directory.glob(pattern + ext)) for ext in (".txt", ".hlo.pb")]
    if any(len(f) > 1 for f in found):
        raise RuntimeError(f"several {pattern} files in the XLA dump: {found}")
    return (found[0][0], found[1][0]) if all(found) else None


def _finish_when_dumped(build: Build, dump: Path, started: float, timings: dict) -> None:
    """Copy the stages out of the dump as soon as XLA has written them, then end the process.

    XLA writes its dumps in order during the compile; once the last stage we keep is on disk
    (every file present and its size unchanged for 2 s), the rest of the compile (more passes,
    LLVM code generation) is of no use here, and at 480+ layers it takes most of the time.
    """
    sizes: dict[Path, int] = {}
    stable_since = time.monotonic()
    while True:
        time.sleep(0.5)
        files = [_dumped(dump, stage) for stage in build.stages]
        if any(f is None for f in files):
            continue
        now = {p: p.stat().st_size for pair in files if pair for p in pair}
        if now != sizes:
            sizes, stable_since = now, time.monotonic()
            continue
        if time.monotonic() - stable_since < 2.0:
            continue
        timings["xla_dump_s"] = time.perf_counter() - started - 2.0
        for stage, pair in zip(build.stages, files, strict=True):
            assert pair is not None
            shutil.copyfile(pair[0], OUT / f"{build.module_name(stage)}.hlo")
            shutil.copyfile(pair[1], OUT / f"{build.module_name(stage)}.pb")
        print(json.dumps(timings), flush=True)
        os._exit(0)  # the compile is still running in the main thread


def run_build(build: Build, dump: Path) -> None:
    """Lower the program and compile it with dumps into `dump`; keep the stages' files."""
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={DEVICES}"
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    jax.config.update("jax_use_shardy_partitioner", build.partitioner == "shardy")
    # Source paths in the metadata relative to the checkout: the same bytes on every machine.
    jax.config.update("jax_hlo_source_file_canonicalization_regex", r"^.*/(?=benchmarks/)")
    step, args = _program(build)
    t0 = time.perf_counter()
    lowered = step.lower(*args)
    timings = {"lower_s": time.perf_counter() - t0}
    started = time.perf_counter()
    threading.Thread(target=_finish_when_dumped, args=(build, dump, started, timings), daemon=True).start()
    lowered.compile(compiler_options={
        "xla_dump_to": str(dump), "xla_dump_hlo_as_text": True, "xla_dump_hlo_as_proto": True,
        "xla_dump_hlo_pass_re": "spmd-partitioning"})
    # A small module compiles before its files settle: the watcher ends the process.
    time.sleep(60)
    raise RuntimeError(f"the XLA dump in {dump} never held all of {', '.join(build.stages)}")


def describe_build(build: Build) -> dict:
    """Manifest entries of a build's files: sizes, and XLA's own counts of its instructions."""
    import jax
    from jax._src.lib import xla_client as xc

    entries = {}
    for stage in build.stages:
        name = build.module_name(stage)
        text = (OUT / f"{name}.hlo").read_text()
        module = xc.hlo.hlo_module_from_text(text)
        comps = module.computations()
        entries[name] = {
            "stage": stage, "stage_label": STAGES[stage], "made_by": DUMPED[stage][1],
            "program": build.program, "partitioner": build.partitioner, "layers": build.layers,
            "build": build.key, "quick": build.quick, "table": build.table, "jax_version": jax.__version__,
            "file": f"{name}.hlo", "pb": f"{name}.pb", "pb_container": "HloProto (XLA dump)",
            "bytes": len(text.encode()), "pb_bytes": (OUT / f"{name}.pb").stat().st_size,
            "lines": text.count("\n"), "computations": len(comps),
            "instructions": sum(len(c.instructions()) for c in comps),
            "all_gathers": text.count(" all-gather("), "fusions": text.count(" fusion("),
        }
        del module, comps
    return entries


# ------------------------------------------------------------------------------------------
# Cache and manifest


def load_manifest() -> dict:
    return json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {"modules": {}}


def _child(*args: str) -> str:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:1])} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc.stdout.strip().splitlines()[-1]


def ensure(quick: bool, force: bool = False, only: set[str] | None = None) -> dict:
    """Make every missing module (each build in fresh processes), or with `only` just the
    builds that make one of those modules (a 214 MB build takes minutes); return the
    manifest."""
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest()
    for build in BUILDS:
        names = [build.module_name(s) for s in build.stages]
        if (quick and not build.quick) or (only is not None and not only.intersection(names)):
            continue
        if not force and all(n in manifest["modules"] and (OUT / f"{n}.hlo").exists() for n in names):
            continue
        print(f"generating {build.key} ({', '.join(names)}) ...", file=sys.stderr, flush=True)
        spec = json.dumps(asdict(build))
        dump = OUT / f"dump-{build.key}"
        shutil.rmtree(dump, ignore_errors=True)
        t0 = time.perf_counter()
        try:
            timings = json.loads(_child("--build", spec, str(dump)))
        finally:
            shutil.rmtree(dump, ignore_errors=True)
        timings["generate_s"] = time.perf_counter() - t0
        entries = json.loads(_child("--describe", spec))
        for entry in entries.values():
            entry.update(timings)
        manifest["modules"].update(entries)
        manifest["model"] = {"width": WIDTH, "heads": HEADS, "ffn": FFN, "seq": SEQ, "batch": BATCH,
                             "devices": DEVICES}
        MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
        print(f"  {timings['generate_s']:.0f}s", file=sys.stderr, flush=True)
    return manifest


def modules(manifest: dict, quick: bool) -> list[dict]:
    """Manifest entries in table order: by stage, program, partitioner, then size."""
    order = {s: i for i, s in enumerate(STAGES)}
    rows = [dict(e, name=n) for n, e in manifest["modules"].items() if e["table"] and (e["quick"] or not quick)]
    return sorted(rows, key=lambda e: (order[e["stage"]], e["program"], e["partitioner"] != "shardy", e["layers"]))


def describe(entry: dict) -> str:
    prog = "shard_map + explicit all_gather" if entry["program"] == "shard_map" else "jit + NamedSharding"
    return f"{entry['stage_label']}; {prog}, {entry['partitioner']}, {entry['layers']} layers"


def _build(spec: str) -> Build:
    fields = json.loads(spec)
    return Build(**{**fields, "stages": tuple(fields["stages"])})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="only the ~4 MB modules")
    ap.add_argument("--force", action="store_true", help="rebuild even if cached")
    ap.add_argument("--list", action="store_true", help="print what exists")
    # Internal: the two steps of a build, each in its own process.
    ap.add_argument("--build", nargs=2, metavar=("SPEC", "DUMP"), help=argparse.SUPPRESS)
    ap.add_argument("--describe", metavar="SPEC", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.build:
        run_build(_build(args.build[0]), Path(args.build[1]))
    if args.describe:
        print(json.dumps(describe_build(_build(args.describe))))
        return 0
    manifest = load_manifest() if args.list else ensure(args.quick, args.force)
    for e in modules(manifest, args.quick):
        print(f"{e['file']:28} {e['bytes'] / 1e6:6.1f} MB {e['instructions']:>9,} instr "
              f"{e['computations']:>6,} comps  {describe(e)}; its build: lowered in {e['lower_s']:.0f}s, "
              f"XLA wrote its last dump in {e['xla_dump_s']:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
