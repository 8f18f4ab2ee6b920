"""`neuron-preprocess-kernel-duplicate-remover` (#76) against its contract.

The contract is shared/spec/dedup-passes.txt, second half:

* FindFirstPreprocessKernel: the first `AwsNeuronCustomNativeKernel` custom-call with
  exactly one operand, that operand rank 3 with dims[0] == 1, and result dims[2] equal to
  twice the operand's dims[2]. None -> return false (no DCE).
* Four RET_CHECKs: first has 2 users; both are slices; the smaller-start slice (q) and
  the other (kv) each have one user, a reshape.
* IsFlashAttentionKernel(inst, name): an `AwsNeuronCustomNativeKernel` whose own config
  is not `name`, with >= 8 operands, whose operand(n-1) -> op0 -> op0 (must have
  operands) -> op0 -> op0 -> op0 (must be a custom-call) -> op0 -> op0 -> op0 carries
  backend config `name`.
* For each match: operand n-2 identical (layout-sensitive, pointer-equal operands) to the
  q reshape becomes the q slice; operand n-1 identical to the kv reshape becomes the kv
  slice; a clone of first with those operands (and first's shape and config) is added
  and takes over the match's uses (RAUW, CompatibleIgnoringFpPrecision shape check).
* HloDCE always runs once a first kernel exists; `changed` reports only rewrites;
  VLOG(2) "NeuronPreprocessKernelDuplicateRemover pass complete".

Fixtures: tests/data/neuron/*.hlo (hand-written; each explains its wiring in a comment).
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pytest

import hlo_dedup
from hlo_dedup import logs
from hlo_dedup.ir import HloInstruction, HloModule
from hlo_dedup.passes import NeuronPreprocessKernelDuplicateRemover, PassError
from hlo_dedup.passes.preprocess_kernel_duplicate_remover import (
    KERNEL_TARGET,
    find_first_preprocess_kernel,
    is_flash_attention_kernel,
)
from hlo_dedup.passes.records import FoldRecord

DATA = Path(__file__).resolve().parents[1] / "data" / "neuron"
FIXTURES = sorted(p.name for p in DATA.glob("*.hlo"))
PASS_NAME = "neuron-preprocess-kernel-duplicate-remover"
COMPLETE = "NeuronPreprocessKernelDuplicateRemover pass complete"

#: base64 of {"kernel_name":"flash_attn_preprocess",...,"layer":0} -- the canonical config.
PRE = (
    "eyJrZXJuZWxfbmFtZSI6ImZsYXNoX2F0dG5fcHJlcHJvY2VzcyIsIm1vZHVsZSI6Im5ldXJvbnhjYy5ua2kua2VybmVscy5h"
    "dHRlbnRpb24iLCJncmlkIjpbMV0sImFyZ3MiOnsic2VxX2xlbiI6MTI4LCJoZWFkX2RpbSI6NjQsImR0eXBlIjoiYmZsb2F0"
    "MTYiLCJsYXllciI6MH19"
)
#: The same JSON with "layer":1 -- one byte different, and one base64 character different.
PRE_LAYER1 = (
    "eyJrZXJuZWxfbmFtZSI6ImZsYXNoX2F0dG5fcHJlcHJvY2VzcyIsIm1vZHVsZSI6Im5ldXJvbnhjYy5ua2kua2VybmVscy5h"
    "dHRlbnRpb24iLCJncmlkIjpbMV0sImFyZ3MiOnsic2VxX2xlbiI6MTI4LCJoZWFkX2RpbSI6NjQsImR0eXBlIjoiYmZsb2F0"
    "MTYiLCJsYXllciI6MX19"
)
#: base64 of the flash_fwd (outer kernel) config.
FA = (
    "eyJrZXJuZWxfbmFtZSI6ImZsYXNoX2Z3ZCIsIm1vZHVsZSI6Im5ldXJvbnhjYy5ua2kua2VybmVscy5hdHRlbnRpb24iLCJn"
    "cmlkIjpbMSwxXSwiYXJncyI6eyJjYXVzYWwiOnRydWUsInNvZnRtYXhfc2NhbGUiOjAuMTI1LCJzZXFfdGlsZV9zaXplIjox"
    "MjgsImR0eXBlIjoiYmZsb2F0MTYifX0="
)


# ------------------------------------------------------------------------ helpers
def fixture_text(name: str) -> str:
    return (DATA / name).read_text()


def load(name: str) -> tuple[str, HloModule]:
    text = fixture_text(name)
    return text, hlo_dedup.load(text)


def run(module: HloModule):
    return NeuronPreprocessKernelDuplicateRemover().run_with_result(module)


def inst(module: HloModule, name: str) -> HloInstruction:
    found = module.entry.get_instruction(name)
    assert found is not None, f"{name} not in {module.entry.name}"
    return found


def names(module: HloModule) -> set[str]:
    return {i.name for i in module.entry.instructions}


def operand_names(instruction: HloInstruction) -> list[str]:
    return [o.name for o in instruction.operands]


def verify(module: HloModule) -> None:
    hlo_dedup.verify_structure(module)


def assert_clone_of_first(clone: HloInstruction, first: HloInstruction, operands: list[str]) -> None:
    """CloneWithNewOperands(first->shape(), ops): first's opcode, target, config, shape."""
    assert clone.parent is first.parent
    assert clone.opcode == "custom-call"
    assert clone.custom_call_target == KERNEL_TARGET
    assert clone.raw_backend_config == first.raw_backend_config
    assert clone.shape == first.shape
    assert operand_names(clone) == operands
    for op in clone.operands:
        assert clone in op.users


