"""Write a large, realistic HLO text module as XLA prints it (benchmark input).

The module is a transformer training step after SPMD partitioning for FSDP on 8 devices:

* every layer's weights are entry parameters sharded on dimension 0 (`f32[N/8,...]`,
  `sharding={devices=[8,1]<=[8]}`) and all-gathered before use (`channel_id=1,
  replica_groups=[1,8]<=[8], dimensions={0}, use_global_device_ids=true`) then converted
  to bf16;
* the forward pass (RMSNorm with a `reduce` over a `to_apply` region, QKV projection,
  slices/reshapes/transposes into heads, batched dots, softmax with max/add reductions,
  output projection, GELU MLP, residual adds);
* the backward pass under `jax.checkpoint`: each layer's weights and saved input go through
  `get-tuple-element(opt-barrier(tuple(...)))`, the forward is recomputed (re-gathering every
  weight: the duplicate gathers `neuron_all_gather_duplicate_remover` folds), then the
  gradient dots, `reduce-scatter` of each weight gradient and an SGD update;
* `metadata={op_name="jit(train_step)/..." source_file="..." source_line=N}` on every
  instruction, the `entry_computation_layout` header, `/*index=N*/` operand comments.

Instructions are emitted in the order XLA's printer uses (DFS post order from the root,
operands first-to-last), so `xc.hlo.hlo_module_from_text(text).to_string()` reproduces the
file byte for byte (checked by `--check-xla`). The output is deterministic: the same
arguments give the same bytes.

    python benchmarks/generate.py --instructions 1000000 -o benchmarks/out/fsdp_1000000.hlo
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent / "out"
SHARDS = 8
GROUPS = "replica_groups=[1,8]<=[8]"
SRC = "/workspace/model/transformer.py"


def default_path(instructions: int, **dims: int) -> Path:
    suffix = "" if not dims or dims == DEFAULT_DIMS else "_" + "_".join(f"{k}{v}" for k, v in sorted(dims.items()))
    return OUT_DIR / f"fsdp_{instructions}{suffix}.hlo"


DEFAULT_DIMS = {"batch": 4, "seq": 512, "model": 1024, "heads": 16, "ffn": 4096}


def shape(dtype: str, dims: tuple[int, ...] | list[int]) -> str:
    """`f32[4,512]{1,0}` with XLA's default (descending) layout; `f32[]` for scalars."""
    if not dims:
        return f"{dtype}[]"
    layout = ",".join(str(i) for i in range(len(dims) - 1, -1, -1))
    return f"{dtype}[{','.join(map(str, dims))}]{{{layout}}}"


def tuple_shape(shapes: list[str]) -> str:
    return "(" + ", ".join((f"/*index={i}*/" if i and i % 5 == 0 else "") + s for i, s in enumerate(shapes)) + ")"


def _no_layout(s: str) -> str:
    """A shape as the computation signature prints it (no layouts)."""
    out = []
    depth = 0
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _layout_free_tuple(shapes: list[str]) -> str:
    return "(" + ", ".join(_no_layout(s) for s in shapes) + ")"


