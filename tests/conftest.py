"""Shared fixtures and how the suite is divided; the helpers themselves live in tests/support.py.

* A test that touches XLA does so through the `xla_client` fixture (or one built on it), and
  that marks it `oracle`: `pytest -m "not oracle"` is the fast subset, with no jax at all.
* `--without-xla` runs the suite as if jax and jaxlib were not installed (they are shadowed,
  for subprocesses too) and deselects the oracle tests: it proves the core needs neither.
* Hypothesis draws few examples by default and many in CI (`CI=true`); `HYPOTHESIS_PROFILE`
  picks a profile explicitly (`dev`, `ci`).
* A test that opens a page in headless Chromium requests the `browser` fixture, which marks
  it `browser` (`-m "not browser"` leaves them out); without Chromium they skip, in CI they fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from support import CORPUS, IN_CI, JAX_DATA, REPO, corpus_files, jax_modules  # noqa: F401
from support import xla_client as _xla_client

#: Fixtures that hand a test XLA; any test that requests one (directly or through another
#: fixture) is an oracle test.
ORACLE_FIXTURES = frozenset({"xla_client"})
#: Fixtures that hand a test a headless Chromium: requesting one marks a test `browser`.
BROWSER_FIXTURES = frozenset({"browser"})

_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile("dev", max_examples=30, deadline=None, suppress_health_check=_HEALTH)
settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=_HEALTH)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if IN_CI else "dev"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--without-xla", action="store_true",
                     help="shadow jax and jaxlib (subprocesses too) and deselect the oracle tests")


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("--without-xla"):
        return
    shadow = Path(tempfile.mkdtemp(prefix="hlo-dedup-no-xla-"))
    for name in ("jax", "jaxlib"):
        (shadow / name).mkdir()
        (shadow / name / "__init__.py").write_text(f"raise ImportError('{name} is shadowed: --without-xla')\n")
    sys.path.insert(0, str(shadow))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shadow), os.environ.get("PYTHONPATH")]))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    oracle = [item for item in items if ORACLE_FIXTURES & set(getattr(item, "fixturenames", ()))]
    for item in oracle:
        item.add_marker(pytest.mark.oracle)
    for item in items:
        if BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)
    if config.getoption("--without-xla"):
        chosen = set(oracle)
        config.hook.pytest_deselected(items=[item for item in items if item in chosen])
        items[:] = [item for item in items if item not in chosen]


@pytest.fixture(scope="session")
def xla_client():  # type: ignore[no-untyped-def]
    """jaxlib's xla_client; the oracle tests are never skipped in CI."""
    return _xla_client()


@pytest.fixture(scope="session")
def xc(xla_client):  # type: ignore[no-untyped-def]
    """Short name for `xla_client` used by the CLI and format tests."""
    return xla_client


@pytest.fixture(scope="session")
def xla_dump(xla_client, tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """A real XLA dump tree, `<tmp>/dump`, written once per session by a sharded JAX training
    loop run with XLA_FLAGS=--xla_dump_to (tests/data/generate.py --xla-dump)."""
    root = tmp_path_factory.mktemp("xla")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run([sys.executable, str(REPO / "tests" / "data" / "generate.py"), "--xla-dump", "dump"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return root / "dump"


@pytest.fixture(scope="session")
def xla_hlo(xla_client):  # type: ignore[no-untyped-def]
    """jaxlib's HLO bindings: parse and print with XLA's own C++."""
    return xla_client.hlo


@pytest.fixture(scope="session")
def browser():  # type: ignore[no-untyped-def]
    """One headless Chromium for the session (Debian's `chromium`); never skipped in CI."""
    from chromium import Browser, find_chromium

    executable = find_chromium()
    if executable is None:
        if IN_CI:
            pytest.fail("chromium is required in CI (apt-get install chromium; .ci/run does it)")
        pytest.skip("chromium not installed: apt-get install chromium (or set HLO_DEDUP_CHROMIUM)")
    started = Browser(executable)
    yield started
    started.close()
