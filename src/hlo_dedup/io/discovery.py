"""Finding the HLO modules among batch inputs: files, directories and glob patterns.

    found = discover(["dump/", "cache/**/model.hlo_module.pb*"], out_dir="out", stage="before")
    found.files      # InputFile per module file to process, in argument order, each one's sorted
    found.skipped    # Skipped per file that is not processed, with the reason
    found.problems   # (argument, error line) for arguments that name nothing at all

What is found:

* A **directory** is searched recursively for every file; hidden files and directories are
  left out, and so is the output directory. Symbolic links to directories are followed, but a directory
  already on the way down (a link loop) is not entered again.
* A **glob pattern** (quoted, so the shell leaves it alone) is expanded here: `*`, `?` and
  `[...]` within one name, `**` for any number of directories (hidden ones excepted), with
  the same loop rule. A matched directory is searched as above.
* A **file** named on the command line is taken like the others; a path that does not exist
  is kept, so that reading it fails with the single-file message.

What each file is: by name where a layout says so (`hlo_dedup.io.layouts`: XLA dump
artifacts, Neuron cache markers, ...), by content otherwise (`hlo_dedup.io.sniff`). Files
that are not HLO are *skipped*, each with its reason, and so are FIFOs, devices, sockets and
broken links (never opened), and Neuron's wrapper of a compiled NEFF (an HLO module that is
one `AwsNeuronNeff` custom-call). The same file reached twice (through a link) counts once.

**Each (module, stage) once.** XLA dumps a module at one stage as text and as a proto when
asked for both, and `--xla_dump_compress_protos` or an archive adds `.gz` copies. Such twins
(same directory, same name up to the format extension) are processed once: the HLO text copy,
read by our own parser without XLA and printed back byte for byte where nothing changes;
except that when the text has its large constants elided (`{...}`, the text dumps' default)
and XLA can read protos here, the proto copy, the only one that holds the whole module.
Uncompressed copies come before compressed ones. The others are skipped as duplicates,
naming the copy that is processed.

**Selection.** `stage` and `module` are regular expressions searched (as XLA's
`--xla_dump_hlo_pass_re` and `--xla_dump_hlo_module_re` are) in a file's dump stage and in its
module's name (for a Neuron cache entry also in its `MODULE_<hash>+<hash>` key); files that
do not match are skipped with that reason. A file with no dump stage never matches `stage`.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from .layouts import LayoutName, artifact, read_name
from .sniff import NEFF_WRAPPER_TARGET, Content, contains, head, sniff

_FORMAT_PREFERENCE = {"hlo": 0, "pb": 1, "pbtxt": 2}


@dataclass(frozen=True)
class InputFile:
    """One file to process: where it is, its output path relative to OUT, what it holds.

    `module`: the module's name (from the name where a layout gives it, else the content);
    `stage`: its XLA dump stage; `group`: how summaries name the module, unique in the run;
    `format`: hlo, pb or pbtxt as the content shows (None: unknown until it is read)."""

    path: str
    rel: str
    module: str | None = None
    stage: str | None = None
    group: str | None = None
    format: str | None = None


@dataclass(frozen=True)
class Skipped:
    """A file that is not processed: `kind` groups it in summaries, `reason` says why."""

    path: str
    kind: str
    reason: str


@dataclass
class Discovery:
    files: list[InputFile] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    #: every stage and module name seen among the HLO files, before selection
    stages: set[str] = field(default_factory=set)
    modules: set[str] = field(default_factory=set)


@dataclass
class _Candidate:
    path: str
    rel: str
    name: LayoutName
    content: Content
    identity: tuple[int, int] | None  # (device, inode) of the file


# ------------------------------------------------------------------------------------------
# Walking and globbing


def has_magic(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def _is_hidden(name: str) -> bool:
    return name.startswith(".") and name not in (".", "..")


#: What `_dir_id` gives for a link back to a directory that contains it: a loop, never entered.
_LOOP = (-1, -1)


def _dir_id(path: str) -> tuple[int, int] | None:
    """The identity of the directory `path` names (following links), None if it names none,
    _LOOP if it is a link back to a directory that contains it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    if os.path.islink(path):
        target, parent = os.path.realpath(path), os.path.realpath(os.path.dirname(path) or ".")
        if parent == target or parent.startswith(target.rstrip(os.sep) + os.sep):
            return _LOOP
    return (st.st_dev, st.st_ino)


