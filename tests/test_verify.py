"""verify_structure: each kind of broken IR is caught and named; real modules pass."""

from __future__ import annotations

import pytest
import support

import hlo_dedup
from hlo_dedup.ir.computation import HloComputation
from hlo_dedup.ir.instruction import HloInstruction
from hlo_dedup.ir.shape_reader import parse_shape
from hlo_dedup.ir.verifier import HloVerifyError, verify_structure
from hlo_dedup.syntax.lexer import ScanError, skip_trivia
from hlo_dedup.text import parse_module, split_module_texts

H = "HloModule m\n\n"
BASE = (
    H + "sum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
    "ENTRY e {\n  p = f32[4,6]{1,0} parameter(0)\n  q = f32[] parameter(1)\n"
    "  t = (f32[4,6]{1,0}, f32[]) tuple(p, q)\n  g = f32[] get-tuple-element(t), index=1\n"
    "  sl = f32[2,3]{1,0} slice(p), slice={[0:4:2], [1:6:2]}\n  rs = f32[6]{0} reshape(sl)\n"
    "  rd = f32[] reduce(rs, g), dimensions={0}, to_apply=sum\n"
    "  ROOT r = f32[] add(rd, q)\n}\n"
)


def base():  # type: ignore[no-untyped-def]
    module = parse_module(BASE)
    verify_structure(module)
    return module


def broken(module, instruction: str | None, *words: str) -> HloVerifyError:  # type: ignore[no-untyped-def]
    with pytest.raises(HloVerifyError) as info:
        verify_structure(module)
    err = info.value
    assert err.instruction == instruction, str(err)
    if instruction is not None:
        assert repr(instruction) in str(err)
    for word in words:
        assert word in str(err), str(err)
    return err


def test_the_public_entry_point_and_error_type() -> None:
    module = base()
    hlo_dedup.verify_structure(module)
    assert issubclass(HloVerifyError, ValueError)
    module.entry.get_instruction("g")._replace_operand_unchecked(0, module.entry.get_instruction("p"))
    with pytest.raises(HloVerifyError):
        hlo_dedup.verify_structure(module)


def test_operand_from_another_computation() -> None:
    module = base()
    x = module.get_computation("sum").get_instruction("x")
    r = module.entry.root
    r._replace_operand_unchecked(1, x)
    err = broken(module, "r", "operand 1 ('x')", "sum")
    assert err.computation == "e"


def test_operand_removed_from_the_computation() -> None:
    module = base()
    comp = module.entry
    q = comp.get_instruction("q")
    orphan = HloInstruction("orphan", "negate", q.shape, [q])
    comp.root._replace_operand_unchecked(1, orphan)  # never added to the computation
    broken(module, "r", "'orphan'", "not in this computation")


def test_users_and_operands_must_be_symmetric() -> None:
    module = base()
    comp = module.entry
    q, r = comp.get_instruction("q"), comp.root
    q._users.pop(r)
    broken(module, "r", "operand 1 ('q') does not list this instruction as a user")
    module = base()
    comp = module.entry
    comp.get_instruction("p")._users[comp.root] = None  # r does not use p
    broken(module, "p", "user 'r' does not have this instruction as an operand")


def test_control_edges_must_be_symmetric() -> None:
    module = base()
    comp = module.entry
    g, rd = comp.get_instruction("g"), comp.get_instruction("rd")
    rd.control_predecessors = [*rd.control_predecessors, g]
    broken(module, "rd", "control predecessor 'g'")


def test_cycle() -> None:
    module = base()
    comp = module.entry
    sl, rs = comp.get_instruction("sl"), comp.get_instruction("rs")
    sl._replace_operand_unchecked(0, rs)  # sl -> rs -> sl
    err = broken(module, "sl", "cycle")
    assert "rs" in str(err)


def test_control_cycle() -> None:
    module = base()
    comp = module.entry
    g, rd = comp.get_instruction("g"), comp.get_instruction("rd")
    rd.add_control_dependency_to(g)  # rd uses g, and g must now run after rd
    broken(module, "g", "cycle")


def test_root_must_belong_to_the_computation() -> None:
    module = base()
    module.entry.root = module.get_computation("sum").root
    err = broken(module, "s", "root")
    assert err.computation == "e"
    module = base()
    module.entry.root = None
    broken(module, None, "no root")


