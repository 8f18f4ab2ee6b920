"""Run fuzz cases through the command and judge each against the contract.

The contract (README, "Exit codes"): exit 0, or exactly one line `file:line:col: error: ...`
(`file: error: ...` for a problem that has no position, such as an unreadable proto) with
exit 2; exit 1 only for a pass's RET_CHECK. Never a traceback, an `internal error`, a death
by signal, more than `timeout` seconds (plus 2 s per MB of input: linear is fine, quadratic
is not) or more than `memory_mb` + 100 bytes per input byte of resident memory. On success
the output must read back (and with `--passes=` it must be the input, byte for byte).

Cases run in-process (`hlo_dedup.cli.main`) in worker processes, so a hang, a crash or a
runaway allocation costs one worker (restarted) and is recorded; `subprocess=True` runs each
case as `python -m hlo_dedup` instead. Every violating case is run again that way to confirm
it, and saved with a command line that reproduces it.
"""

from __future__ import annotations

import io
import json
import os
import re
import resource
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from fuzz_inputs import REPO, Case, make_case  # noqa: E402

LOCATED = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): error: \S")
UNLOCATED = re.compile(r"^(?P<file>[^\n]+?): error: \S")
HARD_LIMIT_MB = 4096  # RLIMIT_DATA of every process running a case: the machine stays usable


@dataclass
class Limits:
    timeout: float = 10.0  # seconds a case may take, plus 2 s per MB of input
    memory_mb: int = 512  # resident memory a case may add, plus 100 bytes per input byte

    def seconds(self, size: int) -> float:
        return self.timeout + 2.0 * size / 2**20


@dataclass
class Result:
    """What one case did, and how the contract judges it."""

    index: int
    family: str
    detail: str
    flags: list[str]
    size: int
    status: int | None = None
    signal: str | None = None
    stderr: str = ""
    seconds: float = 0.0
    peak_mb: float = 0.0
    outcome: str = ""  # ok | error | io-error | ret-check, or the violation's kind
    violation: bool = False
    why: str = ""
    confirmed: str = ""
    extra: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------ judging
