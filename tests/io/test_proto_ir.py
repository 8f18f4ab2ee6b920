"""The IR of a `.pb` is built from the printer's pieces (`hlo_dedup.io.proto_ir`), and is
exactly the IR the text reader builds from the printed text; where the text reader would
read the text otherwise, or refuse it, the module is read from its text, so the outcome
(the IR, or the one located error) is the reader's.

The protos are built here field by field (no XLA needed); tests/io/test_proto_reader.py
compares the two IRs on every corpus and JAX module XLA turns into a proto.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import pytest
import support

from hlo_dedup.io import proto, proto_ir
from hlo_dedup.io.formats import modules_from_text
from hlo_dedup.io.proto_fields import message_classes
from hlo_dedup.text import parse_module

F32 = 11  # PrimitiveType.F32


def _shape(dims: tuple[int, ...] = ()) -> Any:
    shape = message_classes(False)["ShapeProto"](element_type=F32, dimensions=dims, is_dynamic_dimension=[False] * len(dims))
    shape.layout.minor_to_major.extend(reversed(range(len(dims))))
    return shape


def _instruction(comp: Any, id: int, name: str, opcode: str, dims: tuple[int, ...], operands: tuple[int, ...] = (),
                 **fields: Any) -> Any:
    ins = comp.instructions.add(id=id, name=name, opcode=opcode, operand_ids=operands, **fields)
    ins.shape.CopyFrom(_shape(dims))
    return ins


def base_module() -> Any:
    """A scalar `add` reducer and an entry that negates, reduces with it (under a control
    edge) and adds: parameters, a constant, a callee, control predecessors, a ROOT."""
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


def _instr(module: Any, name: str) -> Any:
    return next(i for c in module.computations for i in c.instructions if i.name == name)


def read_both(module: Any) -> tuple[Any, Any]:
    """(what `.pb` input builds, what the text reader makes of the printed text): a module,
    or the error raised."""
    printed = proto.print_module_bytes(module.SerializeToString())
    outcomes = []
    for read in (lambda: modules_from_text(printed, "m.pb", container="HloModuleProto")[0],
                 lambda: parse_module(printed.text, "m.pb (HloModuleProto as XLA text)")):
        try:
            outcomes.append(read())
        except ValueError as exc:  # HloParseError, or TextSyntaxError from a value read late
            outcomes.append(exc)
    return outcomes[0], outcomes[1]


def assert_same_outcome(module: Any) -> None:
    built, read = read_both(module)
    if isinstance(read, ValueError):
        assert isinstance(built, ValueError), "the reader refuses what the direct build accepted"
        assert (type(built), str(built)) == (type(read), str(read))
        return
    assert not isinstance(built, ValueError), str(built)
    read.filename = "m.pb"
    a, b = support.ir_layout(built), support.ir_layout(read)
    assert a == b, support.first_difference(a, b)


def test_a_plain_module_is_built_without_reading_its_text(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    module = base_module()
    built, read = read_both(module)
    monkeypatch.setattr(proto_ir, "parse_module", None)
    direct = modules_from_text(proto.print_module_bytes(module.SerializeToString()), "m.pb", container="HloProto")[0]
    read.filename = "m.pb"
    assert support.ir_layout(direct) == support.ir_layout(read) == support.ir_layout(built)
    entry = direct.get_computation("e")
    assert [c.name for c in entry.get_instruction("r").called_computations] == ["add"]
    assert [p.name for p in entry.get_instruction("a").control_predecessors] == ["r"]
    assert direct.to_text() == direct.source.text


def _named(name: str) -> Callable[[Any], None]:
    return lambda m: setattr(_instr(m, "n"), "name", name)


def _entry_named_entry(m: Any) -> None:
    m.computations[0].name = "ENTRY"
    _instr(m, "r").ClearField("called_computation_ids")
    _instr(m, "r").opcode = "negate"


def _thread(thread: str) -> Callable[[Any], None]:
    return lambda m: setattr(m.computations[0], "execution_thread", thread)


def _backend_config(config: str) -> Callable[[Any], None]:
    return lambda m: setattr(_instr(m, "n"), "backend_config", config.encode())


def _module_attribute(value: str) -> Callable[[Any], None]:
    return lambda m: m.frontend_attributes.map.add(key="k", value=value)


def _scheduled(order: list[str]) -> Callable[[Any], None]:
    def edit(m: Any) -> None:
        ids = {i.name: i.id for c in m.computations for i in c.instructions}
        for comp in m.computations:
            names = order if comp.name == "e" else [i.name for i in comp.instructions]
            m.schedule.sequences.add(key=comp.id).value.instruction_ids.extend(ids[n] for n in names)

    return edit


@pytest.mark.parametrize(
    "edit",
    [
        _named("ROOT"), _named("ENTRY"), _named("HloModule"), _named("parameter"), _named("add"),
        lambda m: setattr(m, "name", ""), lambda m: setattr(m, "name", "ROOT"),
        _entry_named_entry,
        _thread("host"), _thread('a"b'), _thread("a\\nb"), _thread("caf\u00e9"), _thread(""),
        _backend_config('{"a": 1}'), _backend_config('{"a": "}"}'), _backend_config("{ /* c */ }"),
        _backend_config('{"a": 1} // c'), _backend_config("raw text, with=commas"), _backend_config("{{}"),
        _module_attribute("v"), _module_attribute('{"a": "b"}'), _module_attribute("{a'b}"),
        _module_attribute("{ /* c */ }"),
        _scheduled(["p", "n", "c", "r", "a"]), _scheduled(["p", "c", "n", "r", "a"]),
        _scheduled(["n", "p", "c", "r", "a"]), _scheduled(["p", "n", "c", "a", "r"]),
    ],
    ids=[
        "instruction ROOT", "instruction ENTRY", "instruction HloModule", "instruction parameter",
        "instruction add", "module without name", "module ROOT", "computation ENTRY",
        "thread", "thread with quote", "thread with backslash", "thread not ascii", "thread empty",
        "json config", "json config with brace in string", "json config with comment", "json config then comment",
        "config text", "config unbalanced",
        "module attribute", "module attribute json", "module attribute quote", "module attribute comment",
        "schedule", "schedule reordered", "schedule use before definition", "schedule control edge reversed",
    ],
)  # fmt: skip
def test_what_the_direct_build_is_not_sure_of_is_read_as_text(edit: Callable[[Any], None]) -> None:
    module = base_module()
    edit(module)
    assert_same_outcome(module)


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
    else:
        ins.operand_ids[:] = [rng.choice(comp.instructions).id for _ in range(rng.randint(0, 3))]


def damaged_modules(count: int, seed: int) -> list[Any]:
    rng = random.Random(seed)
    modules = []
    for _ in range(count):
        module = base_module()
        for _ in range(rng.randint(1, 3)):
            _damage(module, rng)
        modules.append(module)
    return modules


def test_damaged_protos_build_what_the_reader_reads() -> None:
    """Names, strings, opcodes and operands changed at random: every proto the printer
    prints gives the `.pb` input and the text reader the same outcome."""
    compared = 0
    for module in damaged_modules(300, 15):
        try:
            proto.print_module_bytes(module.SerializeToString())
        except proto.ProtoError:
            continue  # XLA would not load it, or the printer cannot print it exactly
        assert_same_outcome(module)
        compared += 1
    assert compared > 100


def test_damaged_protos_print_as_jaxlib_prints_them(xla_client) -> None:  # type: ignore[no-untyped-def]
    """The same edits against XLA: where both print the module, the texts are equal (names
    with a line break are sanitized as XLA does: the direct build relies on it)."""
    from hlo_dedup.xla import XlaError, oracle

    compared = 0
    for module in damaged_modules(300, 16):
        data = module.SerializeToString()
        try:
            ours = proto.module_bytes_to_hlo_text(data)
            theirs = oracle.module_proto_to_text(data)
        except (proto.ProtoError, XlaError):
            continue
        assert ours == theirs
        compared += 1
    assert compared > 100
