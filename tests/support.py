"""Helpers shared by the tests: where the corpus and the JAX data live, and XLA.

pytest puts `tests/` on `sys.path` (rootdir conftest, prepend import mode), so test
modules in any subfolder `import support`.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
import random
from typing import TYPE_CHECKING, Any, Iterator

import pytest

if TYPE_CHECKING:
    from hlo_dedup.ir.instruction import HloInstruction
    from hlo_dedup.ir.module import HloModule

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "xla-hlo"
JAX_DATA = REPO / "tests" / "data" / "jax"
IN_CI = os.environ.get("CI") == "true"
#: A scheduled computation where a fold keeps a gather live across the peak (remat undone):
#: g2 re-gathers w after the peak at s. Bytes: w 8 and x 512 are static (520 at every point);
#: every f32[16] is 64, big is 1024.
ACROSS_PEAK = """\
  w = f32[2]{0} parameter(0)
  x = f32[128]{0} parameter(1)
  g1 = f32[16]{0} all-gather(w), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}
  a = f32[16]{0} negate(g1)
  big = f32[256]{0} concatenate(x, x), dimensions={0}
  s = f32[16]{0} slice(big), slice={[0:16]}
  g2 = f32[16]{0} all-gather(w), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}
  b = f32[16]{0} multiply(g2, a)
  ROOT c = f32[16]{0} add(b, s)
"""


def scheduled_module(body: str) -> str:
    """The text of a scheduled module whose entry computation `main` is `body`."""
    return f"HloModule m, is_scheduled=true\n\nENTRY main {{\n{body}}}\n"
#: Every corpus file in CI (or with HLO_DEDUP_CORPUS=all); otherwise every fifth one, so the
#: fast subset stays fast, as hypothesis draws fewer examples outside CI.
FULL_CORPUS = IN_CI or os.environ.get("HLO_DEDUP_CORPUS") == "all"


def corpus_files(*, every: bool = False) -> list[Path]:
    """The corpus `.hlo` files (all with `every`, else see FULL_CORPUS); outside CI an absent
    corpus skips, in CI it fails."""
    files = sorted(CORPUS.glob("*.hlo")) if CORPUS.is_dir() else []
    if not files:
        if IN_CI:
            pytest.fail(f"corpus missing at {CORPUS} (CI must have ../shared/corpus)")
        pytest.skip("../shared/corpus/xla-hlo is absent (only CI and developer clones have it)")
    return files if FULL_CORPUS or every else files[::5]


def corpus_modules() -> Iterator[tuple[Path, HloModule]]:
    """Each corpus file our reader accepts (`corpus_files()`) and its module."""
    from hlo_dedup.text import parse_module

    for path in corpus_files():
        try:
            module = parse_module(path.read_text(), str(path))
        except ValueError:
            continue
        yield path, module


def corpus_instructions() -> Iterator[HloInstruction]:
    """Every instruction of the corpus modules our reader accepts (`corpus_modules()`)."""
    for _, module in corpus_modules():
        for comp in module.computations:
            yield from comp


def jax_modules() -> list[Path]:
    return sorted(JAX_DATA.glob("*.hlo"))


def while_module(condition: str) -> str:
    """A module whose `while` doubles f32[4] as long as `condition` (an HLO instruction on the
    counter `i`, s32[]) holds: `compare(i, three), direction=LT` ends after 3 trips, `constant(true)`
    never does (XLA:CPU runs it until it is stopped)."""
    return f"""HloModule loop

cond {{
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  three = s32[] constant(3)
  ROOT keep_going = pred[] {condition}
}}

body {{
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  twice = f32[4] add(x, x)
  ROOT state = (s32[], f32[4]) tuple(next, twice)
}}

ENTRY main {{
  a = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, a)
  loop = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT out = f32[4] get-tuple-element(loop), index=1
}}
"""


ENDLESS_WHILE = while_module("constant(true)")
ENDING_WHILE = while_module("compare(i, three), direction=LT")

#: An all-gather over a group of one whose output is 4x its operand: XLA:CPU writes a quarter of
#: it, and the rest holds whatever the memory held.
UNWRITTEN = """HloModule unwritten, replica_count=1

ENTRY main {
  w = f32[4,8]{1,0} parameter(0)
  g = f32[16,8]{1,0} all-gather(w), replica_groups={{0}}, dimensions={0}
  ROOT r = f32[16,8]{1,0} add(g, g)
}
"""


def xla_client() -> ModuleType:
    """jaxlib's xla_client (the oracle); skipped without jaxlib, but never in CI."""
    try:
        from jax._src.lib import xla_client as xc
    except ImportError:
        if IN_CI:
            pytest.fail("jax/jaxlib are required in CI (pip install -e '.[test]')")
        pytest.skip("jax/jaxlib not installed: pip install 'hlo-dedup[test]'")
    return xc


def ir_structure(module: HloModule) -> list[object]:
    """Everything a reader decides about `module`, in order: names, opcodes, shape and
    attribute texts, operands, callees, control edges, roots, parameters and the source
    text kept for printing. Two readers of one text must give equal lists."""
    out: list[object] = [module.name, list(module.header_attributes), module.entry.name if module.entry else None]
    for comp in module.computations:
        out.append(
            (comp.name, comp.is_entry, comp.root.name if comp.root else None,
             [p.name for p in comp.parameters], comp.execution_thread, comp.span.head, comp.span.tail)
        )  # fmt: skip
        for inst in comp.instructions:
            out.append(
                (inst.name, inst.opcode, inst.shape_text, inst.payload, [o.name for o in inst.operands],
                 inst._attr_text, [c.name for c in inst.called_computations],
                 [p.name for p in inst.control_predecessors], inst.is_root, inst.source_line, inst.span.lead,
                 inst.span.percent, inst.span.operand_shapes)
            )  # fmt: skip
    return out


