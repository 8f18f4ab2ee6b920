"""The IR of a `.pb` is built from the printer's pieces (`hlo_dedup.io.proto_ir`), and is
exactly the IR the text reader builds from the printed text; where the text reader would
read the text otherwise, or refuse it, the module is read from its text, so the outcome
(the IR, or the one located error) is the reader's.

The protos are built field by field (`support.proto_module`, no XLA needed);
tests/io/test_proto_reader.py compares the two IRs on every corpus and JAX module XLA
turns into a proto.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import support

from hlo_dedup.io import proto, proto_ir
from hlo_dedup.io.formats import modules_from_text
from hlo_dedup.text import parse_module

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
    module = support.proto_module()
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
    module = support.proto_module()
    edit(module)
    assert_same_outcome(module)


def test_damaged_protos_build_what_the_reader_reads() -> None:
    """Names, strings, opcodes and operands changed at random: every proto the printer
    prints gives the `.pb` input and the text reader the same outcome."""
    compared = 0
    for module in support.damaged_protos(300, 15):
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
    for module in support.damaged_protos(300, 16):
        data = module.SerializeToString()
        try:
            ours = proto.module_bytes_to_hlo_text(data)
            theirs = oracle.module_proto_to_text(data)
        except (proto.ProtoError, XlaError):
            continue
        assert ours == theirs
        compared += 1
    assert compared > 100
