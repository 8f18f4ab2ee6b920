"""A child process of the command (a batch worker, the XLA child) ends with the command.

Killed with SIGKILL, the command cannot stop its children: they went on running (an XLA
compile was seen 13 minutes later), and a batch pool's workers kept its resource tracker
and semaphores alive. Each child therefore watches its parent: when the process that
started it is gone (the child is re-parented), it terminates itself with SIGTERM, the way
the command stops it. That signal waits while the child holds signals back (an output's
temporary file exists: see `hlo_dedup.io.files`), so a write in progress is finished or
removed first; a child that does not end within `GRACE_SECONDS` exits anyway. A thread that
polls `os.getppid()` works for any parent and any thread of it, where Linux's
PR_SET_PDEATHSIG fires when the parent's *thread* that started the child ends.
"""

from __future__ import annotations

import os
import signal
import threading
import time

__all__ = ["exit_with_parent"]

#: How often a child looks whether its parent is still there.
POLL_SECONDS = 0.25
#: How long a child whose parent is gone may take to act on its SIGTERM.
GRACE_SECONDS = 60.0
_HELD = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def exit_with_parent(code: int = 70) -> None:
    """From now on, end soon after the parent process is gone (`code` if SIGTERM does not)."""
    parent = os.getppid()

    def watch() -> None:
        # Process-directed signals must reach the thread that holds them back while it
        # writes, never this one.
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
        while os.getppid() == parent:
            time.sleep(POLL_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(GRACE_SECONDS)
        os._exit(code)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