def _entries(directory: str) -> list[os.DirEntry]:
    try:
        with os.scandir(directory or ".") as it:
            return sorted(it, key=lambda e: e.name)
    except OSError:
        return []


def walk(root: str, skip: str | None = None, visited: set[tuple[int, int]] | None = None) -> Iterator[str]:
    """Every non-directory entry beneath `root` (paths starting with `root`), in sorted order.
    Hidden entries and the directory `skip` (a real path) are left out, and every directory is
    entered once: not again through a symbolic-link loop, nor, when `visited` is shared by
    several walks, in a later walk."""
    visited = set() if visited is None else visited

    def visit(directory: str) -> Iterator[str]:
        for entry in _entries(directory):
            if _is_hidden(entry.name):
                continue
            path = os.path.join(directory, entry.name)
            ident = _dir_id(path)
            if ident is None:
                yield path
            elif ident != _LOOP and ident not in visited and (skip is None or os.path.realpath(path) != skip):
                visited.add(ident)
                yield from visit(path)

    start = _dir_id(root)
    if start is not None and start != _LOOP and start not in visited:
        visited.add(start)
        yield from visit(root)


def expand_glob(pattern: str) -> list[str]:
    """The paths `pattern` matches, sorted, with `**` spanning any number of directories.
    Wildcards do not match hidden names (as in the shell), and each directory is searched once
    for each part of the pattern, by the first path that reaches it: a symbolic-link loop or a
    second link to a directory adds nothing."""
    absolute = pattern.startswith(os.sep)
    parts = [p for p in pattern.replace(os.altsep or os.sep, os.sep).split(os.sep) if p not in ("", ".")]
    found: set[str] = set()
    searched: set[tuple[tuple[int, int], int]] = set()

    def enter(path: str, i: int) -> None:
        ident = _dir_id(path or ".")
        if ident is not None and ident != _LOOP and (ident, i) not in searched:
            searched.add((ident, i))
            visit(path, i)

    def visit(base: str, i: int) -> None:
        if i == len(parts):
            if base:
                found.add(base)
            return
        part = parts[i]
        if part == "**":  # zero or more directories; last, it also matches every file beneath
            enter(base, i + 1)
            for entry in _entries(base):
                if _is_hidden(entry.name):
                    continue
                path = os.path.join(base, entry.name)
                if _dir_id(path) is not None:
                    enter(path, i)
                elif i == len(parts) - 1:
                    found.add(path)
            return
        if not has_magic(part):  # spelled out: followed wherever it leads (the pattern is finite)
            path = os.path.join(base, part)
            if i == len(parts) - 1:
                if os.path.lexists(path):
                    found.add(path)
            elif os.path.isdir(path):
                visit(path, i + 1)
            return
        for entry in _entries(base):
            if _is_hidden(entry.name) and not part.startswith("."):
                continue
            if fnmatch.fnmatchcase(entry.name, part):
                path = os.path.join(base, entry.name)
                if i == len(parts) - 1:
                    found.add(path)
                else:
                    enter(path, i + 1)

    enter(os.sep if absolute else "", 0)
    return sorted(found)


def glob_base(pattern: str) -> str:
    """The leading directories of `pattern` that hold no wildcard ('' for none)."""
    parts = pattern.replace(os.altsep or os.sep, os.sep).split(os.sep)
    fixed: list[str] = []
    for part in parts[:-1]:  # the last component names the files, never the base
        if has_magic(part):
            break
        fixed.append(part)
    if fixed == [""]:
        return os.sep  # '/*.hlo'
    return os.sep.join(fixed)


def relative(path: str, base: str) -> str:
    """`path` relative to `base`; its name alone if it lies outside `base`."""
    rel = os.path.relpath(path, base or ".")
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return os.path.basename(path)
    return rel


# ------------------------------------------------------------------------------------------
# What each file is