def judge(result: Result, case: Case, limits: Limits) -> None:
    """Set `outcome`, `violation` and `why` from what the command did."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if ": error: " in line or line.startswith("hlo-dedup: ")]
    allowed_mb = limits.memory_mb + 100 * result.size / 2**20

    def fail(kind: str, why: str) -> None:
        result.outcome, result.violation, result.why = kind, True, why

    if result.signal is not None:
        return fail("signal", result.signal)
    if result.status is None:
        return fail("timeout", f"no answer after {limits.seconds(result.size):.0f} s")
    if "Traceback" in result.stderr:
        return fail("traceback", _first(lines, "Traceback"))
    if "internal error" in result.stderr:
        kind = "memory" if "MemoryError" in result.stderr else "internal-error"
        return fail(kind, _first(lines, "internal error"))
    if result.seconds > limits.seconds(result.size):
        return fail("timeout", f"{result.seconds:.1f} s")
    if result.peak_mb > allowed_mb:
        return fail("memory", f"{result.peak_mb:.0f} MB resident (limit {allowed_mb:.0f} MB)")
    if result.status == 0:
        if errors:
            return fail("error-on-success", errors[0])
        problem = result.extra.get("output")
        if problem:
            return fail(problem.split(":", 1)[0], problem)
        result.outcome = "ok"
        return None
    if result.status == 1:
        if len(errors) == 1 and "RET_CHECK failure" in errors[0]:
            result.outcome = "ret-check"
            return None
        return fail("exit-1", errors[0] if errors else "exit 1 without a RET_CHECK line")
    if result.status != 2:
        return fail(f"exit-{result.status}", lines[-1] if lines else "")
    if len(errors) != 1 or len(lines) != 1:
        return fail("not-one-line", " | ".join(lines[:3]))
    located = LOCATED.match(errors[0])
    if located:
        if int(located["line"]) < 1 or int(located["col"]) < 1:
            return fail("unlocated", errors[0])
        result.outcome = "error"
        return None
    if UNLOCATED.match(errors[0]) and not case.text_input:
        result.outcome = "io-error"
        return None
    return fail("unlocated", errors[0])


def _first(lines: list[str], needle: str) -> str:
    return next((line for line in lines if needle in line), lines[0] if lines else "")[:300]


# ------------------------------------------------------------------------------- a case
def case_argv(case: Case, input: Path, work: Path) -> list[str]:
    flags = [f.replace("{dir}", str(work)) for f in case.flags]
    return [str(input), "-o", str(work / "out.hlo"), *flags]


def output_checks(case: Case, input: Path, work: Path, reread) -> str:  # noqa: ANN001
    """After exit 0: the output reads back; with --passes= it is the input itself."""
    out = work / "out.hlo"
    if "--split-input-file" in case.flags or not out.exists():
        return ""  # several modules are written without separators (issue 11 section 2)
    if case.flags == ("--passes=",) and case.suffix == ".hlo" and out.read_bytes() != input.read_bytes():
        return "roundtrip: --passes= did not write the input back byte for byte"
    status, stderr = reread(out, work)
    if status != 0:
        return f"reread: the output does not read back: {stderr.strip()[:300]}"
    return ""


def _in_process(argv: list[str]) -> tuple[int, str]:
    from hlo_dedup.cli import main

    err = io.StringIO()
    status = main(argv, stdin=io.BytesIO(b""), stdout=io.BytesIO(), stderr=err)
    return status, err.getvalue()


def _reread_in_process(out: Path, work: Path) -> tuple[int, str]:
    return _in_process([str(out), "--passes=", "-o", str(work / "reread.hlo")])


def _peak_mb() -> float:
    status = Path("/proc/self/status").read_text()
    m = re.search(r"VmHWM:\s+(\d+)", status)
    return int(m.group(1)) / 1024 if m else 0.0


def _reset_peak() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def limit_memory() -> None:
    """RLIMIT_DATA for a process that runs cases (a child's preexec function too)."""
    limit = HARD_LIMIT_MB * 2**20
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def worker_loop() -> None:
    """`fuzz_runner.py --worker`: read {"case": ..., "input": ..., "work": ...} lines, run
    each in this process, answer one JSON line each on the original standard output."""
    limit_memory()
    channel = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # nothing the command prints by mistake may break the protocol
    if os.environ.get("FUZZ_PRELOAD_XLA"):
        try:
            from jax._src.lib import xla_client  # noqa: F401
        except ImportError:
            pass
    for line in sys.stdin:
        request = json.loads(line)
        case = Case(**request["case"])
        case.data, case.flags = b"", tuple(case.flags)
        input, work = Path(request["input"]), Path(request["work"])
        _reset_peak()
        base = _peak_mb()
        started = time.perf_counter()
        status, stderr = _in_process(case_argv(case, input, work))
        seconds = time.perf_counter() - started
        peak = _peak_mb() - base
        extra = {"output": output_checks(case, input, work, _reread_in_process)} if status == 0 else {}
        channel.write(json.dumps({"status": status, "stderr": stderr, "seconds": seconds, "peak_mb": peak,
                                  "extra": extra}) + "\n")
        channel.flush()


class Worker:
    """One `--worker` child; `send` a case, then read its answer line before `deadline`."""

    def __init__(self, preload_xla: bool, timeout: float) -> None:
        env = {**os.environ, "PYTHONPATH": _pythonpath()}
        if preload_xla:
            env["FUZZ_PRELOAD_XLA"] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__)), "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, start_new_session=True, env=env,
        )
        self.timeout = timeout
        self.fresh = True  # it still imports before its first answer
        self.busy: tuple[Case, Result] | None = None
        self.deadline = 0.0

    def send(self, case: Case, result: Result, input: Path, work: Path) -> None:
        request = {"case": {**asdict(case), "data": ""}, "input": str(input), "work": str(work)}
        self.proc.stdin.write(json.dumps(request) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        self.busy = (case, result)
        self.deadline = time.monotonic() + 2 * self.timeout + 4.0 * len(case.data) / 2**20 + (60 if self.fresh else 5)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def _pythonpath() -> str:
    return os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))