def reparsed(module: HloModule) -> HloModule:
    """The printed module read back by our own parser (printing must be faithful)."""
    again = hlo_dedup.load(module.to_text())
    assert again.to_text() == module.to_text()
    return again


# ---------------------------------------------------------------- the fixtures
@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_backend_configs_are_base64_json(name: str) -> None:
    module = hlo_dedup.load(fixture_text(name))
    configs = [i.raw_backend_config for i in module.entry.instructions if i.attr("backend_config")]
    assert configs
    for config in configs:
        assert isinstance(json.loads(base64.b64decode(config, validate=True)), dict)


def test_config_constants_match_the_spec_story() -> None:
    assert json.loads(base64.b64decode(PRE))["kernel_name"] == "flash_attn_preprocess"
    a, b = base64.b64decode(PRE), base64.b64decode(PRE_LAYER1)
    assert len(a) == len(b) and sum(x != y for x, y in zip(a, b)) == 1
    assert len(PRE) == len(PRE_LAYER1) and sum(x != y for x, y in zip(PRE, PRE_LAYER1)) == 1


# ------------------------------------------------------------ both substitutions
def test_both_substitutions() -> None:
    text, module = load("both_substitutions.hlo")
    first = find_first_preprocess_kernel(module)
    # packed0 carries the same config but has two operands: not the first kernel.
    assert first is inst(module, "preprocess")
    attn = inst(module, "attn")
    assert is_flash_attention_kernel(attn, PRE)
    assert not is_flash_attention_kernel(inst(module, "packed0"), PRE)

    result = run(module)

    assert result.changed is True
    assert [(f.kept, f.removed) for f in result.folds] == [("preprocess", "attn")]
    root = module.entry.root
    assert root.name == "out" and root.opcode == "multiply"
    clone = root.operands[0]
    assert root.operands == [clone, clone]  # both uses of attn re-pointed
    # operand n-2 (q) -> q_slice, operand n-1 (kv) -> kv_slice; the rest unchanged.
    assert_clone_of_first(
        clone, first, ["k_cache", "v_cache", "mask", "cos", "sin", "pos", "q_slice", "kv_slice"]
    )
    assert clone.name == "preprocess.1"
    # DCE: the duplicate and both reshapes (now unused) are gone; the chain above stays.
    assert names(module) == names(hlo_dedup.load(text)) - {"attn", "q", "kv"} | {"preprocess.1"}
    assert first.users == [inst(module, "kv_slice"), inst(module, "q_slice")]
    assert [u.name for u in inst(module, "q_slice").users] == ["preprocess.1"]
    assert [u.name for u in inst(module, "kv_slice").users] == ["preprocess.1"]
    verify(module)
    again = reparsed(module)
    assert operand_names(again.entry.get_instruction("preprocess.1"))[-2:] == ["q_slice", "kv_slice"]


