"""A backend computing bf16 in f32 (XLA:CPU), on hand-counted bf16 modules: the f32 copies
of a dot's operands, its result held in f32, the transposed copy the converts cause, and
nothing changed with the option off or for f32 programs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import hlo_dedup
from hlo_dedup.analysis import PRICE_BACKENDS, FoldPricer, analyze
from hlo_dedup.passes import NeuronAllGatherDuplicateRemover

KIB = 1024
GATHER = "channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true"

# Two 8 KiB bf16 parameters, their 8 KiB product and its tanh.
DOT_TANH = """\
HloModule m

ENTRY main {
  a = bf16[64,64]{1,0} parameter(0)
  b = bf16[64,64]{1,0} parameter(1)
  d = bf16[64,64]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT e = bf16[64,64]{1,0} tanh(d)
}
"""


def test_a_dot_reads_f32_copies_and_keeps_its_result_in_f32_for_its_elementwise_reader() -> None:
    module = hlo_dedup.load(DOT_TANH)
    native = analyze(module).computation("main")
    # As written: parameters 16 KiB; d 8 KiB; tanh writes its result into d's buffer.
    assert native.live_bytes[-2:] == [16 * KIB + 8 * KIB, 16 * KIB + 8 * KIB]  # after the parameters
    cpu = analyze(module, f32_arithmetic=True).computation("main")
    # At the dot: parameters 16, their f32 copies 2 x 16, its f32 result 16 (tanh converts
    # it back, so no bf16 copy exists); at tanh: parameters 16, d in f32 16, e 8 (a bf16
    # result is not written into an f32 buffer).
    assert cpu.live_bytes[-2:] == [16 * KIB + 32 * KIB + 16 * KIB, 16 * KIB + 16 * KIB + 8 * KIB]
    assert cpu.peak_bytes == 64 * KIB


# A weight gradient: the product of two 1 KiB activations is an 8 KiB weight, transposed
# (a bitcast under its layout) and reduce-scattered to 1 KiB.
GRADIENT = """\
HloModule m

add {
  x = bf16[] parameter(0)
  y = bf16[] parameter(1)
  ROOT s = bf16[] add(x, y)
}

ENTRY main {
  a = bf16[8,64]{1,0} parameter(0)
  b = bf16[8,64]{1,0} parameter(1)
  d = bf16[64,64]{1,0} dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  t = bf16[64,64]{0,1} transpose(d), dimensions={1,0}
  ROOT r = bf16[8,64]{1,0} reduce-scatter(t), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, dimensions={0}, to_apply=add
}
"""


def test_a_transposed_dot_is_an_f32_copy_on_a_backend_computing_bf16_in_f32() -> None:
    module = hlo_dedup.load(GRADIENT)
    native = analyze(module).computation("main")
    # As written the transpose is a bitcast: parameters 2 KiB, d 8, r 1.
    assert [i.name for i in native.instructions if i.opcode != "parameter"] == ["d", "r"]
    assert native.peak_bytes == 2 * KIB + 8 * KIB + 1 * KIB
    cpu = analyze(module, f32_arithmetic=True).computation("main")
    assert [i.name for i in cpu.instructions if i.opcode != "parameter"] == ["d", "t", "r"]
    # At d: parameters 2, their f32 copies 4, d in f32 16 (its reader converts it back);
    # at t: parameters 2, d 16 and the transposed copy, written in f32 for the f32
    # reduce-scatter, 16; at r: parameters 2, t 16 (read as it is), r 1 and its f32 result 2.
    steps = cpu.live_bytes[-3:]
    assert steps == [22 * KIB, 34 * KIB, 21 * KIB]
    assert cpu.peak_bytes == 34 * KIB


def test_f32_programs_and_the_default_are_priced_as_before() -> None:
    f32 = GRADIENT.replace("bf16", "f32")
    for text in (f32, DOT_TANH.replace("bf16", "f32")):
        module = hlo_dedup.load(text)
        assert analyze(module, f32_arithmetic=True).computation("main").live_bytes == \
            analyze(module).computation("main").live_bytes
    assert not analyze(hlo_dedup.load(GRADIENT)).f32_arithmetic
    assert PRICE_BACKENDS == {"native": False, "xla-cpu": True}


# The gather's 8 KiB result is read by two dots; a duplicate gather of the same shard feeds
# a third one.
TWO_GATHERS = f"""\
HloModule m

