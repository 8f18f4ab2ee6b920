"""Every corpus module through `dce` and the default pipeline: no crash, a structurally
valid module, and text XLA's own parser reads back."""

from __future__ import annotations

import pytest

import support
from support import corpus_files
from hlo_dedup import verify_structure
from hlo_dedup.passes import DEFAULT_PIPELINE, PassError, Pipeline
from hlo_dedup.text import split_module_texts
from hlo_dedup.text.parser import parse_module

pytestmark = [pytest.mark.corpus, pytest.mark.oracle]


@pytest.mark.parametrize("passes", [("dce",), DEFAULT_PIPELINE], ids=["dce", "default"])
def test_passes_over_the_corpus_keep_modules_valid_for_xla(xla_hlo, passes: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    hlo = xla_hlo
    failures: list[str] = []
    changed = ran = 0
    for path in corpus_files():
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        for line, piece in split_module_texts(text):
            if "HloModule" not in piece and "ENTRY" not in piece:
                continue
            try:
                hlo.hlo_module_from_text(piece)
            except Exception:  # noqa: BLE001 - inputs XLA itself rejects are not ours to check
                continue
            module = parse_module(piece, path.name, first_line=line)
            try:
                result = Pipeline.from_names(passes).run(module)
            except PassError:
                continue  # a RET_CHECK on a module that is not a Neuron flash-attention graph
            ran += 1
            changed += result.changed
            verify_structure(module)
            try:
                hlo.hlo_module_from_text(module.to_text())
            except Exception as e:  # noqa: BLE001
                failures.append(f"{path.name}:{line}: XLA rejects our output: {str(e)[:200]}")
    assert not failures, "\n".join(failures[:10])
    if support.FULL_CORPUS:
        assert ran >= 780
        # DCE finds dead code in dozens of corpus modules; the Neuron passes change a few.
        assert changed >= (50 if passes == ("dce",) else 1)