def test_lookalike_q_reshape_is_not_substituted() -> None:
    _, module = load("lookalike_q_reshape.hlo")
    q, q_alike = inst(module, "q"), inst(module, "q_alike")
    # Same opcode and shape, but a different operand: not Identical (pointer operands).
    assert (q_alike.opcode, q_alike.shape) == (q.opcode, q.shape)
    assert not q_alike.identical(q)
    result = run(module)
    assert [f.removed for f in result.folds] == ["attn"]
    clone = module.entry.root.operands[0]
    assert_clone_of_first(
        clone,
        inst(module, "preprocess"),
        ["k_cache", "v_cache", "mask", "cos", "sin", "pos", "q_alike", "kv_slice"],
    )
    assert [u.name for u in q.users] == ["out"]  # the canonical q reshape is untouched
    assert "kv" not in names(module)
    verify(module)


def test_q_only_substitution_through_other_ops() -> None:
    text, module = load("q_only_substitution.hlo")
    first = inst(module, "preprocess")
    assert find_first_preprocess_kernel(module) is first
    # operand n-1 is k_in, which is not identical to the kv reshape (different opcode,
    # different operand); its descent reaches the canonical kernel through k_rope.
    assert not inst(module, "k_in").identical(inst(module, "kv"))

    result = run(module)

    assert result.changed is True
    out = module.entry.root
    clone0, clone1 = out.operands
    assert_clone_of_first(
        clone0, first, ["k_cache", "v_cache", "mask", "cos", "sin", "pos", "q_slice", "k_in"]
    )
    # Nine operands: n-2 and n-1 are counted from the end.
    assert_clone_of_first(
        clone1, first, ["k_cache", "v_cache", "mask", "cos", "sin", "pos", "seg", "q_slice", "k_in"]
    )
    assert (clone0.name, clone1.name) == ("preprocess.1", "preprocess.2")
    # q lost its only users; kv still feeds the rotary embedding.
    assert names(module) == names(hlo_dedup.load(text)) - {"attn0", "attn1", "q"} | {
        "preprocess.1",
        "preprocess.2",
    }
    assert [u.name for u in inst(module, "kv").users] == ["k_rope"]
    verify(module)
    reparsed(module)


def test_rewrites_happen_inside_the_loop() -> None:
    """Run rewrites each match before visiting the next instruction, so a kernel whose
    inner kernel is an earlier duplicate sees that duplicate's clone (canonical config)."""
    _, module = load("chained_duplicates.hlo")
    attn0, attn1 = inst(module, "attn0"), inst(module, "attn1")
    hop = attn1.operands[-1]
    for _ in range(8):
        hop = hop.operands[0]
    assert hop is attn0 and attn0.raw_backend_config == FA
    assert is_flash_attention_kernel(attn0, PRE)
    assert not is_flash_attention_kernel(attn1, PRE)  # on the input graph

    result = run(module)

    assert [(f.removed, f.replacement) for f in result.folds] == [
        ("attn0", "preprocess.1"),
        ("attn1", "preprocess.2"),
    ]
    first = inst(module, "preprocess")
    clone0, clone1 = inst(module, "preprocess.1"), inst(module, "preprocess.2")
    assert_clone_of_first(
        clone0, first, ["k_cache", "v_cache", "mask", "cos", "sin", "pos", "q_slice", "k_in"]
    )
    assert_clone_of_first(
        clone1, first, ["k_cache", "v_cache", "mask", "cos", "sin", "pos", "q_slice", "h1"]
    )
    assert inst(module, "h8").operands == [clone0]
    assert module.entry.root is clone1
    assert not {"attn0", "attn1", "q"} & names(module)
    verify(module)
    reparsed(module)


