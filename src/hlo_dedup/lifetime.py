"""A child process of the command (a batch worker, the XLA child) ends with the command.

Killed with SIGKILL, the command cannot stop its children: they went on running (an XLA
compile was seen 13 minutes later), and a batch pool's workers kept its resource tracker
and semaphores alive. Each child therefore watches its parent: when the process that
started it is gone (the child is re-parented), it exits at once. A thread that polls
`os.getppid()` works for any parent and any thread of it, where Linux's PR_SET_PDEATHSIG
fires when the parent's *thread* that started the child ends.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["exit_with_parent"]

#: How often a child looks whether its parent is still there.
POLL_SECONDS = 0.25


def exit_with_parent(code: int = 70) -> None:
    """From now on, exit with `code` as soon as the parent process is gone."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(POLL_SECONDS)
        os._exit(code)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
