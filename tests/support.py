"""Helpers shared by the tests: where the corpus and the JAX data live, and XLA.

pytest puts `tests/` on `sys.path` (rootdir conftest, prepend import mode), so test
modules in any subfolder `import support`.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Iterator

import pytest

if TYPE_CHECKING:
    from hlo_dedup.ir.instruction import HloInstruction
    from hlo_dedup.ir.module import HloModule

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "xla-hlo"
JAX_DATA = REPO / "tests" / "data" / "jax"
IN_CI = os.environ.get("CI") == "true"
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