def run_in_subprocess(case: Case, input: Path, work: Path, limits: Limits) -> Result:
    """The case as `python -m hlo_dedup ...`: signals and memory seen from outside."""
    result = _blank(case)
    status, stderr, seconds, peak_mb = _child([sys.executable, "-m", "hlo_dedup", *case_argv(case, input, work)], limits,
                                              len(case.data))
    result.stderr, result.seconds, result.peak_mb = stderr, seconds, peak_mb
    if status is None or status >= 0:
        result.status = status
    else:
        result.signal = signal.Signals(-status).name
    if status == 0:

        def reread(out: Path, w: Path) -> tuple[int, str]:
            again = _child([sys.executable, "-m", "hlo_dedup", str(out), "--passes=", "-o", str(w / "reread.hlo")], limits,
                           out.stat().st_size)
            return (again[0] if again[0] is not None else -1), again[1]

        result.extra["output"] = output_checks(case, input, work, reread)
    return result


def _child(argv: list[str], limits: Limits, size: int) -> tuple[int | None, str, float, float]:
    """(exit status, or minus the signal, or None on timeout; stderr; seconds; peak MB)."""
    env = {**os.environ, "PYTHONPATH": _pythonpath()}
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
                                preexec_fn=limit_memory, start_new_session=True)
        timed_out = []
        timer = threading.Timer(limits.seconds(size) * 3, lambda: (timed_out.append(True), os.killpg(proc.pid, signal.SIGKILL)))
        timer.start()
        _, wait_status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(wait_status)
        seconds = time.perf_counter() - started
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    status = None if timed_out else proc.returncode
    return status, stderr, seconds, usage.ru_maxrss / 1024


def _blank(case: Case) -> Result:
    return Result(case.index, case.family, case.detail, list(case.flags), len(case.data))


# ----------------------------------------------------------------------------- campaign
@dataclass
class Campaign:
    seed: int = 11
    cases: int = 300
    start: int = 0
    scale: float = 1.0
    jobs: int = 2
    protos: bool = True
    subprocess: bool = False
    limits: Limits = field(default_factory=Limits)
    save_dir: Path | None = None
    progress: bool = False


def run_campaign(c: Campaign) -> list[Result]:
    """Run cases start..start+cases-1 of seed `c.seed`; violations are confirmed in a
    subprocess and saved under `c.save_dir` (if given)."""
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="hlo-dedup-fuzz-") as tmp:
        root = Path(tmp)
        cases = (make_case(c.seed, i, c.scale, protos=c.protos) for i in range(c.start, c.start + c.cases))
        if c.subprocess:
            for case in cases:
                input, work = _stage(root, case)
                result = run_in_subprocess(case, input, work, c.limits)
                judge(result, case, c.limits)
                _finish(c, root, case, result, results)
        else:
            _run_pooled(c, root, cases, results)
    results.sort(key=lambda r: r.index)
    return results


def _stage(root: Path, case: Case) -> tuple[Path, Path]:
    work = root / f"case-{case.index}"
    work.mkdir()
    input = work / f"input{case.suffix}"
    input.write_bytes(case.data)
    return input, work


def _finish(c: Campaign, root: Path, case: Case, result: Result, results: list[Result]) -> None:
    if result.violation:
        input, work = root / f"case-{case.index}" / f"input{case.suffix}", root / f"case-{case.index}"
        again = run_in_subprocess(case, input, work, c.limits)
        judge(again, case, c.limits)
        result.confirmed = again.outcome if again.violation else f"not reproduced in a subprocess ({again.outcome})"
        if c.save_dir is not None:
            save_violation(c, case, result)
    results.append(result)
    if c.progress and len(results) % 100 == 0:
        bad = sum(r.violation for r in results)
        print(f"  {len(results)} cases, {bad} violations", file=sys.stderr, flush=True)
    _clean(root / f"case-{case.index}")


def _clean(path: Path) -> None:
    for child in path.iterdir():
        child.unlink()
    path.rmdir()