def test_called_computation_must_be_in_the_module() -> None:
    module = base()
    rd = module.entry.get_instruction("rd")
    ghost = HloComputation("ghost")
    rd.called_computations[0] = ghost
    broken(module, "rd", "'ghost'", "not in the module")


def test_parameter_numbers_must_be_dense() -> None:
    module = base()
    comp = module.entry
    q = comp.get_instruction("q")
    q._payload = "2"
    q._cache = None
    broken(module, "q", "parameter number 2 at position 1")
    module = base()
    comp = module.entry
    comp.parameters.reverse()
    broken(module, "q", "parameter number 1 at position 0")
    module = base()
    module.entry.parameters.pop()
    broken(module, "q", "2 parameter instructions but 1 listed")


def test_duplicate_instruction_names() -> None:
    module = base()
    comp = module.entry
    comp.get_instruction("g").name = "q"
    broken(module, "q", "duplicate instruction name")


def test_get_tuple_element_shape() -> None:
    module = base()
    g = module.entry.get_instruction("g")
    g.set_shape(parse_shape("f32[4,6]{1,0}"))  # element 1 is f32[]
    broken(module, "g", "is not element 1")
    module = base()
    module.entry.get_instruction("g").set_attr("index", "2")
    broken(module, "g", "index=2 out of range")
    module = base()
    g = module.entry.get_instruction("g")
    g._replace_operand_unchecked(0, module.entry.get_instruction("q"))
    broken(module, "g", "non-tuple operand")


def test_tuple_shape() -> None:
    module = base()
    t = module.entry.get_instruction("t")
    t.set_shape(parse_shape("(f32[4,6]{1,0}, s32[])"))
    broken(module, "t", "tuple element 1")
    module = base()
    t = module.entry.get_instruction("t")
    t.set_shape(parse_shape("(f32[4,6]{1,0})"))
    broken(module, "t", "1 elements but 2 operands")


def test_slice_shape() -> None:
    module = base()
    module.entry.get_instruction("sl").set_attr("slice", "{[0:4:1], [1:6:2]}")  # 4x3, not 2x3
    broken(module, "sl", "should have dimensions [4,3]")
    module = base()
    module.entry.get_instruction("sl").set_attr("slice", "{[0:9:2], [1:6:2]}")
    broken(module, "sl", "dimension 0 [0:9:2] is invalid")
    module = base()
    module.entry.get_instruction("sl").set_attr("slice", "{[0:4:2]}")
    broken(module, "sl", "1 dimensions, operand rank is 2")


def test_reshape_element_count() -> None:
    module = base()
    rs = module.entry.get_instruction("rs")
    rs.set_shape(parse_shape("f32[7]{0}"))
    broken(module, "rs", "element count", "(6)", "(7)")


def test_bad_attribute_text_becomes_a_verify_error() -> None:
    module = base()
    module.entry.get_instruction("sl").set_attr("slice", "{[0:x]}")
    broken(module, "sl", "slice")


# -------------------------------------------------------------------- all-gather
def all_gather_module(line: str, *, header: str = "") -> str:
    return (
        f"HloModule m{header}\n\nENTRY e {{\n  p = f32[2,3]{{1,0}} parameter(0)\n"
        f"  ROOT ag = {line}\n}}\n"
    )


@pytest.mark.parametrize(
    "line, header",
    [
        # explicit groups of 4: x4 along dimension 0
        ("f32[8,3]{1,0} all-gather(p), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0}, use_global_device_ids=true", ""),
        # iota groups of 2 along dimension 1
        ("f32[2,6]{1,0} all-gather(p), channel_id=1, replica_groups=[4,2]<=[8], dimensions={1}, use_global_device_ids=true", ""),
        # empty groups, no channel: all replicas
        ("f32[2,12]{1,0} all-gather(p), replica_groups={}, dimensions={1}", ", replica_count=4"),
        # groups of one: not checked (XLA skips a subgroup size of 1)
        ("f32[4,3]{1,0} all-gather(p), replica_groups={{0},{1}}, dimensions={0}", ""),
        # channel id without global ids: replica groups x partitions
        ("f32[8,3]{1,0} all-gather(p), channel_id=1, replica_groups={{0,1}}, dimensions={0}", ", num_partitions=2"),
        # several operands: a tuple, one shard count
        ("(f32[4,3]{1,0}, f32[4,3]{1,0}) all-gather(p, p), replica_groups={{0,1}}, dimensions={0}", ""),
    ],
)
def test_all_gather_shapes_that_are_consistent(line: str, header: str) -> None:
    verify_structure(parse_module(all_gather_module(line, header=header)))