class Builder:
    """Nodes of one computation: (name, shape, opcode, operand ids, attrs, metadata)."""

    def __init__(self, counters: dict[str, int]) -> None:
        self.counters = counters
        self.names: list[str] = []
        self.shapes: list[str] = []
        self.lines: list[tuple[str, list[int], str]] = []  # opcode, operands, attrs+metadata
        self.params: list[int] = []

    def _name(self, base: str) -> str:
        n = self.counters.get(base, 0) + 1
        self.counters[base] = n
        return f"{base}.{n}"

    def op(self, opcode: str, shp: str, operands: list[int], attrs: str = "", meta: str = "", base: str | None = None) -> int:
        self.names.append(self._name(base or opcode))
        self.shapes.append(shp)
        self.lines.append((opcode, operands, attrs + meta))
        return len(self.names) - 1

    def param(self, shp: str, attrs: str = "") -> int:
        number = len(self.params)
        i = self.op("parameter", shp, [], attrs, base="param")
        self.lines[i] = ("parameter", [number], attrs)  # operand slot holds the number
        self.params.append(i)
        return i

    def post_order(self, root: int) -> list[int]:
        """XLA's HloComputation::MakeInstructionPostOrder for a computation whose only
        user-less instruction is the root: iterative DFS, operands first to last."""
        visited = bytearray(len(self.names))  # 0 new, 1 visiting, 2 done
        order: list[int] = []
        stack = [root]
        lines = self.lines
        while stack:
            cur = stack[-1]
            state = visited[cur]
            if state:
                stack.pop()
                if state == 1:
                    visited[cur] = 2
                    order.append(cur)
                continue
            visited[cur] = 1
            opcode, operands, _ = lines[cur]
            if opcode != "parameter":
                for o in reversed(operands):
                    if not visited[o]:
                        stack.append(o)
        return order

