"""Load-independent cost of reading and printing a module: valgrind's instruction count.

    python benchmarks/instruction_count.py FILE...                       # this tree
    python benchmarks/instruction_count.py --trees OLD,NEW FILE...       # two source trees
    python benchmarks/instruction_count.py --passes FILE...              # with the default pipeline
    python benchmarks/instruction_count.py --command FILE...             # the whole command

Seconds on a shared host move with its load; the number of machine instructions a process
executes does not. For each file and source tree, one process reads the file, parses it and
prints it (`modules_from_bytes` + `to_text`, the collector off, as the command runs), under
`valgrind --tool=cachegrind --cache-sim=no`; a second process does everything but the parse
and print; the table shows the difference, per instruction line too, and with two
trees the ratio NEW/OLD. `--passes` runs the default pipeline between the parse and the
print, as the plain command does. Each child exits as the command does (`os._exit`, no
teardown of the IR). A tree is a checkout (its `src/` is put first on the path). Needs
valgrind (~50x slower than a plain run: a 4 MB module takes about a minute per tree).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_CHILD = r"""
import gc, os, sys
sys.path.insert(0, sys.argv[1])
from hlo_dedup.io.formats import modules_from_bytes
from hlo_dedup.passes import DEFAULT_PIPELINE, Pipeline
gc.disable()
data = open(sys.argv[2], "rb").read()
if sys.argv[3] == "1":
    for module in modules_from_bytes(data, sys.argv[2]):
        if sys.argv[4] == "1":
            Pipeline.from_names(DEFAULT_PIPELINE).run(module)
        module.to_text()
os._exit(0)  # as the command exits: the IR is not torn down object by object
"""
# The whole command, as `python -m hlo_dedup` runs it; "0" starts the bare interpreter only.
_COMMAND = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
if sys.argv[3] == "1":
    from hlo_dedup.cli import entry
    sys.argv = ["hlo-dedup", sys.argv[2], "-o", sys.argv[5], *(["--passes="] if sys.argv[4] == "0" else [])]
    entry()
os._exit(0)
"""


def _child_env(tree: Path) -> dict[str, str]:
    """Bytecode from a cache per tree, as an installed package has it: compiling a module
    from source would count in whichever process imports it first."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(REPO / "benchmarks" / "out" / "pycache" / str(tree).strip("/").replace("/", "_"))
    env["PYTHONHASHSEED"] = "0"  # set and dict orders, hence the work, the same run after run
    return env


def instructions(tree: Path, path: Path, *, work: bool, passes: bool, command: bool = False) -> int:
    """Machine instructions of one child process (`work`: with the parse and print, and with
    `passes` the default pipeline between them; `command`: the whole command instead)."""
    child = [sys.executable, "-c", _COMMAND if command else _CHILD, str(tree / "src"), str(path),
             "1" if work else "0", "1" if passes else "0"]
    if command:
        child.append(os.devnull)
    subprocess.run(child, capture_output=True, check=True, env=_child_env(tree))  # fills the bytecode cache
    proc = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *child],
        capture_output=True, text=True, check=True, env=_child_env(tree),
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if found is None:
        raise SystemExit(f"valgrind printed no instruction count for {path}:\n{proc.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--trees", default=str(REPO), help="comma-separated checkouts (default: this one)")
    ap.add_argument("--passes", action="store_true", help="also run the default pipeline")
    ap.add_argument("--command", action="store_true",
                    help="count the whole command (start-up included) above a bare interpreter")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    trees = [Path(t).resolve() for t in args.trees.split(",")]
    header = ["module", "lines"] + [f"{t.name} G" for t in trees] + [f"{trees[-1].name} per line"]
    if len(trees) == 2:
        header.append("ratio")
    print("  ".join(header))
    for path in args.files:
        text = path.with_suffix(".hlo") if path.suffix == ".pb" and path.with_suffix(".hlo").exists() else path
        count = text.read_bytes().count(b" = ")  # instruction lines (of a .pb's text twin), for a per-line figure
        costs = [instructions(t, path, work=True, passes=args.passes, command=args.command)
                 - instructions(t, path, work=False, passes=False, command=args.command) for t in trees]
        row = [path.name, f"{count:,}"] + [f"{c / 1e9:.2f}" for c in costs] + [f"{costs[-1] / max(count, 1):,.0f}"]
        if len(trees) == 2:
            row.append(f"{costs[1] / costs[0]:.2f}x")
        print("  ".join(row), flush=True)


if __name__ == "__main__":
    main()
