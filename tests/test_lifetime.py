"""A child of the command ends when the command is killed outright (SIGKILL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "from hlo_dedup.lifetime import exit_with_parent;"
                          "import time; exit_with_parent(); print('ready', flush=True); time.sleep(120)"],
                         stdout=subprocess.PIPE, text=True)
assert child.stdout.readline() == "ready\\n"
print(child.pid, flush=True)
time.sleep(120)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie has ended
    except FileNotFoundError:
        return True


def test_a_child_exits_soon_after_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import time\n" + PARENT], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())  # type: ignore[union-attr]
    assert not _gone(child)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)