def test_fold_records() -> None:
    _, module = load("q_only_substitution.hlo")
    result = run(module)
    assert result.pass_name == PASS_NAME
    assert [(f.computation, f.kept, f.removed, f.replacement) for f in result.folds] == [
        ("main", "preprocess", "attn0", "preprocess.1"),
        ("main", "preprocess", "attn1", "preprocess.2"),
    ]
    for fold in result.folds:
        assert isinstance(fold, FoldRecord)
        assert fold.pass_name == PASS_NAME
        assert fold.key == {"backend_config": PRE}
        assert fold.bytes_output == 1 * 128 * 128 * 2  # the removed bf16[1,128,128]
        assert module.entry.get_instruction(fold.replacement) is not None
        assert module.entry.get_instruction(fold.removed) is None


def test_clones_are_not_rematched() -> None:
    _, module = load("q_only_substitution.hlo")
    result = run(module)
    assert len(result.folds) == 2
    clones = [inst(module, f.replacement) for f in result.folds]
    for clone in clones:
        # A clone is an AwsNeuronCustomNativeKernel with >= 8 operands whose operand n-1
        # (k_in) still descends to the canonical kernel; only its own config, which is
        # the canonical one, keeps IsFlashAttentionKernel from matching it.
        assert clone.operand_count >= 8 and clone.operands[-1].name == "k_in"
        assert clone.raw_backend_config == PRE
        assert not is_flash_attention_kernel(clone, PRE)
    assert not [i for i in module.entry.instructions if is_flash_attention_kernel(i, PRE)]


def test_second_run_fails_q_ret_check() -> None:
    """After a rewrite the q slice feeds the clones, not one reshape: a re-run RET_CHECKs."""
    _, module = load("q_only_substitution.hlo")
    run(module)
    text = module.to_text()
    with pytest.raises(PassError, match=r"q_slice->user_count\(\) == 1"):
        run(module)
    assert module.to_text() == text


# ------------------------------------------------------------------- RET_CHECKs
#: The four RET_CHECK conditions as the pass spells them (spec: Run, "FOUR RET_CHECKs").
CONDITIONS = {
    "first": "first->user_count() == 2",
    "slices": "->opcode() == HloOpcode::kSlice",
    "q": "q_slice->user_count() == 1 && q_slice->users()[0]->opcode() == HloOpcode::kReshape",
    "kv": "kv_slice->user_count() == 1 && kv_slice->users()[0]->opcode() == HloOpcode::kReshape",
}
RET_CHECK_CASES = [
    ("retcheck_first_users.hlo", "first", "(preprocess has 3 users)"),
    ("retcheck_slice_opcodes.hlo", "slices", "dynamic-slice kv_slice"),
    ("retcheck_q_reshape.hlo", "q", "(q_slice)"),  # one user, a copy
    ("retcheck_q_users.hlo", "q", "(q_slice)"),  # two users, both reshapes
    ("retcheck_kv_reshape.hlo", "kv", "(kv_slice)"),  # two users, both reshapes
    ("retcheck_kv_opcode.hlo", "kv", "(kv_slice)"),  # one user, a bitcast
]


@pytest.mark.parametrize("name,which,detail", RET_CHECK_CASES, ids=[c[0][:-4] for c in RET_CHECK_CASES])
def test_ret_check_failures_leave_module_unchanged(name: str, which: str, detail: str) -> None:
    text, module = load(name)
    assert find_first_preprocess_kernel(module) is inst(module, "preprocess")
    # Without the RET_CHECK the kernel below would be a duplicate and `dead` would go.
    assert is_flash_attention_kernel(inst(module, "attn"), PRE)
    assert inst(module, "dead").is_dead()

    with pytest.raises(PassError) as info:
        run(module)

    message = str(info.value)
    assert message.startswith("RET_CHECK failure (")
    assert re.match(
        r"RET_CHECK failure \(hilo/hlo_passes/neuron_preprocess_kernel_duplicate_remover\.cc:\d+\) ",
        message,
    )
    for key, condition in CONDITIONS.items():
        assert (condition in message) == (key == which), key
    assert detail in message
    assert module.to_text() == text
    assert "dead" in names(module)


def test_q_is_the_slice_with_the_smaller_start() -> None:
    """retcheck_q_reshape lists kv_slice first (users()[0]); q is still the [0:64] slice."""
    _, module = load("retcheck_q_reshape.hlo")
    users = inst(module, "preprocess").users
    assert [u.name for u in users] == ["kv_slice", "q_slice"]
    with pytest.raises(PassError, match=r"q_slice->user_count\(\) == 1") as info:
        run(module)
    assert "(q_slice)" in str(info.value)