def _classify(path: str, rel: str) -> _Candidate | Skipped:
    try:
        st = os.stat(path)
    except OSError as exc:
        if os.path.islink(path) and not os.path.exists(path):
            return Skipped(path, "broken link", "a symbolic link to nothing")
        return Skipped(path, "unreadable", f"could not be read: {exc.strerror or exc}")
    if not stat.S_ISREG(st.st_mode):
        return Skipped(path, "not a regular file", f"not a regular file ({_file_type(st.st_mode)}); never opened")
    name = os.path.basename(path)
    found = artifact(name)
    if found is not None:
        return Skipped(path, found.kind, f"{found.what} (not HLO, by its name)")
    layout = read_name(name, os.path.basename(os.path.dirname(os.path.abspath(path))))
    try:
        content = sniff(head(path))
    except OSError as exc:
        if layout.hlo:  # named as HLO: reading it fails the same way, as a failure
            return _Candidate(path, rel, layout, Content(None), (st.st_dev, st.st_ino))
        return Skipped(path, "unreadable", f"could not be read: {exc.strerror or exc}")
    if not content.is_hlo and not layout.hlo:
        return Skipped(path, "not HLO", f"{content.what} (by its content)")
    if layout.layout != "xla-dump" and content.format in ("pb", "hlo") and contains(path, NEFF_WRAPPER_TARGET):
        return Skipped(path, "NEFF wrapped as HLO", "a compiled NEFF wrapped as an HLO module (custom-call "
                       "AwsNeuronNeff): nothing to deduplicate (by its content)")
    return _Candidate(path, rel, layout, content, (st.st_dev, st.st_ino))


def _file_type(mode: int) -> str:
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return what
    return "special"


def _module_of(c: _Candidate) -> str | None:
    return c.name.module or c.content.module


# ------------------------------------------------------------------------------------------
# The whole search


def discover(arguments: Sequence[str], out_dir: str | None = None, *, stage: str | None = None,
             module: str | None = None) -> Discovery:
    """The files to process among `arguments`, what was skipped and why, and the arguments
    that name nothing (see the module docstring). `stage` and `module` are regular
    expressions (re.error if malformed)."""
    stage_re = re.compile(stage) if stage is not None else None
    module_re = re.compile(module) if module is not None else None
    skip_dir = os.path.realpath(out_dir) if out_dir else None
    result = Discovery()
    candidates: list[_Candidate] = []
    seen_paths: set[str] = set()

    def take(path: str, rel: str) -> bool:
        """Classify one file found; True if it is an HLO candidate."""
        key = os.path.abspath(path)
        if key in seen_paths:  # e.g. matched by a pattern and found in a matched directory
            return False
        seen_paths.add(key)
        if not os.path.lexists(path):  # named on the command line: reading it reports it
            candidates.append(_Candidate(path, rel, read_name(os.path.basename(path)), Content(None), None))
            return True
        verdict = _classify(path, rel)
        if isinstance(verdict, Skipped):
            result.skipped.append(verdict)
            return False
        candidates.append(verdict)
        return True

    walked: set[tuple[int, int]] = set()  # directories searched, shared by every walk

    def take_dir(directory: str, base: str) -> int:
        inner_skip = None if os.path.realpath(directory) == skip_dir else skip_dir
        return sum(take(path, relative(path, base)) for path in walk(directory, inner_skip, walked))

    for arg in arguments:
        if os.path.isdir(arg):
            before, again = len(result.skipped), _dir_id(arg) in walked  # given twice, or inside another
            if not take_dir(arg, arg) and not again:
                skipped = len(result.skipped) - before
                detail = f" ({skipped} file{'s' if skipped != 1 else ''} skipped, none is HLO)" if skipped else ""
                result.problems.append((arg, f"{arg}: error: no HLO module beneath this directory{detail}"))
        elif os.path.lexists(arg) or not has_magic(arg):
            take(arg, os.path.basename(arg))
        else:
            base = glob_base(arg)
            matches = expand_glob(arg)
            for match in matches:
                if os.path.isdir(match):
                    take_dir(match, base)
                else:
                    take(match, relative(match, base))
            if not matches:
                result.problems.append((arg, f"{arg}: error: no file matches this pattern"))

    result.stages = {c.name.stage for c in candidates if c.name.stage is not None}
    result.modules = {name for name in map(_module_of, candidates) if name}
    chosen = [c for c in candidates if _selected(c, stage_re, module_re, result.skipped)]
    chosen = _without_duplicates(chosen, result.skipped)
    groups = _group_names(chosen)
    result.files = [InputFile(c.path, c.rel, _module_of(c), c.name.stage, groups.get(id(c)), c.content.format)
                    for c in chosen]
    return result