def _run_pooled(c: Campaign, root: Path, cases, results: list[Result]) -> None:  # noqa: ANN001
    workers = [Worker(c.protos, c.limits.timeout) for _ in range(max(1, c.jobs))]
    selector = selectors.DefaultSelector()
    for w in workers:
        selector.register(w.proc.stdout, selectors.EVENT_READ, w)  # type: ignore[arg-type]
    pending = iter(cases)
    try:
        while True:
            for w in workers:
                if w.busy is None:
                    case = next(pending, None)
                    if case is not None:
                        input, work = _stage(root, case)
                        w.send(case, _blank(case), input, work)
            busy = [w for w in workers if w.busy is not None]
            if not busy:
                return
            wait = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            for key, _ in selector.select(timeout=wait):
                w = key.data
                line = w.proc.stdout.readline()
                case, result = w.busy
                w.busy, w.fresh = None, False
                if line:
                    answer = json.loads(line)
                    result.status, result.stderr = answer["status"], answer["stderr"]
                    result.seconds, result.peak_mb, result.extra = answer["seconds"], answer["peak_mb"], answer["extra"]
                else:  # the worker died with the case
                    code = w.proc.wait()
                    result.signal = signal.Signals(-code).name if code < 0 else f"worker exited with {code}"
                    _replace(workers, w, selector, c)
                judge(result, case, c.limits)
                _finish(c, root, case, result, results)
            for w in [w for w in workers if w.busy is not None and time.monotonic() > w.deadline]:
                case, result = w.busy  # type: ignore[misc]
                w.busy = None
                result.seconds = 2 * c.limits.seconds(result.size)
                _replace(workers, w, selector, c)
                judge(result, case, c.limits)
                _finish(c, root, case, result, results)
    finally:
        for w in workers:
            w.kill()


def _replace(workers: list[Worker], dead: Worker, selector: selectors.BaseSelector, c: Campaign) -> None:
    selector.unregister(dead.proc.stdout)  # type: ignore[arg-type]
    dead.kill()
    fresh = Worker(c.protos, c.limits.timeout)
    workers[workers.index(dead)] = fresh
    selector.register(fresh.proc.stdout, selectors.EVENT_READ, fresh)  # type: ignore[arg-type]


def save_violation(c: Campaign, case: Case, result: Result) -> None:
    """`<save_dir>/<kind>/case-<index><suffix>` and its `.json` (flags, what happened, how to
    run it again)."""
    folder = c.save_dir / result.outcome  # type: ignore[operator]
    folder.mkdir(parents=True, exist_ok=True)
    input = folder / f"case-{case.index}{case.suffix}"
    input.write_bytes(case.data)
    flags = " ".join(f.replace("{dir}", "/tmp") for f in case.flags)
    info = {**asdict(result), "seed": c.seed, "scale": c.scale,
            "repro": f"python -m hlo_dedup {input} -o /tmp/out.hlo {flags}".strip()}
    (folder / f"case-{case.index}.json").write_text(json.dumps(info, indent=2) + "\n")


# -------------------------------------------------------------------------------- table
def table(results: list[Result]) -> str:
    """Outcomes per family (crafted generators one row each), then the worst cases."""
    rows: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        rows[r.family][r.outcome] += 1
    columns = ["ok", "error", "io-error", "ret-check"]
    columns += sorted({r.outcome for r in results} - set(columns))
    width = max(len(f) for f in rows) if rows else 6
    lines = [f"{'family':<{width}}  {'cases':>6}  " + "  ".join(f"{col:>9}" for col in columns)]
    total: Counter = Counter()
    for family in sorted(rows):
        counts = rows[family]
        total.update(counts)
        lines.append(f"{family:<{width}}  {sum(counts.values()):>6}  " + "  ".join(f"{counts[col] or '':>9}" for col in columns))
    lines.append(f"{'total':<{width}}  {sum(total.values()):>6}  " + "  ".join(f"{total[col] or '':>9}" for col in columns))
    if results:
        slow = max(results, key=lambda r: r.seconds)
        big = max(results, key=lambda r: r.peak_mb)
        lines.append(f"slowest: case {slow.index} ({slow.family}, {slow.size} bytes) {slow.seconds:.2f} s; "
                     f"most memory: case {big.index} ({big.family}, {big.size} bytes) +{big.peak_mb:.0f} MB")
    bad = [r for r in results if r.violation]
    lines.append(f"violations: {len(bad)}" + (" by kind: " + ", ".join(f"{k} {n}" for k, n in Counter(r.outcome for r in bad).most_common()) if bad else ""))
    for r in bad[:40]:
        lines.append(f"  case {r.index} [{r.outcome}] {r.family} ({r.detail[:60]}) flags={' '.join(r.flags)}: {r.why[:160]}"
                     + (f" [subprocess: {r.confirmed}]" if r.confirmed else ""))
    return "\n".join(lines)


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    worker_loop()
