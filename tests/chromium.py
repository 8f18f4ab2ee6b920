"""Headless Chromium for the page tests, driven over the DevTools protocol on a pipe.

`--remote-debugging-pipe` makes Chromium read protocol commands from its fd 3 and write
replies and events to its fd 4, each message JSON ended by a NUL byte: no port, no
websocket, nothing beyond the standard library. A `Browser` is one Chromium process with a
fresh profile; `Browser.open` loads a page in a new tab and returns a `Page` that records
every network request the page made, every console/log entry, and lets a test evaluate
script, click, type and take screenshots.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
    "--mute-audio", "--remote-debugging-pipe",
)  # fmt: skip
TIMEOUT = 60.0


def find_chromium() -> str | None:
    """The executable HLO_DEDUP_CHROMIUM names, else Debian's `chromium` on PATH."""
    chosen = os.environ.get("HLO_DEDUP_CHROMIUM")
    if chosen:
        return shutil.which(chosen)
    return shutil.which("chromium") or shutil.which("chromium-browser")


class ProtocolError(RuntimeError):
    pass


class Browser:
    def __init__(self, executable: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="hlo-dedup-chromium-")
        to_child, self._out = os.pipe()  # our commands -> Chromium's fd 3
        self._in, from_child = os.pipe()  # Chromium's fd 4 -> replies and events

        def at_3_and_4() -> None:  # in the child, before exec
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child, from_child)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=at_3_and_4,  # kept open in the child: set up as 3 and 4
        )
        os.close(to_child)
        os.close(from_child)
        self._next = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._replies: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.version = self.send("Browser.getVersion")["product"]

    # ----------------------------------------------------------------- protocol
    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._in, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            with self._cond:
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self.events.append(message)
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = TIMEOUT) -> dict[str, Any]:
        with self._cond:
            self._next += 1
            ident = self._next
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while ident not in self._replies:
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise ProtocolError(f"{method}: no reply ({'browser gone' if self._closed else 'timeout'})")
                self._cond.wait(left)
            reply = self._replies.pop(ident)
        if "error" in reply:
            raise ProtocolError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, session: str, since: int, timeout: float = TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events[since:]:
                    if event["method"] == method and event.get("sessionId") == session:
                        return event
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise ProtocolError(f"no {method} event")
                self._cond.wait(left)

    # --------------------------------------------------------------------- pages
    def open(self, path: Path, *, javascript: bool = True, width: int = 1280, height: int = 900,
             dark: bool = False) -> Page:
        """Load `path` (a file) in a new tab and wait for its load event; the caller closes it."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, target, session)
        for domain in ("Page", "Network", "Log", "Runtime"):
            page.send(f"{domain}.enable")
        page.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        if not javascript:
            page.send("Emulation.setScriptExecutionDisabled", {"value": True})
        if dark:
            page.send("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        page.url = path.resolve().as_uri()
        mark = len(self.events)
        started = time.monotonic()
        page.send("Page.navigate", {"url": page.url})
        self.wait_event("Page.loadEventFired", session, mark)
        page.load_seconds = time.monotonic() - started
        page.first_event = mark
        return page

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except ProtocolError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._out, self._in):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    """One tab: evaluate, click, type, screenshot; `requests` and `log_entries` so far."""

    def __init__(self, browser: Browser, target: str, session: str) -> None:
        self.browser, self.target, self.session = browser, target, session
        self.url = ""
        self.load_seconds = 0.0
        self.first_event = 0

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.send(method, params, self.session)

    def _events(self, method: str) -> list[dict[str, Any]]:
        with self.browser._cond:
            events = list(self.browser.events[self.first_event:])
        return [e["params"] for e in events if e["method"] == method and e.get("sessionId") == self.session]

    @property
    def requests(self) -> list[str]:
        """The URL of every request the page made since it started loading."""
        return [e["request"]["url"] for e in self._events("Network.requestWillBeSent")]

    @property
    def log_entries(self) -> list[dict[str, Any]]:
        """Browser log entries (CSP violations, failed loads) and console calls."""
        return [e["entry"] for e in self._events("Log.entryAdded")] + \
               [{"level": e["type"], "text": str(e.get("args"))} for e in self._events("Runtime.consoleAPICalled")]

    def evaluate(self, expression: str) -> Any:
        """The value of `expression` in the page (an isolated world when scripting is off)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise ProtocolError(f"{expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click in the middle of the first element `selector` finds."""
        box = self.evaluate(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            e.scrollIntoView({{block: "center"}}); const r = e.getBoundingClientRect();
            return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def type(self, text: str) -> None:
        """Key presses into the focused element, one character at a time."""
        for char in text:
            self.send("Input.dispatchKeyEvent", {"type": "keyDown", "text": char, "key": char})
            self.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": char})

    def screenshot(self, path: Path, *, full: bool = True, clip_height: int | None = None) -> bytes:
        """A PNG of the page (whole, or its top `clip_height` CSS pixels), written to `path`."""
        params: dict[str, Any] = {"format": "png"}
        if full or clip_height:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            height = min(size["height"], clip_height) if clip_height else size["height"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["width"], "height": height, "scale": 1})
        data = base64.b64decode(self.send("Page.captureScreenshot", params)["data"])
        path.write_bytes(data)
        return data

    def visible_texts(self, selector: str) -> list[str]:
        """The text of every element `selector` finds that is rendered: not hidden, not in a
        closed <details> (whose content keeps its boxes but is skipped)."""
        return self.evaluate(f"""Array.from(document.querySelectorAll({json.dumps(selector)}))
            .filter(e => e.checkVisibility({{visibilityProperty: true}})).map(e => e.innerText.trim())""")

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})

    def __enter__(self) -> Page:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