def _selected(c: _Candidate, stage_re: re.Pattern | None, module_re: re.Pattern | None,
              skipped: list[Skipped]) -> bool:
    if stage_re is not None:
        if c.name.stage is None:
            skipped.append(Skipped(c.path, "stage not selected", f"has no dump stage, so --stage "
                                   f"{stage_re.pattern!r} does not select it"))
            return False
        if not stage_re.search(c.name.stage):
            skipped.append(Skipped(c.path, "stage not selected",
                                   f"stage {c.name.stage} does not match --stage {stage_re.pattern!r}"))
            return False
    if module_re is not None:
        names = [n for n in (_module_of(c), c.name.unit if c.name.layout.startswith("neuron") else None) if n]
        if not any(module_re.search(n) for n in names):
            what = f"module {names[0]}" if names else "a module whose name is unknown"
            skipped.append(Skipped(c.path, "module not selected", f"{what} does not match --module {module_re.pattern!r}"))
            return False
    return True


def _without_duplicates(candidates: list[_Candidate], skipped: list[Skipped]) -> list[_Candidate]:
    """Each file once, and each (module, stage) once: see the module docstring."""
    kept: list[_Candidate] = []
    by_identity: dict[tuple[int, int], _Candidate] = {}
    twins: dict[tuple[str, str], list[_Candidate]] = {}
    for c in candidates:
        if c.identity is not None and c.identity in by_identity:
            first = by_identity[c.identity]
            skipped.append(Skipped(c.path, "same file", f"the same file as {first.path} (through a link), "
                                   "which is processed"))
            continue
        if c.identity is not None:
            by_identity[c.identity] = c
        kept.append(c)
        if c.name.twin is not None and c.content.is_hlo:
            key = (os.path.dirname(os.path.abspath(c.path)), c.name.twin)
            twins.setdefault(key, []).append(c)
    dropped: set[int] = set()
    for copies in twins.values():
        if len(copies) < 2:
            continue
        names = {_module_of(c) for c in copies} - {None}
        if len(names) > 1:  # not copies of one module after all
            continue
        best, why = _preferred(copies)
        for c in copies:
            if c is not best:
                dropped.add(id(c))
                skipped.append(Skipped(c.path, "duplicate", f"the same module and stage as {best.path}, "
                                       f"which is processed ({why})"))
    return [c for c in kept if id(c) not in dropped]


def _preferred(copies: list[_Candidate]) -> tuple[_Candidate, str]:
    """The copy to process and why."""

    def rank(c: _Candidate) -> tuple[int, bool, str]:
        return (_FORMAT_PREFERENCE.get(c.content.format or "", 3), c.path.lower().endswith(".gz"), c.path)

    ordered = sorted(copies, key=rank)
    best = ordered[0]
    if len({c.content.format for c in copies}) == 1:
        return best, "uncompressed: read without decompressing"
    if best.content.format != "hlo":
        return best, "a binary proto: read directly, where a text proto needs the whole schema"
    protos = [c for c in ordered if c.content.format == "pb"]
    if protos and contains(best.path, b"{...}"):
        if _protos_readable():
            return protos[0], "the text copy elides large constants ({...}); the proto holds them all"
        return best, "HLO text, although it elides large constants ({...}): reading the proto needs the proto extra"
    return best, "HLO text: read without XLA, printed back byte for byte where nothing changes"


def _protos_readable() -> bool:
    """Whether protos can be read here: protobuf imports (the `proto` extra; no jax needed)."""
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        return False
    return True


def _group_names(chosen: list[_Candidate]) -> dict[int, str]:
    """How summaries name each dump file's module: its name, with its dump id where two
    compilations share a name (`jit_f (module_0004)`)."""
    units: dict[str, set[str]] = {}
    for c in chosen:
        if c.name.stage is not None:
            units.setdefault(_module_of(c) or "?", set()).add(c.name.unit or "")
    names: dict[int, str] = {}
    for c in chosen:
        if c.name.stage is None:
            continue
        name = _module_of(c) or "?"
        names[id(c)] = f"{name} ({c.name.unit})" if len(units[name]) > 1 else name
    return names


__all__ = ["Discovery", "InputFile", "Skipped", "discover", "expand_glob", "glob_base", "has_magic", "relative", "walk"]
