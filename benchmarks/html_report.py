"""The `--html` page at scale: render time, page size, and how fast Chromium loads and filters it.

    python benchmarks/html_report.py                            # 10k and 100k instructions
    python benchmarks/html_report.py --instructions 10000,300000 --runs 5

For each size, the benchmark module (generate.py: an FSDP transformer step whose backward
pass re-gathers every weight, 6 folds per layer) goes through the default pipeline once;
then `render_html` is timed (median over --runs), the page's size and folds are counted and,
when Chromium is installed (driven by tests/chromium.py, as the tests do), the page is
opened in headless Chromium: seconds to its load event, and milliseconds for the search
box to filter every table after one input event (script and layout, measured in the page).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from common import ROOT, generate, machine_line, table  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))

from hlo_dedup.report import RunReport, render_html  # noqa: E402
from hlo_dedup.run import RunOptions, run_input  # noqa: E402

FILTER = """(() => {
  const box = document.getElementById('search');
  box.value = %s;
  const t0 = performance.now();
  box.dispatchEvent(new Event('input'));
  document.body.offsetHeight;  // the layout the filter causes
  return performance.now() - t0;
})()"""


def measure(instructions: int, runs: int, browser) -> list[str]:  # type: ignore[no-untyped-def]
    path, count = generate(instructions)
    options = RunOptions()
    result = run_input(str(path), "/dev/null", options)
    assert result.ok, result.error
    report = RunReport(str(path), "/dev/null", "hlo", "hlo", options.passes, inputs=[result])
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        page = render_html(report, "hlo-dedup benchmark")
        times.append(time.perf_counter() - t0)
    folds = len(report.modules[0].folds)
    row = [f"{count:,}", f"{folds:,}", f"{statistics.median(times):.2f}", f"{len(page.encode()) / 1e6:.1f}"]
    if browser is None:
        return row + ["-", "-"]
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "page.html"
        file.write_text(page, encoding="utf-8")
        loads, filters = [], []
        for _ in range(runs):
            with browser.open(file) as tab:
                loads.append(tab.load_seconds)
                query = report.modules[0].folds[0].removed
                filters.append(tab.evaluate(FILTER % repr(query)))
    return row + [f"{statistics.median(loads):.2f}", f"{statistics.median(filters):.0f}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instructions", default="10000,100000", help="comma-separated module sizes")
    ap.add_argument("--runs", type=int, default=3, help="runs per figure (median)")
    args = ap.parse_args(argv)
    from chromium import Browser, find_chromium

    executable = find_chromium()
    browser = Browser(executable) if executable else None
    try:
        rows = [measure(int(n), args.runs, browser) for n in args.instructions.split(",")]
    finally:
        if browser is not None:
            browser.close()
    print(machine_line())
    print(f"Chromium: {browser.version if browser else 'not installed (browser columns skipped)'}")
    print(table(rows, ["instructions", "folds", "render s", "page MB", "load s", "filter ms"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
