"""Helpers shared by the tests: where the corpus and the JAX data live, and XLA.

pytest puts `tests/` on `sys.path` (rootdir conftest, prepend import mode), so test
modules in any subfolder `import support`.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest

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
