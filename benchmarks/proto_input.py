"""Binary ``.pb`` input vs the same module's HLO text: `hlo-dedup X --passes= -o OUT`.

    python benchmarks/proto_input.py                    # JAX train steps (8, 48 layers) + corpus
    python benchmarks/proto_input.py --layers 8 --corpus 0 --runs 7
    python benchmarks/proto_input.py --files a.pb b.pb   # your own HloModuleProto files

Each module is written twice into benchmarks/out/proto_input/: `NAME.pb` (the serialized
HloModuleProto, from XLA's parser) and `NAME.hlo` (XLA's text of that proto). The modules:

* `train_LAYERS`: a JAX transformer training step (attention + MLP per layer, `jax.grad`,
  SGD update), FSDP-sharded on 8 CPU devices and compiled by XLA; the text is
  `compiled.as_text()`, i.e. the optimized, partitioned module a user dumps;
* the `--corpus N` largest modules of the corpus (`../shared/corpus/xla-hlo`) XLA parses.

Per module and input kind, `--runs` fresh `python -m hlo_dedup FILE --passes= -o OUT` processes
(alternating kinds, after one untimed run of each); the children cache their bytecode (in
benchmarks/out/pycache, even when PYTHONDONTWRITEBYTECODE is set) as an installed package
does, so imports cost what they cost a user; the table shows the medians of their wall time and CPU time (user+system
of the child) and the ratio pb/hlo. The outputs of both kinds must be byte-identical. Last,
`python -X importtime` on the first `.pb` must show no jax or jaxlib module: reading a binary
proto never imports jax. Generating the modules needs jax (the `xla` extra); timing does not.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out" / "proto_input"
CORPUS = ROOT.parent / "shared" / "corpus" / "xla-hlo"
DEVICES = 8

_TRAIN_STEP = r"""
import sys
import jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

layers, d, ff, heads, batch, seq = int(sys.argv[1]), 256, 1024, 4, 8, 128
mesh = Mesh(jax.devices()[:8], ("fsdp",))
shard0 = NamedSharding(mesh, P("fsdp"))
key = jax.random.PRNGKey(0)

def layer_params(k):
    ks = jax.random.split(k, 6)
    shapes = [(d, d), (d, d), (d, d), (d, d), (d, ff), (ff, d)]
    return [jax.random.normal(kk, s, jnp.float32) * 0.02 for kk, s in zip(ks, shapes)] + [jnp.ones((d,))]

def rms(x, g):
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * g