@pytest.mark.parametrize(
    "line, header, words",
    [
        ("f32[6,3]{1,0} all-gather(p), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0}, use_global_device_ids=true",
         "", ("3x the operand's", "group size is 4")),
        ("f32[2,4]{1,0} all-gather(p), channel_id=1, replica_groups=[4,2]<=[8], dimensions={1}, use_global_device_ids=true",
         "", ("should be f32[2,6]",)),
        ("f32[2,6]{1,0} all-gather(p), replica_groups={}, dimensions={1}", ", replica_count=4", ("group size is 4",)),
        ("f32[4,3]{1,0} all-gather(p), channel_id=1, replica_groups={{0,1}}, dimensions={0}", ", num_partitions=2",
         ("group size is 4",)),
        ("f32[4,4]{1,0} all-gather(p), replica_groups={{0,1}}, dimensions={0}", "", ("should be f32[4,3]",)),
        ("s32[4,3]{1,0} all-gather(p), replica_groups={{0,1}}, dimensions={0}", "", ("should be f32[4,3]",)),
        ("f32[4,3]{1,0} all-gather(p), replica_groups={{0,1}}, dimensions={2}", "", ("out of range",)),
        ("(f32[4,3]{1,0}, f32[2,3]{1,0}) all-gather(p, p), replica_groups={{0,1}}, dimensions={0}", "",
         ("result 1", "should be f32[4,3]")),
        ("f32[4,3]{1,0} all-gather(p, p), replica_groups={{0,1}}, dimensions={0}", "", ("2-tuple shape",)),
        ("f32[4,3]{1,0} all-gather(p), replica_groups={{0,1}}, dimensions={0}, use_global_device_ids=true", "",
         ("needs a channel_id",)),
        # torch-xla's traced text: no device count in the header, yet 2 shards over all participants
        ("f32[4,3]{1,0} all-gather(p), replica_groups={}, dimensions={0}", "",
         ("has 1 participant", "shape f32[2,3]", "replica_count=2")),
    ],
)
def test_all_gather_shapes_that_are_inconsistent(line: str, header: str, words: tuple[str, ...]) -> None:
    broken(parse_module(all_gather_module(line, header=header)), "ag", *words)


def test_all_gather_start() -> None:
    ok = all_gather_module(
        "(f32[2,3]{1,0}, f32[4,3]{1,0}) all-gather-start(p), replica_groups={{0,1}}, dimensions={0}"
    ).replace("ROOT ag", "ag") .replace("\n}\n", "\n  ROOT d = f32[4,3]{1,0} all-gather-done(ag)\n}\n")
    verify_structure(parse_module(ok))
    bad = ok.replace("f32[4,3]{1,0}) all-gather-start", "f32[6,3]{1,0}) all-gather-start")
    broken(parse_module(bad), "ag", "group size is 2")


def test_edits_by_the_ir_api_keep_the_module_valid() -> None:
    module = base()
    comp = module.entry
    q = comp.get_instruction("q")
    n = comp.add_instruction(HloInstruction("n", "negate", q.shape, [q]))
    comp.get_instruction("g").replace_all_uses_with(n)
    verify_structure(module)
    comp.remove_instruction_and_unused_operands(comp.get_instruction("g"))
    verify_structure(module)
    assert comp.get_instruction("t") is None
    verify_structure(parse_module(module.to_text()))


# -------------------------------------------------------------------- real modules
@pytest.mark.corpus
def test_every_corpus_module_verifies() -> None:
    failures = []
    count = 0
    for path in support.corpus_files():
        for line, piece in split_module_texts(path.read_text()):
            try:
                if skip_trivia(piece, 0) >= len(piece):
                    continue
            except ScanError:
                pass
            count += 1
            try:
                verify_structure(parse_module(piece, path.name, first_line=line))
            except HloVerifyError as e:
                failures.append(f"{path.name}:{line}: {e}")
    assert not failures, "\n".join(failures[:20])
    assert count >= 788 or not support.FULL_CORPUS


def test_every_jax_module_verifies() -> None:
    files = support.jax_modules()
    assert files
    for path in files:
        verify_structure(parse_module(path.read_text(), str(path)))
