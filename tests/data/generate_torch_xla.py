"""Write real torch-xla HLO modules into ``tests/data/torch_xla/`` (never run by the tests).

Most Neuron users write PyTorch (torch-neuronx, neuronx-distributed on torch-xla), whose graphs
gather weights in ways JAX's do not: an explicit ``xm.all_gather`` per use of a weight, a
collective token threaded through every collective, ``pin_layout=True`` gathers that are
all-reduces of a zero-padded shard, FSDP's flattened 2-D view and its mixed-precision cast
before each gather, and GSPMD (FSDPv2) sharding. The explanations must be checked on what
torch-xla really writes, so each module here is one small program traced by torch-xla and
taken from ``torch_xla._XLAC._get_xla_tensors_hlo`` (or, for SPMD, XLA's dump after its SPMD
partitioner), with ``XLA_HLO_DEBUG=1`` metadata and directories stripped from source paths.

Run with torch and torch_xla 2.9 installed in their own environment (several GB; the project
does not depend on them)::

    python tests/data/generate_torch_xla.py

Each program runs in a child process with its own environment (``PJRT_DEVICE=CPU
CPU_NUM_DEVICES=8``; torch-xla reads ``DISABLE_NUMERIC_CC_TOKEN`` and the like once), on one
process whose collectives name the eight devices in explicit replica groups: the HLO is what
an eight-worker run traces on worker 0.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent / "torch_xla"
MAX_BYTES = 100_000
DEVICES = 8
GROUPS = [list(range(DEVICES))]
D = 16  # model width; the weights' rows shard over the eight devices
VOCAB = 32
BATCH = 4

#: name -> (description, environment for the child)
PROGRAMS: dict[str, tuple[str, dict[str, str]]] = {
    "nxd_tied_remat_token.hlo": (
        "neuronx-distributed style: each use of a row-sharded weight is an explicit xm.all_gather "
        "(pin_layout=False) whose backward is a reduce-scatter; the embedding is tied (gathered for the "
        "input and again, transposed, for the output projection) and layer 2 is checkpointed "
        "(torch_xla.utils.checkpoint: re-gathered in the backward); forward and backward in one graph, "
        "with torch-xla's default collective token (every gather's operand is add(weight, broadcast(token)))",
        {}),
    "nxd_tied_remat.hlo": (
        "the same program with DISABLE_NUMERIC_CC_TOKEN=1: the gathers read the weights directly",
        {"DISABLE_NUMERIC_CC_TOKEN": "1"}),
    "pin_layout.hlo": (
        "xm.all_gather(pin_layout=True) of the tied embedding, twice: torch-xla writes each as a "
        "zero pad of the shard at this worker's offset and an all-reduce (sum); no all-gather at all "
        "(XLA_ALWAYS_ALLREDUCE=1 keeps the all-reduce in a one-process trace)",
        {"DISABLE_NUMERIC_CC_TOKEN": "1", "XLA_ALWAYS_ALLREDUCE": "1"}),
    "fsdp_flat.hlo": (
        "torch_xla XlaFullyShardedDataParallel (flattened parameters, pin_layout_in_collective_ops=False) "
        "around a two-layer MLP with each layer wrapped too, forward and backward: each flat shard goes "
        "through an opt-barrier and a view(-1, 128) reshape before its gather, and the backward "
        "re-gathers the layers' weights",
        {"DISABLE_NUMERIC_CC_TOKEN": "1"}),
    "fsdp_bf16.hlo": (
        "the same FSDP model with compute_dtype=torch.bfloat16 (mixed precision): each f32 shard is "
        "converted to bf16 before its gather",
        {"DISABLE_NUMERIC_CC_TOKEN": "1"}),
    "bf16_cast.hlo": (
        "an explicit w.to(torch.bfloat16) before xm.all_gather, for two uses of the same weight, and a "
        "gather of the f32 weight",
        {"DISABLE_NUMERIC_CC_TOKEN": "1"}),
    "spmd_fsdpv2.hlo": (
        "FSDPv2 style GSPMD: torch_xla.distributed.spmd on a 2-D (4, 2) mesh ('fsdp', 'model'), weights "
        "sharded on 'fsdp' with mark_sharding, forward and backward; XLA's module after its SPMD "
        "partitioner (--xla_dump_hlo_pass_re=spmd-partitioning)",
        {"XLA_USE_SPMD": "1"}),
}


# --- the programs (run in the child) ----------------------------------------------------------


def _tensors(program: str) -> list:  # noqa: C901 - one branch per program
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    dev = torch_xla.device()
    torch.manual_seed(0)

    class GatherRows(torch.autograd.Function):
        """neuronx-distributed's gather of a row-sharded weight: all-gather forward, reduce-scatter
        of the gradient backward."""

        @staticmethod
        def forward(ctx, shard, pin_layout):  # type: ignore[no-untyped-def]
            return xm.all_gather(shard, dim=0, groups=GROUPS, pin_layout=pin_layout)

        @staticmethod
        def backward(ctx, grad):  # type: ignore[no-untyped-def]
            return xm.reduce_scatter(xm.REDUCE_SUM, grad, 1.0, 0, DEVICES, groups=GROUPS, pin_layout=False), None

    def shard(*shape: int):  # type: ignore[no-untyped-def]
        return torch.randn(*shape).to(dev).requires_grad_()

    def gather(w, pin_layout: bool = False):  # type: ignore[no-untyped-def]
        return GatherRows.apply(w, pin_layout)

    if program in ("nxd_tied_remat_token.hlo", "nxd_tied_remat.hlo"):
        from torch_xla.utils.checkpoint import checkpoint

        embed, w1, w2 = shard(VOCAB // DEVICES, D), shard(D // DEVICES, D), shard(D // DEVICES, D)
        x = torch.randn(BATCH, VOCAB).to(dev)
        torch_xla.sync()

        def layer(w, h):  # type: ignore[no-untyped-def]
            return torch.tanh(h @ gather(w).T)

        h = x @ gather(embed)  # input embedding
        h = layer(w1, h)
        h = checkpoint(layer, w2, h)
        logits = h @ gather(embed).T  # tied output projection
        loss = logits.sum()
        loss.backward()
        return [loss, embed.grad, w1.grad, w2.grad]
    if program == "pin_layout.hlo":
        embed = shard(VOCAB // DEVICES, D)
        x = torch.randn(BATCH, VOCAB).to(dev)
        torch_xla.sync()
        h = torch.tanh(x @ gather(embed, pin_layout=True))
        return [h @ gather(embed, pin_layout=True).T]
    if program in ("fsdp_flat.hlo", "fsdp_bf16.hlo"):
        from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP

        options = dict(sharding_groups=GROUPS, sharding_rank=0, sharding_world_size=DEVICES,
                       pin_layout_in_collective_ops=False)
        if program == "fsdp_bf16.hlo":
            options["compute_dtype"] = torch.bfloat16
        # Each layer wrapped on its own (as auto_wrap_policy does): it frees its full weights
        # after the forward and gathers them again for the backward.
        layers = [FSDP(torch.nn.Linear(D * 4, D * 4).to(dev), **options) for _ in range(2)]
        model = FSDP(torch.nn.Sequential(layers[0], torch.nn.Tanh(), layers[1]), **options)
        x = torch.randn(BATCH, D * 4).to(dev)
        torch_xla.sync()
        loss = model(x).float().sum()
        loss.backward()
        return [loss] + [p.grad for p in model.parameters()]
    if program == "bf16_cast.hlo":
        w, v = shard(D // DEVICES, D), shard(D // DEVICES, D)
        x = torch.randn(BATCH, D).to(dev)
        torch_xla.sync()
        h = torch.tanh(x.bfloat16() @ gather(w.to(torch.bfloat16)).T)
        h = torch.tanh(h @ gather(w.to(torch.bfloat16)).T)
        return [h.float() @ gather(v).T]
    if program == "spmd_fsdpv2.hlo":
        import numpy as np
        import torch_xla.distributed.spmd as xs
        import torch_xla.runtime as xr

        xr.use_spmd()
        mesh = xs.Mesh(np.arange(DEVICES), (4, 2), ("fsdp", "model"))
        w1, w2 = torch.randn(D, D).to(dev).requires_grad_(), torch.randn(D, D).to(dev).requires_grad_()
        x = torch.randn(BATCH * 16, D).to(dev)  # a batch larger than the weights: XLA gathers weights
        for w in (w1, w2):
            xs.mark_sharding(w, mesh, ("fsdp", None))
        xs.mark_sharding(x, mesh, ("fsdp", None))
        torch_xla.sync()
        h = torch.tanh(x @ w1.T)
        h = torch.tanh(h @ w2.T)
        loss = (h @ w1).sum()  # w1 tied
        loss.backward()
        return [loss, w1.grad, w2.grad]
    raise SystemExit(f"unknown program {program}")


def _child(program: str, dump: str | None) -> None:
    import torch_xla

    tensors = _tensors(program)
    if dump is None:
        sys.stdout.write(torch_xla._XLAC._get_xla_tensors_hlo(tensors))
    else:
        torch_xla.sync()  # compile: XLA writes the module around its SPMD partitioner into `dump`


# --- the parent ---------------------------------------------------------------------------------


def _strip_paths(text: str) -> str:
    """Source paths as their last component: no machine's directories in committed files."""
    return re.sub(r'source_file="[^"]*/([^"/]*)"', r'source_file="\1"', text)