def block(x, p):
    wq, wk, wv, wo, w1, w2, g = p
    h = rms(x, g).astype(jnp.bfloat16)
    split = lambda t: t.reshape(batch, seq, heads, d // heads).transpose(0, 2, 1, 3)
    q, k, v = (split(h @ w.astype(jnp.bfloat16)) for w in (wq, wk, wv))
    a = jax.nn.softmax((q @ k.transpose(0, 1, 3, 2)).astype(jnp.float32) / 8.0, -1).astype(jnp.bfloat16)
    o = (a @ v).transpose(0, 2, 1, 3).reshape(batch, seq, d)
    x = x + (o @ wo.astype(jnp.bfloat16)).astype(jnp.float32)
    m = jax.nn.gelu(rms(x, g).astype(jnp.bfloat16) @ w1.astype(jnp.bfloat16))
    return x + (m @ w2.astype(jnp.bfloat16)).astype(jnp.float32)

def loss(params, x):
    for p in params:
        x = jax.checkpoint(block)(x, p)
    return jnp.mean(x * x)

@jax.jit
def train_step(params, x):
    l, g = jax.value_and_grad(loss)(params, x)
    return l, jax.tree_util.tree_map(lambda p, gp: p - 0.01 * gp, params, g)

params = [layer_params(k) for k in jax.random.split(key, layers)]
params = jax.tree_util.tree_map(lambda p: jax.device_put(p, shard0) if p.ndim == 2 else p, params)
x = jax.device_put(jnp.ones((batch, seq, d)), NamedSharding(mesh, P("fsdp")))
sys.stdout.write(train_step.lower(params, x).compile().as_text())
"""


def _oracle():
    from hlo_dedup.xla import oracle

    return oracle


def _write_pair(name: str, text: str) -> tuple[Path, Path] | None:
    """`NAME.pb` and `NAME.hlo` of the module XLA parses from `text` (None if it does not)."""
    oracle = _oracle()
    pb, hlo = OUT / f"{name}.pb", OUT / f"{name}.hlo"
    if pb.exists() and hlo.exists():
        return pb, hlo
    try:
        proto = oracle.text_to_module_proto(text)
    except Exception:
        return None
    pb.write_bytes(proto)
    hlo.write_text(oracle.module_proto_to_text(proto))
    return pb, hlo


def train_step(layers: int) -> tuple[Path, Path]:
    name = f"train_{layers}"
    if not (OUT / f"{name}.pb").exists():
        print(f"generating {name} with JAX ...", file=sys.stderr, flush=True)
        env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES}")
        text = subprocess.run(
            [sys.executable, "-c", _TRAIN_STEP, str(layers)], env=env, check=True, capture_output=True, text=True
        ).stdout
        pair = _write_pair(name, text)
        assert pair is not None, f"XLA does not parse its own {name}"
    return OUT / f"{name}.pb", OUT / f"{name}.hlo"


def largest_corpus_modules(count: int) -> list[tuple[Path, Path]]:
    if count <= 0:
        return []
    modules = []
    for path in sorted(CORPUS.glob("*.hlo")):
        for i, part in enumerate(path.read_text().split("// -----")):
            if part.strip():
                modules.append((len(part), f"{path.stem}_{i}", part))
    pairs = []
    for _, name, text in sorted(modules, key=lambda m: -m[0]):
        pair = _write_pair(re.sub(r"[^\w.-]", "_", name), text)
        if pair is not None:
            pairs.append(pair)
            if len(pairs) == count:
                break
    return pairs


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(OUT.parent / "pycache")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    return env


def run_once(path: Path, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one `python -m hlo_dedup PATH --passes= -o OUT` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "hlo_dedup", str(path), "--passes=", "-o", str(out)],
        capture_output=True, text=True, env=child_env(),
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{path}: exit {proc.returncode}\n{proc.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(pb: Path, hlo: Path, runs: int) -> dict[str, float]:
    times: dict[str, list[tuple[float, float]]] = {"pb": [], "hlo": []}
    outs = {kind: OUT / f"{pb.stem}.{kind}.out.hlo" for kind in times}
    for kind, path in (("pb", pb), ("hlo", hlo)):
        run_once(path, outs[kind])  # warm-up: bytecode cache, file cache
    for _ in range(runs):
        for kind, path in (("pb", pb), ("hlo", hlo)):
            times[kind].append(run_once(path, outs[kind]))
    if outs["pb"].read_bytes() != outs["hlo"].read_bytes():
        raise SystemExit(f"{pb.stem}: the .pb and .hlo outputs differ")
    result = {"size": pb.stat().st_size, "instructions": _instructions(hlo)}
    for kind, samples in times.items():
        result[f"{kind}_wall"] = statistics.median(w for w, _ in samples)
        result[f"{kind}_cpu"] = statistics.median(c for _, c in samples)
    return result


def _instructions(hlo: Path) -> int:
    return sum(1 for line in hlo.read_text().splitlines() if " = " in line and not line.startswith("HloModule"))


def jax_imports(pb: Path) -> list[str]:
    """Modules named jax* that `python -X importtime` reports for reading `pb`."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hlo_dedup", str(pb), "--passes=", "-o", os.devnull],
        capture_output=True, text=True, check=True, env=child_env(),
    )  # fmt: skip
    names = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    return [n for n in names if n.split(".")[0] in ("jax", "jaxlib")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", default="8,48", help="train-step sizes to generate (comma-separated; '' for none)")
    ap.add_argument("--corpus", type=int, default=3, help="how many of the largest corpus modules")
    ap.add_argument("--files", nargs="*", default=[], type=Path, help="extra .pb files (the .hlo is made by XLA)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    pairs = [train_step(int(n)) for n in args.layers.split(",") if n]
    pairs += largest_corpus_modules(args.corpus)
    for f in args.files:
        hlo = OUT / f"{f.stem}.hlo"
        if not hlo.exists():
            hlo.write_text(_oracle().module_proto_to_text(f.read_bytes()))
        pairs.append((f, hlo))
    head = f"{'module':42s} {'instrs':>7s} {'pb MB':>6s} {'hlo wall':>9s} {'pb wall':>8s} {'ratio':>6s} "
    head += f"{'hlo cpu':>8s} {'pb cpu':>7s} {'ratio':>6s}"
    print(f"median of {args.runs} fresh processes each: hlo-dedup FILE --passes= -o OUT (seconds)")
    print(head)
    for pb, hlo in pairs:
        r = measure(pb, hlo, args.runs)
        print(
            f"{pb.stem[:42]:42s} {r['instructions']:7d} {r['size'] / 1e6:6.2f} {r['hlo_wall']:9.3f} "
            f"{r['pb_wall']:8.3f} {r['pb_wall'] / r['hlo_wall']:6.2f} {r['hlo_cpu']:8.3f} {r['pb_cpu']:7.3f} "
            f"{r['pb_cpu'] / r['hlo_cpu']:6.2f}",
            flush=True,
        )
    if pairs:
        found = jax_imports(pairs[0][0])
        print(f"python -X importtime on {pairs[0][0].name}: " + (f"imports {found}" if found else "no jax import"))
        if found:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
