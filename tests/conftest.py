"""Shared test fixtures: the XLA corpus beside the project, JAX-generated data, XLA."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "xla-hlo"
JAX_DATA = REPO / "tests" / "data" / "jax"
IN_CI = os.environ.get("CI") == "true"


def corpus_files() -> list[Path]:
    """The corpus `.hlo` files; outside CI an absent corpus skips, in CI it fails."""
    if not CORPUS.is_dir():
        if IN_CI:
            pytest.fail(f"corpus missing at {CORPUS} (CI must have ../shared/corpus)")
        pytest.skip("../shared/corpus/xla-hlo is absent (only CI and developer clones have it)")
    return sorted(CORPUS.glob("*.hlo"))


def jax_modules() -> list[Path]:
    return sorted(JAX_DATA.glob("*.hlo"))


@pytest.fixture(scope="session")
def xla_client():
    """jaxlib's xla_client; the oracle tests are never skipped in CI."""
    try:
        from jax._src.lib import xla_client as xc
    except ImportError:
        if IN_CI:
            pytest.fail("jax/jaxlib are required in CI (pip install -e '.[test]')")
        pytest.skip("jax/jaxlib not installed: pip install 'hlo-dedup[test]'")
    return xc