class Model:
    def __init__(self, layers: int, batch: int, seq: int, model: int, heads: int, ffn: int) -> None:
        assert model % SHARDS == 0 and ffn % SHARDS == 0 and model % heads == 0
        self.L, self.B, self.S, self.D, self.H, self.F = layers, batch, seq, model, heads, ffn
        self.hd = model // heads
        self.counters: dict[str, int] = {}
        self.b = Builder(self.counters)
        self.line = 10

    # ------------------------------------------------------------- helpers
    def meta(self, path: str, op: str, line: int) -> str:
        return f', metadata={{op_name="jit(train_step)/{path}/{op}" source_file="{SRC}" source_line={line}}}'

    def bcast(self, x: int, dims: tuple[int, ...], bdims: str, dtype: str, path: str, line: int) -> int:
        return self.b.op("broadcast", shape(dtype, dims), [x], f", dimensions={{{bdims}}}", self.meta(path, "broadcast_in_dim", line))

    def scalar(self, dtype: str, value: str, dims: tuple[int, ...], path: str, line: int) -> int:
        c = self.b.op("constant", shape(dtype, ()), [], "", self.meta(path, "broadcast_in_dim", line))
        self._const_values[c] = value
        return self.bcast(c, dims, "", dtype, path, line)

    def unary(self, opcode: str, x: int, path: str, line: int, jax_op: str | None = None) -> int:
        return self.b.op(opcode, self.b.shapes[x], [x], "", self.meta(path, jax_op or opcode, line))

    def binary(self, opcode: str, x: int, y: int, path: str, line: int, jax_op: str) -> int:
        return self.b.op(opcode, self.b.shapes[x], [x, y], "", self.meta(path, jax_op, line))

    def convert(self, x: int, dtype: str, dims: tuple[int, ...], path: str, line: int) -> int:
        return self.b.op("convert", shape(dtype, dims), [x], "", self.meta(path, "convert_element_type", line))

    def dot(self, x: int, y: int, dims: tuple[int, ...], attrs: str, path: str, line: int, dtype: str = "bf16") -> int:
        return self.b.op("dot", shape(dtype, dims), [x, y], ", " + attrs, self.meta(path, "dot_general", line))

    def reduce(self, x: int, init: int, dims: tuple[int, ...], rdims: str, region: str, path: str, line: int, jax_op: str) -> int:
        return self.b.op("reduce", shape("f32", dims), [x, init], f", dimensions={{{rdims}}}, to_apply=%{region}",
                         self.meta(path, jax_op, line))

    def gather(self, p: int, full: tuple[int, ...], path: str, line: int) -> int:
        return self.b.op("all-gather", shape("f32", full), [p],
                         f", channel_id=1, {GROUPS}, dimensions={{0}}, use_global_device_ids=true",
                         self.meta(path, "all_gather", line))

    def reduce_scatter(self, g: int, local: tuple[int, ...], path: str, line: int) -> int:
        return self.b.op("reduce-scatter", shape("f32", local), [g],
                         f", channel_id=1, {GROUPS}, use_global_device_ids=true, dimensions={{0}}, to_apply=%{self.r_add}",
                         self.meta(path, "reduce_scatter", line))

    # -------------------------------------------------------------- blocks
    def rmsnorm(self, x: int, ln: int, path: str) -> tuple[int, int, int, int]:
        """Returns (normalised bf16, normalised-before-scale f32, broadcast rsqrt, gathered-scale broadcast)."""
        B, S, D = self.B, self.S, self.D
        act = (B, S, D)
        p = path + "/rms_norm"
        xf = self.convert(x, "f32", act, p, 31)
        sq = self.binary("multiply", xf, xf, p, 32, "square")
        zero = self.const_value("f32", "0", p, 32)
        ss = self.reduce(sq, zero, (B, S), "2", self.r_add, p, 32, "reduce_sum")
        inv = self.scalar("f32", "0.0009765625", (B, S), p, 33)
        ms = self.binary("multiply", ss, inv, p, 33, "div")
        eps = self.scalar("f32", "1e-06", (B, S), p, 34)
        ms = self.binary("add", ms, eps, p, 34, "add")
        r = self.unary("rsqrt", ms, p, 34)
        rb = self.bcast(r, act, "0,1", "f32", p, 35)
        xn = self.binary("multiply", xf, rb, p, 35, "mul")
        g = self.gather(ln, (D,), p, 36)
        gb = self.bcast(g, act, "2", "f32", p, 36)
        y = self.binary("multiply", xn, gb, p, 36, "mul")
        return self.convert(y, "bf16", act, p, 37), xn, rb, gb

    def const_value(self, dtype: str, value: str, path: str, line: int) -> int:
        c = self.b.op("constant", shape(dtype, ()), [], "", self.meta(path, "broadcast_in_dim", line))
        self._const_values[c] = value
        return c

    def forward(self, x: int, w: list[int], path: str) -> dict[str, int]:
        """One transformer block; returns the values the backward pass needs."""
        B, S, D, H, F, hd = self.B, self.S, self.D, self.H, self.F, self.hd
        act = (B, S, D)
        v: dict[str, int] = {}
        ln1, wqkv, wo, ln2, wup, wdown = w
        h, v["xn1"], v["rb1"], v["gb1"] = self.rmsnorm(x, ln1, path + "/attn")
        p = path + "/attn"
        gq = self.gather(wqkv, (D, 3 * D), p, 41)
        v["wqkv"] = wq = self.convert(gq, "bf16", (D, 3 * D), p, 41)
        v["h1"] = h
        qkv = self.dot(h, wq, (B, S, 3 * D), "lhs_contracting_dims={2}, rhs_contracting_dims={0}", p, 42)
        heads = []
        for j in range(3):
            s = self.b.op("slice", shape("bf16", act), [qkv], f", slice={{[0:{B}], [0:{S}], [{j * D}:{(j + 1) * D}]}}",
                          self.meta(p, "slice", 43))
            r = self.b.op("reshape", shape("bf16", (B, S, H, hd)), [s], "", self.meta(p, "reshape", 44))
            t = self.b.op("transpose", shape("bf16", (B, H, S, hd)), [r], ", dimensions={0,2,1,3}", self.meta(p, "transpose", 45))
            heads.append(t)
        v["q"], v["k"], v["v"] = q, k, vv = heads
        sc = self.dot(q, k, (B, H, S, S), "lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={3}", p, 47)
        scale = self.scalar("bf16", "0.125", (B, H, S, S), p, 48)
        sc = self.binary("multiply", sc, scale, p, 48, "mul")
        sf = self.convert(sc, "f32", (B, H, S, S), p, 49)
        ninf = self.const_value("f32", "-inf", p + "/softmax", 50)
        mx = self.reduce(sf, ninf, (B, H, S), "3", self.r_max, p + "/softmax", 50, "reduce_max")
        mxb = self.bcast(mx, (B, H, S, S), "0,1,2", "f32", p + "/softmax", 50)
        e = self.binary("subtract", sf, mxb, p + "/softmax", 51, "sub")
        e = self.unary("exponential", e, p + "/softmax", 51, "exp")
        zero = self.const_value("f32", "0", p + "/softmax", 52)
        sm = self.reduce(e, zero, (B, H, S), "3", self.r_add, p + "/softmax", 52, "reduce_sum")
        smb = self.bcast(sm, (B, H, S, S), "0,1,2", "f32", p + "/softmax", 52)
        v["pf"] = pr = self.binary("divide", e, smb, p + "/softmax", 53, "div")
        v["pb"] = pb = self.convert(pr, "bf16", (B, H, S, S), p, 54)
        o = self.dot(pb, vv, (B, H, S, hd), "lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}", p, 55)
        o = self.b.op("transpose", shape("bf16", (B, S, H, hd)), [o], ", dimensions={0,2,1,3}", self.meta(p, "transpose", 56))
        v["o"] = o = self.b.op("reshape", shape("bf16", act), [o], "", self.meta(p, "reshape", 56))
        go = self.gather(wo, (D, D), p, 57)
        v["wo"] = woc = self.convert(go, "bf16", (D, D), p, 57)
        ao = self.dot(o, woc, act, "lhs_contracting_dims={2}, rhs_contracting_dims={0}", p, 58)
        v["x1"] = x1 = self.binary("add", x, ao, path, 59, "add")
        # MLP
        p = path + "/mlp"
        h2, v["xn2"], v["rb2"], v["gb2"] = self.rmsnorm(x1, ln2, p)
        v["h2"] = h2
        gu = self.gather(wup, (D, F), p, 61)
        v["wup"] = wuc = self.convert(gu, "bf16", (D, F), p, 61)
        v["u"] = u = self.dot(h2, wuc, (B, S, F), "lhs_contracting_dims={2}, rhs_contracting_dims={0}", p, 62)
        mlp = (B, S, F)
        u3 = self.binary("multiply", u, u, p + "/gelu", 63, "integer_pow")
        u3 = self.binary("multiply", u3, u, p + "/gelu", 63, "integer_pow")
        c = self.scalar("bf16", "0.04468", mlp, p + "/gelu", 63)
        t = self.binary("multiply", u3, c, p + "/gelu", 63, "mul")
        t = self.binary("add", u, t, p + "/gelu", 63, "add")
        c = self.scalar("bf16", "0.7969", mlp, p + "/gelu", 64)
        t = self.binary("multiply", t, c, p + "/gelu", 64, "mul")
        v["tanh"] = t = self.unary("tanh", t, p + "/gelu", 64)
        one = self.scalar("bf16", "1", mlp, p + "/gelu", 65)
        t = self.binary("add", t, one, p + "/gelu", 65, "add")
        half = self.scalar("bf16", "0.5", mlp, p + "/gelu", 65)
        t = self.binary("multiply", t, half, p + "/gelu", 65, "mul")
        v["a"] = a = self.binary("multiply", u, t, p + "/gelu", 65, "mul")
        gd = self.gather(wdown, (F, D), p, 66)
        v["wdown"] = wdc = self.convert(gd, "bf16", (F, D), p, 66)
        dn = self.dot(a, wdc, act, "lhs_contracting_dims={2}, rhs_contracting_dims={0}", p, 67)
        v["out"] = self.binary("add", x1, dn, path, 68, "add")
        return v

    def weight_grad(self, x: int, dy: int, full: tuple[int, ...], path: str, line: int) -> int:
        """dot over batch and sequence, convert to f32, reduce-scatter back to the shard."""
        g = self.dot(x, dy, full, "lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}", path, line)
        g = self.convert(g, "f32", full, path, line)
        local = (full[0] // SHARDS,) + full[1:]
        return self.reduce_scatter(g, local, path, line + 1)

    def rmsnorm_backward(self, dy: int, xn: int, rb: int, gb: int, path: str) -> tuple[int, int]:
        B, S, D = self.B, self.S, self.D
        act = (B, S, D)
        p = path + "/rms_norm"
        df = self.convert(dy, "f32", act, p, 81)
        dg = self.binary("multiply", df, xn, p, 82, "mul")
        zero = self.const_value("f32", "0", p, 82)
        dg = self.b.op("reduce", shape("f32", (D,)), [dg, zero], f", dimensions={{0,1}}, to_apply=%{self.r_add}",
                       self.meta(p, "reduce_sum", 82))
        dg = self.reduce_scatter(dg, (D // SHARDS,), p, 83)
        dx = self.binary("multiply", df, gb, p, 84, "mul")
        dx = self.binary("multiply", dx, rb, p, 84, "mul")
        return self.convert(dx, "bf16", act, p, 85), dg

    def backward(self, v: dict[str, int], dy: int, path: str) -> tuple[int, list[int]]:
        B, S, D, H, F, hd = self.B, self.S, self.D, self.H, self.F, self.hd
        act = (B, S, D)
        # MLP
        p = path + "/mlp"
        da = self.dot(dy, v["wdown"], (B, S, F), "lhs_contracting_dims={2}, rhs_contracting_dims={1}", p, 90)
        g_down = self.weight_grad(v["a"], dy, (F, D), p, 91)
        half = self.scalar("bf16", "0.5", (B, S, F), p + "/gelu", 92)
        d = self.binary("multiply", v["tanh"], half, p + "/gelu", 92, "mul")
        d = self.binary("add", d, half, p + "/gelu", 92, "add")
        du = self.binary("multiply", da, d, p + "/gelu", 93, "mul")
        dh2 = self.dot(du, v["wup"], act, "lhs_contracting_dims={2}, rhs_contracting_dims={1}", p, 94)
        g_up = self.weight_grad(v["h2"], du, (D, F), p, 95)
        dx1n, g_ln2 = self.rmsnorm_backward(dh2, v["xn2"], v["rb2"], v["gb2"], p)
        dx1 = self.binary("add", dy, dx1n, path, 96, "add_any")
        # attention
        p = path + "/attn"
        do = self.dot(dx1, v["wo"], act, "lhs_contracting_dims={2}, rhs_contracting_dims={1}", p, 100)
        g_o = self.weight_grad(v["o"], dx1, (D, D), p, 101)
        do = self.b.op("reshape", shape("bf16", (B, S, H, hd)), [do], "", self.meta(p, "reshape", 102))
        do = self.b.op("transpose", shape("bf16", (B, H, S, hd)), [do], ", dimensions={0,2,1,3}", self.meta(p, "transpose", 102))
        bd = "lhs_batch_dims={0,1}, lhs_contracting_dims={%s}, rhs_batch_dims={0,1}, rhs_contracting_dims={%s}"
        dp = self.dot(do, v["v"], (B, H, S, S), bd % (3, 3), p, 103)
        dv = self.dot(v["pb"], do, (B, H, S, hd), bd % (2, 2), p, 104)
        ps = p + "/softmax"
        dpf = self.convert(dp, "f32", (B, H, S, S), ps, 105)
        t = self.binary("multiply", dpf, v["pf"], ps, 105, "mul")
        zero = self.const_value("f32", "0", ps, 106)
        s = self.reduce(t, zero, (B, H, S), "3", self.r_add, ps, 106, "reduce_sum")
        sb = self.bcast(s, (B, H, S, S), "0,1,2", "f32", ps, 106)
        t = self.binary("subtract", dpf, sb, ps, 107, "sub")
        t = self.binary("multiply", t, v["pf"], ps, 107, "mul")
        ds = self.convert(t, "bf16", (B, H, S, S), ps, 108)
        scale = self.scalar("bf16", "0.125", (B, H, S, S), p, 108)
        ds = self.binary("multiply", ds, scale, p, 108, "mul")
        dq = self.dot(ds, v["k"], (B, H, S, hd), bd % (3, 2), p, 109)
        dk = self.dot(ds, v["q"], (B, H, S, hd), bd % (2, 2), p, 110)
        parts = []
        for d in (dq, dk, dv):
            d = self.b.op("transpose", shape("bf16", (B, S, H, hd)), [d], ", dimensions={0,2,1,3}", self.meta(p, "transpose", 111))
            parts.append(self.b.op("reshape", shape("bf16", act), [d], "", self.meta(p, "reshape", 111)))
        dqkv = self.b.op("concatenate", shape("bf16", (B, S, 3 * D)), parts, ", dimensions={2}", self.meta(p, "concatenate", 112))
        dh = self.dot(dqkv, v["wqkv"], act, "lhs_contracting_dims={2}, rhs_contracting_dims={1}", p, 113)
        g_qkv = self.weight_grad(v["h1"], dqkv, (D, 3 * D), p, 114)
        dxn, g_ln1 = self.rmsnorm_backward(dh, v["xn1"], v["rb1"], v["gb1"], p)
        dx = self.binary("add", dx1, dxn, path, 115, "add_any")
        return dx, [g_ln1, g_qkv, g_o, g_ln2, g_up, g_down]

    def sgd(self, w: int, g: int, path: str) -> int:
        dims = _dims(self.b.shapes[w])
        lr = self.scalar("f32", "0.001", dims, path, 120)
        step = self.binary("multiply", g, lr, path, 120, "mul")
        return self.binary("subtract", w, step, path, 121, "sub")

    # --------------------------------------------------------------- build
    def build(self) -> int:
        B, S, D, F = self.B, self.S, self.D, self.F
        self._const_values: dict[int, str] = {}
        self.r_add = "region_0.1"
        self.r_max = "region_1.2"
        b = self.b
        x = b.param(shape("bf16", (B, S, D)), ', sharding={devices=[8,1,1]<=[8]}, metadata={op_name="batch[\\\'x\\\']"}')
        names = ("ln1", "wqkv", "wo", "ln2", "wup", "wdown")
        locs = ((D // SHARDS,), (D // SHARDS, 3 * D), (D // SHARDS, D), (D // SHARDS,), (D // SHARDS, F), (F // SHARDS, D))
        weights = []
        for layer in range(self.L):
            ws = []
            for n, loc in zip(names, locs):
                shard = "{devices=[8]<=[8]}" if len(loc) == 1 else "{devices=[8,1]<=[8]}"
                meta = f', metadata={{op_name="params[\\\'layers_{layer}\\\'][\\\'{n}\\\']"}}'
                ws.append(b.param(shape("f32", loc), f", sharding={shard}{meta}"))
            weights.append(ws)
        # forward
        h = x
        saved = []
        for layer in range(self.L):
            saved.append(h)
            h = self.forward(h, weights[layer], f"layers_{layer}")["out"]
        # loss = mean(h^2)
        act = (B, S, D)
        hf = self.convert(h, "f32", act, "loss", 130)
        sq = self.binary("multiply", hf, hf, "loss", 130, "square")
        zero = self.const_value("f32", "0", "loss", 130)
        loss = b.op("reduce", "f32[]", [sq, zero], f", dimensions={{0,1,2}}, to_apply=%{self.r_add}", self.meta("loss", "reduce_sum", 130))
        two = self.scalar("f32", "%.9g" % (2.0 / (B * S * D)), act, "transpose(jvp(loss))", 131)
        dy = self.binary("multiply", hf, two, "transpose(jvp(loss))", 131, "mul")
        dy = self.convert(dy, "bf16", act, "transpose(jvp(loss))", 131)
        # backward with remat
        new_params: list[int] = [0] * (6 * self.L)
        for layer in reversed(range(self.L)):
            path = f"transpose(jvp(layers_{layer}))"
            rp = f"checkpoint/rematted_computation/layers_{layer}"
            ws = weights[layer]
            items = ws + [saved[layer]]
            tshape = tuple_shape([b.shapes[i] for i in items])
            t = b.op("tuple", tshape, items, "", self.meta(rp, "optimization_barrier", 140))
            ob = b.op("opt-barrier", tshape, [t], "", self.meta(rp, "optimization_barrier", 140))
            gtes = [b.op("get-tuple-element", b.shapes[it], [ob], f", index={k}", self.meta(rp, "optimization_barrier", 140))
                    for k, it in enumerate(items)]
            v = self.forward(gtes[6], gtes[:6], rp)
            dy, grads = self.backward(v, dy, path)
            for k, (w, g) in enumerate(zip(ws, grads)):
                new_params[6 * layer + k] = self.sgd(w, g, f"optimizer/layers_{layer}")
        outs = [loss] + new_params
        root = b.op("tuple", tuple_shape([b.shapes[i] for i in outs]), outs, "", "")
        return root

    # ---------------------------------------------------------------- text
    def write(self, path: Path) -> int:
        root = self.build()
        b = self.b
        cv = self._const_values
        params_shapes = [b.shapes[i] for i in b.params]
        out_shapes = b.shapes[root]
        layout = tuple_shape(params_shapes) + "->" + out_shapes
        tmp = path.with_suffix(path.suffix + ".tmp")
        count = 0
        with open(tmp, "w", buffering=1 << 20) as f:
            w = f.write
            w(f"HloModule jit_train_step, entry_computation_layout={{{layout}}}, num_partitions=8\n\n")
            for name, op, ret in ((self.r_add, "add", "add"), (self.r_max, "maximum", "max")):
                n = name.split(".")[1]
                a0, a1, r = f"Arg_0.{int(n) * 10 + 1}", f"Arg_1.{int(n) * 10 + 2}", f"reduce_{ret}.{int(n) * 10 + 3}"
                w(f"%{name} ({a0}: f32[], {a1}: f32[]) -> f32[] {{\n")
                w(f"  %{a0} = f32[] parameter(0), metadata={{op_name=\"jit(train_step)/reduce_{ret}\"}}\n")
                w(f"  %{a1} = f32[] parameter(1), metadata={{op_name=\"jit(train_step)/reduce_{ret}\"}}\n")
                w(f"  ROOT %{r} = f32[] {op}(%{a0}, %{a1}), metadata={{op_name=\"jit(train_step)/reduce_{ret}\" source_file=\"{SRC}\" source_line=32}}\n")
                w("}\n\n")
                count += 3
            sig = ", ".join(f"{b.names[i]}: {_no_layout(b.shapes[i])}" for i in b.params)
            w(f"ENTRY %main.{len(b.names) + 7}_spmd ({sig}) -> {_no_layout(out_shapes)} {{\n")
            count += _emit(b, root, w, cv)
            w("}\n\n")
        tmp.replace(path)
        return count


def _dims(s: str) -> tuple[int, ...]:
    inner = s[s.index("[") + 1 : s.index("]")]
    return tuple(int(x) for x in inner.split(",")) if inner else ()


def _emit(b: Builder, root: int, write, consts: dict[int, str]) -> int:  # type: ignore[no-untyped-def]
    names, shapes, lines = b.names, b.shapes, b.lines
    count = 0
    buf: list[str] = []
    for i in b.post_order(root):
        opcode, operands, rest = lines[i]
        if opcode == "parameter":
            ops = str(operands[0])
        elif opcode == "constant":
            ops = consts[i]
        else:
            ops = ", ".join((f"/*index={k}*/%" if k and k % 5 == 0 else "%") + names[o] for k, o in enumerate(operands))
        lead = "  ROOT %" if i == root else "  %"
        buf.append(f"{lead}{names[i]} = {shapes[i]} {opcode}({ops}){rest}\n")
        count += 1
        if len(buf) >= 4096:
            write("".join(buf))
            buf.clear()
    write("".join(buf))
    return count


# Instructions per layer with the default structure (forward + remat + backward + SGD), and
# the fixed part (parameter x, loss, root tuple, two 3-instruction regions).
def count_for(layers: int, dims: dict[str, int]) -> int:
    m = Model(layers, **dims)
    m.build()
    return len(m.b.post_order(len(m.b.names) - 1)) + 6


def layers_for(instructions: int, dims: dict[str, int]) -> int:
    one, two = count_for(1, dims), count_for(2, dims)
    per_layer = two - one
    fixed = one - per_layer
    return max(1, round((instructions - fixed) / per_layer))


def generate(instructions: int, path: Path | None = None, **dims: int) -> tuple[Path, int]:
    d = {**DEFAULT_DIMS, **dims}
    path = path or default_path(instructions, **dims)
    path.parent.mkdir(parents=True, exist_ok=True)
    layers = layers_for(instructions, d)
    count = Model(layers, **d).write(path)
    return path, count


def check_xla(path: Path, compile_too: bool = False) -> None:
    """XLA's parser accepts the file, and its print reproduces it byte for byte."""
    from jax._src.lib import xla_client as xc

    text = path.read_text()
    t0 = time.perf_counter()
    module = xc.hlo.hlo_module_from_text(text)
    printed = module.to_string()
    print(f"XLA parsed and printed {path.name} in {time.perf_counter() - t0:.2f}s")
    if printed == text:
        print("XLA's print is byte-identical to the generated text")
    else:
        a, b = text.splitlines(), printed.splitlines()
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                print(f"first difference at line {i + 1}:\n  ours: {x[:300]}\n  xla:  {y[:300]}")
                break
        else:
            print(f"line counts differ: ours {len(a)}, XLA {len(b)}")
    if compile_too:
        _compile(module)


def _compile(module) -> None:  # type: ignore[no-untyped-def]
    import jax
    import jaxlib
    import numpy as np
    from jax._src.lib import xla_client as xc

    proto = module.as_serialized_hlo_module_proto()
    mlir = jaxlib._jax.mlir.hlo_to_stablehlo(proto)
    backend = jax._src.xla_bridge.get_backend("cpu")
    devices = backend.devices()[:SHARDS]
    opts = xc.CompileOptions()
    opts.num_partitions = SHARDS
    bo = opts.executable_build_options
    bo.num_partitions = SHARDS
    bo.num_replicas = 1
    bo.use_spmd_partitioning = True  # with the partitioner passes disabled below (text is already partitioned)
    bo.device_assignment = xc.DeviceAssignment.create(np.arange(SHARDS).reshape(1, SHARDS))
    bo.debug_options.xla_disable_hlo_passes = "spmd-partitioning,sharding-propagation,shardy-xla"
    t0 = time.perf_counter()
    backend.compile_and_load(mlir, xc.DeviceList(tuple(devices)), opts)
    print(f"XLA:CPU compiled it in {time.perf_counter() - t0:.1f}s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instructions", type=int, default=1_000_000, help="target instruction count (default 1,000,000)")
    ap.add_argument("-o", "--output", type=Path, help="output file (default benchmarks/out/fsdp_<N>.hlo)")
    for k, v in DEFAULT_DIMS.items():
        ap.add_argument(f"--{k}", type=int, default=v, help=f"(default {v})")
    ap.add_argument("--check-xla", action="store_true", help="parse with XLA (jaxlib) and compare its print")
    ap.add_argument("--compile", action="store_true", help="with --check-xla: also compile on XLA:CPU (8 devices)")
    args = ap.parse_args(argv)
    dims = {k: getattr(args, k) for k in DEFAULT_DIMS}
    changed = {k: v for k, v in dims.items() if v != DEFAULT_DIMS[k]}
    t0 = time.perf_counter()
    path, count = generate(args.instructions, args.output, **changed)
    size = path.stat().st_size
    print(f"wrote {path} ({count:,} instructions, {size / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f}s")
    if args.check_xla:
        if args.compile:
            import os

            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={SHARDS}").strip()
            os.environ.setdefault("JAX_PLATFORMS", "cpu")
        check_xla(path, args.compile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