# ----------------------------------------------------------- no first / no dups
def test_no_first_kernel_returns_before_dce() -> None:
    text, module = load("no_first_kernel.hlo")
    assert find_first_preprocess_kernel(module) is None
    # Were there a first kernel configured like k_two_operands, attn would match.
    assert is_flash_attention_kernel(inst(module, "attn"), PRE)
    result = run(module)
    assert result.changed is False and result.folds == []
    assert module.to_text() == text
    assert inst(module, "dead").is_dead()
    verify(module)


def test_first_kernel_without_duplicates_runs_dce_but_reports_no_change() -> None:
    text, module = load("no_duplicates.hlo")
    assert find_first_preprocess_kernel(module) is inst(module, "preprocess")
    result = run(module)
    assert result.changed is False and result.folds == []
    dead = {"dead_scale", "dead_sum"}
    assert names(module) == names(hlo_dedup.load(text)) - dead
    # Nothing else was touched: the output is the input without the two dead lines.
    expected = "".join(
        line for line in text.splitlines(keepends=True) if line.split("=")[0].strip() not in dead
    )
    assert module.to_text() == expected
    verify(module)


# --------------------------------------------------------------- near misses
def test_duplicate_with_the_canonical_config_is_excluded() -> None:
    _, module = load("own_config_excluded.hlo")
    attn_ok, attn_self = inst(module, "attn_ok"), inst(module, "attn_self")
    assert attn_self.operands == attn_ok.operands  # same descent, same operand count
    assert attn_self.raw_backend_config == PRE
    assert not is_flash_attention_kernel(attn_self, PRE)
    assert is_flash_attention_kernel(attn_ok, PRE)
    result = run(module)
    assert [f.removed for f in result.folds] == ["attn_ok"]
    assert inst(module, "attn_self") is attn_self
    assert operand_names(attn_self) == ["k_cache", "v_cache", "mask", "cos", "sin", "pos", "q", "k_in"]
    assert module.entry.root.operands[1] is attn_self
    verify(module)


def test_fewer_than_eight_operands() -> None:
    _, module = load("seven_operands.hlo")
    attn7, attn8 = inst(module, "attn7"), inst(module, "attn8")
    assert attn7.operand_count == 7 and attn8.operand_count == 8
    assert attn7.operands[-2:] == attn8.operands[-2:]
    assert not is_flash_attention_kernel(attn7, PRE)
    assert is_flash_attention_kernel(attn8, PRE)
    result = run(module)
    assert [f.removed for f in result.folds] == ["attn8"]
    assert module.entry.root.operands[0] is attn7
    assert operand_names(attn7)[-2:] == ["q", "k_in"]  # no substitution on a non-match
    verify(module)


EARLY = [
    "attn_end1",
    "attn_end2",
    "attn_end3",
    "attn_end4",
    "attn_end5",
    "attn_end6",
    "attn_hop6_not_cc",
    "attn_end7",
    "attn_end8",
    "attn_hop9_param",
]


def test_chains_ending_early_do_not_match() -> None:
    text, module = load("chain_ends_early.hlo")
    assert is_flash_attention_kernel(inst(module, "attn_full"), PRE)
    for name in EARLY:
        assert is_flash_attention_kernel(inst(module, name), PRE) is False, name
    lines = {n: inst(module, n).to_text() for n in EARLY}

    result = run(module)

    assert [f.removed for f in result.folds] == ["attn_full"]
    for name in EARLY:
        assert inst(module, name).to_text() == lines[name]
    assert [o.name for o in module.entry.root.operands] == ["preprocess.1", *EARLY]
    verify(module)


@pytest.mark.parametrize("hop", range(1, 9))
def test_chain_ending_at_each_hop(hop: int) -> None:
    """attn_endK: the instruction K hops down has no operands, so hop K+1 is missing."""
    _, module = load("chain_ends_early.hlo")
    node = inst(module, f"attn_end{hop}")
    node = node.operands[-1]
    for _ in range(hop - 1):
        node = node.operands[0]
    assert node.operand_count == 0
    assert node.name == ("cc0" if hop == 6 else "stop")
    assert not is_flash_attention_kernel(inst(module, f"attn_end{hop}"), PRE)