def _run(program: str, env_extra: dict[str, str]) -> str:
    env = dict(os.environ, PJRT_DEVICE="CPU", CPU_NUM_DEVICES=str(DEVICES), XLA_HLO_DEBUG="1", **env_extra)
    with tempfile.TemporaryDirectory() as dump:
        spmd = "XLA_USE_SPMD" in env_extra
        if spmd:
            env["XLA_FLAGS"] = (f"--xla_dump_to={dump} --xla_dump_hlo_as_text "
                                "--xla_dump_hlo_pass_re=spmd-partitioning")
        # -P: not tests/data on the path, whose jax/ folder would shadow the jax torch-xla may import.
        out = subprocess.run([sys.executable, "-P", __file__, "--child", program] + (["--dump", dump] if spmd else []),
                             env=env, check=True, capture_output=True, text=True).stdout
        if not spmd:
            return out
        found = sorted(glob.glob(os.path.join(dump, "*after_spmd-partitioning*.txt")))
        if not found:
            raise SystemExit(f"{program}: XLA wrote no module after spmd-partitioning")
        return Path(found[-1]).read_text()


def main() -> None:
    import torch
    import torch_xla

    OUT_DIR.mkdir(exist_ok=True)
    manifest = {"generator": "tests/data/generate_torch_xla.py", "torch_version": torch.__version__,
                "torch_xla_version": torch_xla.__version__, "devices": DEVICES, "modules": {}}
    for name, (description, env_extra) in PROGRAMS.items():
        text = _strip_paths(_run(name, env_extra))
        data = text.encode()
        if len(data) > MAX_BYTES:
            raise SystemExit(f"{name}: {len(data)} bytes, more than {MAX_BYTES}")
        (OUT_DIR / name).write_bytes(data)
        manifest["modules"][name] = {
            "description": description,
            "environment": env_extra,
            "all_gathers": len(re.findall(r" all-gather\(", text)),
            "all_reduces": len(re.findall(r" all-reduce\(", text)),
            "bytes": len(data),
        }
        print(f"{name}: {len(data)} bytes")
    (OUT_DIR / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    if "--child" in sys.argv:
        _child(sys.argv[sys.argv.index("--child") + 1],
               sys.argv[sys.argv.index("--dump") + 1] if "--dump" in sys.argv else None)
    else:
        main()
