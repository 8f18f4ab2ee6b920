"""Shared fixtures; the helpers themselves live in tests/support.py."""

from __future__ import annotations

import pytest
from support import CORPUS, IN_CI, JAX_DATA, REPO, corpus_files, jax_modules  # noqa: F401
from support import xla_client as _xla_client


@pytest.fixture(scope="session")
def xla_client():  # type: ignore[no-untyped-def]
    """jaxlib's xla_client; the oracle tests are never skipped in CI."""
    return _xla_client()


@pytest.fixture(scope="session")
def xc(xla_client):  # type: ignore[no-untyped-def]
    """Short name for `xla_client` used by the CLI and format tests."""
    return xla_client