def test_config_differing_in_one_byte_does_not_match() -> None:
    _, module = load("config_one_byte.hlo")
    assert find_first_preprocess_kernel(module) is inst(module, "preprocess")
    assert inst(module, "preprocess_l1").raw_backend_config == PRE_LAYER1
    attn_l1 = inst(module, "attn_l1")
    assert not is_flash_attention_kernel(attn_l1, PRE)
    assert is_flash_attention_kernel(attn_l1, PRE_LAYER1)  # the one byte is the only reason
    result = run(module)
    assert [f.removed for f in result.folds] == ["attn_l0"]
    assert module.entry.root.operands[1] is attn_l1
    assert operand_names(attn_l1)[-2:] == ["q_l1", "k_in_l1"]
    verify(module)


# ---------------------------------------------------------------------- RAUW
def test_rauw_shape_mismatch_fails_and_leaves_module_unchanged() -> None:
    text, module = load("rauw_shape_mismatch.hlo")
    assert is_flash_attention_kernel(inst(module, "attn_ok"), PRE)
    assert is_flash_attention_kernel(inst(module, "attn_bad"), PRE)
    with pytest.raises(PassError) as info:
        run(module)
    message = str(info.value)
    assert "RET_CHECK failure" in message and "shape doesn't match" in message
    assert "attn_bad" in message and "bf16[1,128,64]" in message
    assert module.to_text() == text
    assert {"attn_ok", "attn_bad", "dead", "q"} <= names(module)
    assert not [i for i in module.entry.instructions if i.name.startswith("preprocess.")]


def test_rauw_ignores_floating_point_precision() -> None:
    _, module = load("rauw_fp_precision.hlo")
    result = run(module)
    assert [f.removed for f in result.folds] == ["attn_f32"]
    clone = module.entry.root.operands[0]
    assert clone.name == "preprocess.1"
    assert clone.shape.to_text().startswith("bf16[1,128,128]")
    verify(module)


# ------------------------------------------------------------------- logging
@pytest.fixture
def vlog():
    stream = io.StringIO()

    def configure(v: int) -> io.StringIO:
        logs.configure(v=v, stream=stream)
        return stream

    yield configure
    logs.configure(v=0)


@pytest.mark.parametrize(
    "name,logged",
    [
        ("q_only_substitution.hlo", True),
        ("no_duplicates.hlo", True),  # first exists: reaches the end of Run
        ("no_first_kernel.hlo", False),  # returns before the log line
        ("retcheck_first_users.hlo", False),  # RET_CHECK returns early
    ],
)
def test_v2_log_line(vlog, name: str, logged: bool) -> None:
    stream = vlog(2)
    _, module = load(name)
    try:
        run(module)
    except PassError:
        pass
    lines = [line for line in stream.getvalue().splitlines() if COMPLETE in line]
    if logged:
        assert len(lines) == 1
        assert re.match(
            r"I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ neuron_preprocess_kernel_duplicate_remover\.cc:\d+\] "
            + re.escape(COMPLETE) + "$",
            lines[0],
        )
    else:
        assert lines == []


def test_v0_is_silent(vlog) -> None:
    stream = vlog(0)
    _, module = load("q_only_substitution.hlo")
    assert run(module).changed
    assert stream.getvalue() == ""


def test_v1_is_silent(vlog) -> None:
    stream = vlog(1)
    _, module = load("q_only_substitution.hlo")
    run(module)
    assert COMPLETE not in stream.getvalue()


# --------------------------------------------------------------------- XLA
@pytest.mark.parametrize("name", FIXTURES)
def test_output_reparses_in_xla(xla_client, name: str) -> None:
    text, module = load(name)
    xla_client.hlo.hlo_module_from_text(text)
    try:
        run(module)
    except PassError:
        assert module.to_text() == text
    out = module.to_text()
    parsed = xla_client.hlo.hlo_module_from_text(out)
    printed = parsed.to_string()
    for instruction in module.entry.instructions:
        assert re.search(rf"%{re.escape(instruction.name)} = ", printed), instruction.name
    verify(module)