ENTRY main {{
  w = bf16[8,64]{{1,0}} parameter(0)
  x = bf16[16,64]{{1,0}} parameter(1)
  g = bf16[64,64]{{1,0}} all-gather(w), {GATHER}
  d1 = bf16[16,64]{{1,0}} dot(x, g), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  d2 = bf16[16,64]{{1,0}} dot(d1, g), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  g2 = bf16[64,64]{{1,0}} all-gather(w), {GATHER}
  d3 = bf16[16,64]{{1,0}} dot(d2, g2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT t = (bf16[16,64]{{1,0}}, bf16[16,64]{{1,0}}) tuple(d1, d3)
}}
""".replace("{{{{", "{{").replace("}}}}", "}}")


def test_a_gathered_value_stays_bf16_and_a_folded_gathers_temporaries_go_with_it() -> None:
    module = hlo_dedup.load(TWO_GATHERS)
    cpu = analyze(module, f32_arithmetic=True).computation("main")
    assert [i.name for i in cpu.instructions] == ["w", "x", "g", "d1", "d2", "g2", "d3", "t"]
    # Parameters 3 KiB (w 1, x 2). g keeps its 8 KiB bf16 buffer (two dots read it); its
    # f32 operand copy 2 and f32 result 16 are temporaries. d1 (2, read twice) reads f32
    # copies of x (4) and g (16), its f32 result 4 a temporary. d2's one reader is a dot:
    # it is held in f32 (4); it reads copies of d1 (4) and g (16). g2 as g. d3 reads copies
    # of d2 (2 x its 2 bf16 KiB) and g2 (16); the tuple holds it in bf16 (2, f32 result 4).
    assert {i.name: cpu.scratch[p] // KIB for p, i in enumerate(cpu.instructions) if p in cpu.scratch} == \
        {"g": 18, "d1": 24, "d2": 20, "g2": 18, "d3": 24}
    assert [b // KIB for b in cpu.live_bytes] == [3, 3, 3 + 8 + 18, 3 + 8 + 2 + 24, 3 + 8 + 2 + 4 + 20,
                                                  3 + 2 + 4 + 8 + 18, 3 + 2 + 4 + 8 + 2 + 24, 3 + 2 + 2]
    pricer = FoldPricer(module, f32_arithmetic=True)
    comp = module.entry
    pricer.apply(comp, "g", "g2")
    # Where g2 ran, neither its buffer nor its temporaries are left, and g lives on to d3.
    assert [b // KIB for b in pricer.live_bytes(comp)] == [3, 3, 29, 37, 37, 3 + 2 + 4 + 8, 43, 7]
    # The folded program scheduled anew is priced as a fresh model of it.
    folded = TWO_GATHERS.replace("dot(d2, g2)", "dot(d2, g)")
    folded = "\n".join(line for line in folded.splitlines() if not line.lstrip().startswith("g2 ="))
    fresh = analyze(hlo_dedup.load(folded), f32_arithmetic=True).computation("main")
    assert pricer.rescheduled_peak(comp) == fresh.peak_bytes == 43 * KIB


TRAIN_STEP = Path(__file__).resolve().parents[1] / "data" / "price" / "tied_remat_train.hlo"


def test_the_bf16_train_step_folded_and_scheduled_anew_is_priced_as_a_fresh_model_of_it() -> None:
    text = TRAIN_STEP.read_text().replace("f32[", "bf16[")
    module = hlo_dedup.load(text)
    native = [c for p in hlo_dedup.run_passes(hlo_dedup.load(text)).passes for c in p.profiles]
    result = hlo_dedup.run_passes(module, price_backend="xla-cpu")
    profiles = [c for p in result.passes for c in p.profiles]
    assert len(result.folds) == 6 and len(profiles) == len(native) == 1
    after = analyze(module, f32_arithmetic=True)
    for profile in profiles:
        assert profile.rescheduled == after.computation(profile.computation).peak_bytes
    # Computing in f32 costs more at the peak than bf16 as written.
    assert profiles[0].peak_before.bytes > native[0].peak_before.bytes


def test_the_backend_is_a_pass_option_and_a_command_line_choice(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown price backend 'tpu'"):
        NeuronAllGatherDuplicateRemover(price_backend="tpu")
    outputs = []
    for backend in ("native", "xla-cpu"):
        out, report, page = (tmp_path / f"{backend}.{ext}" for ext in ("hlo", "json", "html"))
        proc = subprocess.run([sys.executable, "-m", "hlo_dedup", "-", "-o", str(out), "--price-backend", backend,
                               "--report", str(report), "--html", str(page)],
                              input=TRAIN_STEP.read_text().replace("f32[", "bf16["), capture_output=True,
                              text=True, check=True)
        phrase = proc.stderr.split("peak ", 1)[1].split(") for ", 1)[0]
        outputs.append((out.read_bytes(), phrase.split(" ", 1)[0]))
        # Every output says which backend its price assumes; the default keeps its words.
        assert json.loads(report.read_text())["price_backend"] == backend
        assert ("priced for xla-cpu" in phrase) == (backend == "xla-cpu"), phrase
        assert ("memory priced for xla-cpu" in page.read_text()) == (backend == "xla-cpu")
    (native_text, native_peak), (cpu_text, cpu_peak) = outputs
    assert native_text == cpu_text  # the price changes, the folds do not (no budget)
    assert native_peak != cpu_peak
    bad = subprocess.run([sys.executable, "-m", "hlo_dedup", str(TRAIN_STEP), "--price-backend", "tpu"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--price-backend" in bad.stderr