def ir_layout(module: HloModule) -> list[object]:
    """`ir_structure` and everything else a reader leaves in the IR: the module's source
    fields, every span's fields, users and control successors in order, fusion callers.
    Two builders of one module from one text must give equal lists."""
    source = module.source
    out: list[object] = ir_structure(module)
    out.append((module.filename, module.use_spmd_partitioning, module.is_pristine(), module.entry.is_entry if module.entry else None))
    if source is not None:
        out.append((source.text, source.filename, source.first_line, source.head, source.tail, source.has_header))
    for comp in module.computations:
        span = comp.span
        out.append((comp.name, span.head, span.start, span.body_end, span.tail, span.percent, span.has_signature,
                    comp.fusion_instruction.name if comp.fusion_instruction else None, comp.parent is module))
        for inst in comp.instructions:
            s = inst.span
            out.append((inst.name, s.lead, s.start, s.tail_start, s.end, s.edited, s.compact_gte_base, s.host,
                        [u.name for u in inst.users], [c.name for c in inst.control_successors], inst.parent is comp))
    return out


def first_difference(a: list[object], b: list[object]) -> str:
    """The first entries where two `ir_structure` lists differ, for a failure message."""
    for x, y in zip(a, b):
        if x != y:
            return f"{x!r}\n    vs {y!r}"
    return f"lengths {len(a)} vs {len(b)}"


# ---------------------------------------------------------------------------------------------
# HloModuleProtos built field by field

F32 = 11  # PrimitiveType.F32


def _shape(dims: tuple[int, ...] = ()) -> Any:
    from hlo_dedup.io.proto_fields import message_classes

    shape = message_classes(False)["ShapeProto"](element_type=F32, dimensions=dims, is_dynamic_dimension=[False] * len(dims))
    shape.layout.minor_to_major.extend(reversed(range(len(dims))))
    return shape


def _instruction(comp: Any, id: int, name: str, opcode: str, dims: tuple[int, ...], operands: tuple[int, ...] = (),
                 **fields: Any) -> Any:
    ins = comp.instructions.add(id=id, name=name, opcode=opcode, operand_ids=operands, **fields)
    ins.shape.CopyFrom(_shape(dims))
    return ins


def proto_module() -> Any:
    """A small HloModuleProto built field by field (no XLA needed): a scalar `add`
    reducer and an entry that negates, reduces with it (under a control edge) and adds:
    parameters, a constant, a callee, control predecessors, a ROOT."""
    from hlo_dedup.io.proto_fields import message_classes

    module = message_classes(False)["HloModuleProto"](name="m", entry_computation_name="e", entry_computation_id=2, id=7)
    add = module.computations.add(id=1, name="add", root_id=12)
    _instruction(add, 10, "x", "parameter", (), parameter_number=0)
    _instruction(add, 11, "y", "parameter", (), parameter_number=1)
    _instruction(add, 12, "s", "add", (), (10, 11))
    entry = module.computations.add(id=2, name="e", root_id=24)
    _instruction(entry, 20, "p", "parameter", (4,), parameter_number=0)
    _instruction(entry, 21, "n", "negate", (4,), (20,))
    constant = _instruction(entry, 22, "c", "constant", ())
    constant.literal.shape.CopyFrom(_shape())
    constant.literal.f32s.append(0.0)
    _instruction(entry, 23, "r", "reduce", (), (21, 22), dimensions=[0], called_computation_ids=[1])
    _instruction(entry, 24, "a", "add", (4,), (21, 20), control_predecessor_ids=[23])
    module.host_program_shape.parameters.add().CopyFrom(_shape((4,)))
    module.host_program_shape.parameter_names.append("p")
    module.host_program_shape.result.CopyFrom(_shape((4,)))
    return module


_ALPHABET = 'aZ09_.-% ,={}()[]"\'\\/*:\n\t\u00e9'
_WORDS = ("ROOT", "ENTRY", "HloModule", "add", "parameter", "x", "s", "n", "f32", "calls", "{}", '{"a": 1}')


def _text(rng: random.Random) -> str:
    if rng.random() < 0.3:
        return rng.choice(_WORDS)
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 8)))


def _damage(module: Any, rng: random.Random) -> None:
    """One random edit of a string or a reference, where printed text may surprise a reader."""
    comp = rng.choice(module.computations)
    ins = rng.choice(comp.instructions)
    what = rng.randrange(9)
    if what == 0:
        ins.name = _text(rng)
    elif what == 1:
        comp.name = _text(rng)
    elif what == 2:
        comp.execution_thread = _text(rng)
    elif what == 3:
        ins.backend_config = _text(rng).encode("utf-8")
    elif what == 4:
        ins.metadata.op_name, ins.metadata.op_type = _text(rng), _text(rng)
    elif what == 5:
        ins.frontend_attributes.map.add(key=_text(rng), value=_text(rng))
    elif what == 6:
        module.frontend_attributes.map.add(key=_text(rng), value=_text(rng))
    elif what == 7:
        ins.opcode = rng.choice(["negate", "add", "tuple", "copy", "reduce", "call", "fusion", _text(rng)])
    else:  # -1 is also what separates the instructions' id lists when they are read together
        ins.operand_ids[:] = [rng.choice([*(i.id for i in comp.instructions), -1]) for _ in range(rng.randint(0, 3))]


def damaged_protos(count: int, seed: int) -> list[Any]:
    """`count` copies of `proto_module()`, each with one to three random edits (`_damage`)."""
    rng = random.Random(seed)
    modules = []
    for _ in range(count):
        module = proto_module()
        for _ in range(rng.randint(1, 3)):
            _damage(module, rng)
        modules.append(module)
    return modules
