"""HLO text → IR, through the IR's public constructors.

Two readers share one output. The line fast path (`lines`) reads an instruction that XLA
printed on one line with a single regular-expression match. Anything it is not sure
about goes to the careful reader here, which walks the grammar of hlo-text-format.md
token by token. Both keep the exact source text, so printing an unchanged module gives
back the input byte for byte.
"""

from __future__ import annotations

import gc
import re
import sys
from typing import Callable, Iterable, NoReturn

from ..ir.attributes import read_parameter_number
from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.opcodes import CALLED_COMPUTATION_KEYS, is_known_opcode
from ..ir.source import ComputationSpan, ModuleSource, SourceSpan
from ..syntax.cursor import TextSyntaxError, int64
from ..syntax.errors import HloParseError, line_col
from ..syntax.foreign import MLIR_TEXT, is_mlir_text
from ..syntax.lexer import IDENT, ScanError, match_group, name_list, next_token, skip_trivia, split_attributes, token_at
from .lines import MAX_NESTING, PAYLOAD_OPCODES, PRIMITIVE_NAMES, ComputationState, PrintedLines, intern_lead, printed_header, shape_end, shape_required

_STACK_FRAME_SECTIONS = frozenset({"FileNames", "FunctionNames", "FileLocations", "StackFrames"})
_SWALLOWED_CLOSE = re.compile(r"\n[ \t]*\}")
_SPLIT_MARKER = re.compile(r"^// -----[ \t]*$", re.M)
_HEADER_INT = re.compile(r"[0-9]+")
#: A computation header as XLA prints it (no comments, strings or line breaks inside).
# A body closed as XLA prints it: `}` on its own line, then only blank lines before the next
# computation (or the end), so no computation attribute follows.
_PLAIN_CLOSE = re.compile(r"\n\}(?=\s*(?:[^\s,/]|\Z))")
# `#i#j...` after an operand name: indices of at most 18 digits (int64), each a whole token.
_INDEX_RUN = re.compile(r"(?:#[0-9]{1,18}(?![\w.?]|-(?!>)))+")
#: Longest name given to a get-tuple-element rebuilt from `%t#i#j...`: each level appends
#: `_i` to the one before, which a long chain must not turn into quadratic text.
_MAX_COMPACT_GTE_NAME = 256
#: Parameter numbers as XLA prints a computation's parameters, in order (a longer list
#: takes the general check).
_COUNTING = [str(i) for i in range(1024)]

def split_module_texts(text: str) -> list[tuple[int, str]]:
    """Split lit-style multi-module text on `// -----` lines: [(start_line, text)]."""
    if "// -----" not in text:  # a plain search is fifty times faster than the line regex
        return [(1, text)]
    pieces: list[tuple[int, str]] = []
    start = 0
    line = 1
    for m in _SPLIT_MARKER.finditer(text):
        pieces.append((line, text[start : m.start()]))
        line += text.count("\n", start, m.end())
        start = m.end()
    pieces.append((line, text[start:]))
    return pieces


def parse_module(
    text: str,
    filename: str = "<string>",
    *,
    spmd: bool = True,
    first_line: int = 1,
    fast_path: bool = True,
) -> HloModule:
    """Parse one HLO module. Raises HloParseError on any malformed input.

    `fast_path=False` reads every instruction and every computation header with the careful
    reader (tests use it to check that the fast paths build the same IR).
    """
    parser = _Parser(text, filename, spmd, first_line, fast=fast_path)
    # Parsing allocates millions of long-lived objects; the cyclic collector would rescan
    # them over and over (a third of parse time at 1M instructions) and find nothing.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return parser.parse()
    except HloParseError:
        raise
    except ScanError as e:
        raise parser.error(e.offset, e.message) from None
    except RecursionError:
        raise parser.error(parser.pos, "input nests too deeply") from None
    finally:
        if gc_was_enabled:
            gc.enable()


def parse_modules(text: str, filename: str = "<string>", *, spmd: bool = True) -> list[HloModule]:
    """Parse every module of a `// -----`-split file (one module if there is no marker)."""
    modules = []
    for first_line, piece in split_module_texts(text):
        if not piece.strip() or not _has_hlo(piece):
            continue
        modules.append(parse_module(piece, filename, spmd=spmd, first_line=first_line))
    if not modules:
        raise HloParseError("no HLO module found", filename=filename, line=1, column=1)
    return modules


def _has_hlo(piece: str) -> bool:
    """False for split pieces holding only comments (lit RUN/CHECK lines)."""
    try:
        return skip_trivia(piece, 0) < len(piece)
    except ScanError:
        return True


class _Operand:
    """An operand as the careful reader finds it: a name (with `#i` indices of a compact
    get-tuple-element) or an instruction written in place."""

    __slots__ = ("name", "offset", "indices", "nested")

    def __init__(self, name: str, offset: int, indices: tuple[int, ...] = (),
                 nested: HloInstruction | None = None) -> None:
        self.name = name
        self.offset = offset
        self.indices = indices
        self.nested = nested


class _Parser:
    def __init__(self, text: str, filename: str, spmd: bool, first_line: int, *, fast: bool = True) -> None:
        self.text = text
        self.fast = PrintedLines(text) if fast else None
        self.filename = filename
        self.spmd = spmd
        self.first_line = first_line
        self.pos = 0
        self.depth = 0  # nested-instruction operands being read
        self.module: HloModule | None = None
        self.source = ModuleSource(text, filename, first_line)

    # ----------------------------------------------------------------- errors
    def error(self, offset: int, message: str) -> HloParseError:
        line, column = line_col(self.text, offset)
        end = offset
        text = self.text
        while end < len(text) and end - offset < 24 and text[end] != "\n":
            end += 1
        return HloParseError(
            message,
            filename=self.filename,
            line=line + self.first_line - 1,
            column=column,
            snippet=text[offset:end],
        )

    def expect(self, pos: int, token: str) -> int:
        tok, start, end = next_token(self.text, pos)
        if tok != token:
            raise self.error(start, f"expected {token!r}, found {tok or 'end of input'!r}")
        return end

    # ----------------------------------------------------------------- module
    def parse(self) -> HloModule:
        text = self.text
        tok, start, end = next_token(text, 0)
        if tok == "HloModule":
            module = self.parse_header(end)
        else:
            if is_mlir_text(text[:4096]):
                raise self.error(start, f"expected 'HloModule': this is {MLIR_TEXT}")
            second, _, _ = next_token(text, end) if tok else ("", 0, 0)
            if tok != "ENTRY" and second != "{" and not (tok and second == "("):
                raise self.error(start, "expected 'HloModule' or a computation")
            module = HloModule("", use_spmd_partitioning=self.spmd)
            self.source.has_header = False
        # Set now so that errors found while reading can name their line; recorded as the
        # module's pristine text once everything is read.
        module.source = self.source
        self.module = module
        last_comp = None
        while True:
            if skip_trivia(text, self.pos) == len(text):
                break
            last_comp = self.parse_computation()
        if last_comp is None:
            raise self.error(self.pos, "expected at least one computation")
        self.source.tail = text[self.pos :]
        if module.entry is None:
            module.entry = last_comp
            last_comp.is_entry = True
        if not self.source.has_header:
            module.name = "module_" + module.entry.name
        module.attach_source(self.source)
        return module

    def parse_header(self, pos: int) -> HloModule:
        text = self.text
        tok, start, end = next_token(text, pos)
        name = tok.lstrip("%").removesuffix(":")
        if not IDENT.fullmatch(name):
            raise self.error(start, "expected module name after 'HloModule'")
        module = HloModule(name, use_spmd_partitioning=self.spmd)
        attrs, pos = split_attributes(text, end, single=True)
        seen: set[str] = set()
        for key, raw, off in attrs:
            if key in seen:
                raise self.error(off, f"duplicate module attribute {key!r}")
            seen.add(key)
            module.header_attributes.append((key, raw))
        for key in ("replica_count", "num_partitions"):
            raw = module.header_attr(key)
            if raw is not None and (not _HEADER_INT.fullmatch(raw) or int64(raw) is None):
                off = next(o for k, _, o in attrs if k == key)
                raise self.error(off, f"{key} must be a non-negative int64")
        pos = self.parse_stack_frames(pos)
        self.source.head = text[:pos]
        self.pos = pos
        return module

    def parse_stack_frames(self, pos: int) -> int:
        text = self.text
        while True:
            tok, start, end = next_token(text, pos)
            if tok not in _STACK_FRAME_SECTIONS:
                return pos
            pos = end
            while True:
                num, nstart, nend = next_token(text, pos)
                if not num.isdigit():
                    break
                item, istart, iend = next_token(text, nend)
                if item.startswith(("'", '"')):
                    pos = iend
                elif item == "{":
                    pos = match_group(text, istart)
                else:
                    raise self.error(istart, "expected a string or {...} stack-frame entry")

    # ------------------------------------------------------------ computation
    def parse_computation(self) -> HloComputation:
        text = self.text
        module = self.module
        assert module is not None
        lead_start = self.pos
        quick = self.quick_header(lead_start) if self.fast is not None else None
        if quick is not None:
            return self.read_computation(*quick)
        tok, start, end = next_token(text, lead_start)
        is_entry = False
        if tok == "ENTRY":
            is_entry = True
            tok, start, end = next_token(text, end)
        name = tok[1:] if tok.startswith("%") else tok
        if not IDENT.fullmatch(name) or tok.endswith(":"):
            raise self.error(start, "expected computation name")
        percent = tok.startswith("%")
        if module.get_computation(name) is not None:
            raise self.error(start, f"duplicate computation name {name!r}")
        pos = end
        tok, start, end = next_token(text, pos)
        has_signature = tok == "("
        if tok == "(":
            pos = match_group(text, start)
            pos = self.expect(pos, "->")
            sstart = skip_trivia(text, pos)
            send = shape_end(text, sstart)
            if send is None:
                raise self.error(sstart, "expected result shape after '->'")
            pos = send
            tok, start, end = next_token(text, pos)
        if tok != "{":
            raise self.error(start, "expected '{' to open the computation body")
        return self.read_computation(lead_start, is_entry, name, percent, has_signature, start, end)

    def quick_header(self, lead_start: int) -> tuple[int, bool, str, bool, bool, int, int] | None:
        """`read_computation`'s arguments for a header as XLA prints it; None to read it
        carefully (also when the name is taken, for the careful reader to say so)."""
        found = printed_header(self.text, lead_start)
        if found is None or self.module.get_computation(found[0]) is not None:  # type: ignore[union-attr]
            return None
        name, is_entry, percent, start, end = found
        return lead_start, is_entry, name, percent, True, start, end

    def read_computation(self, lead_start: int, is_entry: bool, name: str, percent: bool, has_signature: bool,
                         start: int, end: int) -> HloComputation:
        """The computation whose header spans `lead_start` to its body's `{` (at `start`)."""
        text, module = self.text, self.module
        assert module is not None
        span = ComputationSpan(text[lead_start:end], start, percent=percent, has_signature=has_signature)
        comp = HloComputation(name, is_entry=is_entry, span=span)
        module.add_computation(comp)
        if is_entry:
            if module.entry is not None:
                raise self.error(start, "more than one ENTRY computation")
            module.entry = comp
        state = ComputationState(comp)
        pos = self.parse_body(state, end)
        close_lead = span.body_end = pos  # the closing brace's lead starts here
        plain = _PLAIN_CLOSE.match(text, pos) is not None
        cstart = pos + 1 if plain else skip_trivia(text, pos)
        end = cstart + 1
        attrs, after = ([], end) if plain else split_attributes(text, end, single=True)
        for key, raw, off in attrs:
            if key != "execution_thread":
                raise self.error(off, f"unexpected computation attribute {key!r}")
            from ..syntax.escape import c_unescape

            comp.execution_thread = c_unescape(raw[1:-1])
            end = after
        span.tail = text[close_lead:end]
        self.pos = end
        self.finish_computation(state, cstart)
        return comp

    def finish_computation(self, state: ComputationState, offset: int) -> None:
        comp = state.comp
        if state.last is None:
            raise self.error(offset, f"computation {comp.name!r} has no instructions")
        if len(state.roots) > 1:
            second = state.roots[1]
            raise self.error(
                second.span.start if second.span.start >= 0 else offset,
                f"computation {comp.name!r} has more than one ROOT (first: {state.roots[0].name!r})",
            )
        comp.root = state.roots[0] if state.roots else state.last
        texts = state.numbers
        if texts == _COUNTING[: len(texts)]:  # as XLA prints them
            comp.parameters = state.parameters
            return
        numbers = [read_parameter_number(text) for text in texts]  # checked when read
        params: dict[int, HloInstruction] = {}
        for inst, number in zip(state.parameters, numbers):
            if number in params:
                raise self.error(
                    inst.span.start if inst.span.start >= 0 else offset,
                    f"duplicate parameter number {number} in {comp.name!r} "
                    f"({params[number].name!r} has it too)",
                )
            params[number] = inst
        if sorted(params) != list(range(len(params))):
            bad = next(p for n, p in params.items() if n >= len(params))
            raise self.error(
                bad.span.start if bad.span.start >= 0 else offset,
                f"parameter numbers of {comp.name!r} must be 0..{len(params) - 1}: "
                f"{bad.name!r} is parameter({bad.payload.strip() if bad.payload else ''})",
            )
        comp.parameters = [params[i] for i in range(len(params))]

    # ------------------------------------------------------------------ body
    def parse_body(self, state: ComputationState, pos: int) -> int:
        text = self.text
        n = len(text)
        resolve = self.resolve_references
        while True:
            if self.fast is not None:
                pos = self.fast.read(pos, state, resolve)
                if text.startswith("\n}", pos):
                    return pos
            q = skip_trivia(text, pos)
            if q >= n:
                last = state.last
                line = text[last.span.start : last.span.end] if last is not None and last.span.start >= 0 else ""
                if _SWALLOWED_CLOSE.search(line):
                    raise self.error(
                        last.span.start,  # type: ignore[union-attr]
                        f"unbalanced brackets in instruction {last.name!r}: a value opened here "
                        f"runs past the '}}' of computation {state.comp.name!r}",
                    )
                opened, _ = line_col(text, state.comp.span.start)  # type: ignore[union-attr]
                raise self.error(
                    q,
                    f"missing '}}' closing computation {state.comp.name!r} "
                    f"(opened on line {opened + self.first_line - 1})",
                )
            if text[q] == "}":
                return pos
            inst, end = self.slow_instruction(state, q)
            span = inst.span
            span.lead = intern_lead(text[pos:q])
            span.end = end
            pos = end

    def slow_instruction(self, state: ComputationState, q: int) -> tuple[HloInstruction, int]:
        """Careful reader for one instruction starting at `q`."""
        text = self.text
        comp = state.comp
        tok, start, end = next_token(text, q)
        is_root = False
        if tok == "ROOT":
            is_root = True
            tok, start, end = next_token(text, end)
        if tok.endswith(":") or not tok or not IDENT.fullmatch(tok.lstrip("%")):
            raise self.error(start, "expected instruction name")
        name = tok.lstrip("%")
        if state.lookup(name) is not None:
            raise self.error(start, f"duplicate instruction name {name!r} in computation {comp.name!r}")
        pos = self.expect(end, "=")
        span = SourceSpan("", q, percent=tok.startswith("%"))
        inst, pos = self.parse_instruction_rest(state, name, span, skip_trivia(text, pos))
        span.tail_start = pos
        attrs, pos = split_attributes(text, pos)
        seen: set[str] = set()
        for key, _, off in attrs:
            if key in seen:
                raise self.error(off - len(key) - 1, f"duplicate attribute {key!r}")
            seen.add(key)
        self.resolve_references(state, inst, attrs)
        state.append(inst)
        if is_root:
            state.roots.append(inst)
        return inst, pos

    def parse_instruction_rest(
        self, state: ComputationState, name: str, span: SourceSpan, pos: int
    ) -> tuple[HloInstruction, int]:
        """`shape? opcode(operands)` at `pos`; returns the new instruction and the end."""
        text = self.text
        end_of_shape = shape_end(text, pos)
        shape_text = None
        if end_of_shape is not None:
            shape_text = text[pos:end_of_shape]
            pos = skip_trivia(text, end_of_shape)
        tok, start, end = next_token(text, pos)
        opcode = tok
        if not is_known_opcode(opcode):
            if shape_text is None and opcode in PRIMITIVE_NAMES:
                raise self.error(start, "malformed shape")
            raise self.error(start, f"unknown opcode {opcode or 'end of input'!r}")
        if shape_text is None and shape_required(opcode):
            raise self.error(start, f"missing result shape: XLA cannot infer the shape of {opcode!r}")
        if not text.startswith("(", end):
            raise self.error(end, f"expected '(' after opcode {opcode!r}")
        popen = end
        payload = None
        operands: list[HloInstruction] = []
        refs: list[_Operand] = []
        operand_shapes = False
        if opcode in PAYLOAD_OPCODES:
            pclose = match_group(text, popen)
            payload = text[popen + 1 : pclose - 1]
            if opcode == "parameter":
                try:
                    read_parameter_number(payload)
                except TextSyntaxError as e:
                    raise self.error(popen + 1 + (e.offset or 0), e.message) from None
            pos = pclose
        else:
            refs, pos, operand_shapes = self.parse_operands(state, popen)
            operands = [self.resolve_operand(state, r) for r in refs]
        span.operand_shapes = operand_shapes
        inst = HloInstruction.from_source(name, opcode, shape_text, operands, payload, span)
        for ref in refs:
            if ref.nested is not None:
                ref.nested.span.host = inst
        return inst, pos

    def parse_operands(self, state: ComputationState, popen: int) -> tuple[list[_Operand], int, bool]:
        text = self.text
        refs: list[_Operand] = []
        pos = popen + 1
        with_shapes = False
        tok, start, end = next_token(text, pos)
        if tok == ")":
            return refs, end, False
        while True:
            start = shape_start = skip_trivia(text, pos)
            end_of_shape = shape_end(text, start)
            if end_of_shape is not None:
                with_shapes = True
                start = skip_trivia(text, end_of_shape)
            tok, tstart, tend = next_token(text, start)
            if not tok or tok in ",)" or not IDENT.fullmatch(tok.lstrip("%")) or tok.endswith(":"):
                raise self.error(tstart, "expected operand name")
            if text.startswith("(", tend) and not tok.startswith("%") and is_known_opcode(tok):
                nested, pos = self.parse_nested(state, tstart, shape_start)
                refs.append(_Operand(nested.name, tstart, nested=nested))
            else:
                pos = tend
                indices: tuple[int, ...] = ()
                run = _INDEX_RUN.match(text, pos)
                if run is not None:
                    indices = tuple(map(int, run.group()[1:].split("#")))
                    pos = run.end()
                if text.startswith("#", pos):
                    raise self.error(pos + 1, "expected a tuple index (int64) after '#'")
                refs.append(_Operand(tok.lstrip("%"), tstart, indices))
            tok, tstart, tend = next_token(text, pos)
            if tok == ")":
                return refs, tend, with_shapes
            if tok != ",":
                raise self.error(tstart, "expected ',' or ')' in operand list")
            pos = tend

    def parse_nested(self, state: ComputationState, at: int, shape_at: int) -> tuple[HloInstruction, int]:
        """A nested instruction operand such as `add(f32[] parameter(0), ...)`."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(at, f"nested instructions go deeper than {MAX_NESTING} levels")
        tok, _ = token_at(self.text, at)
        # XLA names them `<opcode>.anon`, then `<opcode>.anon.1`, `.2`, ...
        name = state.unique_name(f"{tok}.anon")
        # It has no line of its own: printed inside its host's, or regenerated.
        inst, pos = self.parse_instruction_rest(state, name, SourceSpan(percent=False), shape_at)
        state.append(inst)
        self.depth -= 1
        return inst, pos

    def resolve_operand(self, state: ComputationState, ref: _Operand) -> HloInstruction:
        if ref.nested is not None:
            return ref.nested
        base = state.lookup(ref.name)
        if base is None:
            raise self.error(ref.offset, f"use of undefined instruction {ref.name!r}")
        if not ref.indices:
            return base
        return self.compact_gte(state, base, ref.indices)

    def compact_gte(self, state: ComputationState, base: HloInstruction, indices: tuple[int, ...]) -> HloInstruction:
        """Expand `%t#i#j` into get-tuple-elements, shared between uses (as XLA's parser
        does): `t#i` is named `t_i`, `t#i#j` is `t_i_j`, and so on."""
        current = base
        for index in indices:
            key = (current, index)
            gte = state.compact.get(key)
            if gte is None:
                name = f"{current.name}_{index}"
                if len(name) > _MAX_COMPACT_GTE_NAME:
                    name = f"{base.name}_gte"
                gte = HloInstruction(state.unique_name(name), "get-tuple-element", None, [current],
                                     [("index", str(index))])
                gte.span = SourceSpan(percent=base.span.percent)
                gte.span.compact_gte_base = key
                state.append(gte)
                state.compact[key] = gte
            current = gte
        return current

    def resolve_references(
        self, state: ComputationState, inst: HloInstruction, attrs: list[tuple[str, str, int]]
    ) -> None:
        """Bind called computations and control predecessors named in the attributes."""
        assert self.module is not None
        bind_references(self.module, state.comp, state.lookup, inst, attrs, self._unknown_reference)

    def _unknown_reference(self, offset: int, message: str) -> NoReturn:
        raise self.error(offset, message)


def bind_references(module: HloModule, caller: HloComputation, lookup: Callable[[str], HloInstruction | None],
                    inst: HloInstruction, attrs: Iterable[tuple[str, str, int]],
                    unknown: Callable[[int, str], NoReturn]) -> None:
    """Bind what `inst` (of `caller`) names in its attributes `(key, raw value, offset)`, in
    their order: the computations it calls (a fusion's become fusion computations) and its
    control predecessors (found by `lookup` among the lines read before), an edge named
    twice once, as AddControlDependencyTo. `unknown(offset, message)` raises for a name
    bound to nothing, and for `caller` itself: as in XLA, a computation exists for calls
    only once it is read, so the call graph has no cycle (every analysis relies on that).
    The text reader and the proto reader's direct build share it, so the two build the
    same edges."""
    for key, raw, off in attrs:
        if key in _CALLED_KEYS:
            callees = []
            for cname, coff in name_list(raw, off):
                callee = module.get_computation(cname)
                if callee is None:
                    unknown(coff, f"unknown computation {cname!r}")
                if callee is caller:
                    unknown(coff, f"computation {cname!r} calls itself (a call graph has no cycles)")
                callees.append(callee)
                if inst.opcode == "fusion" and key == "calls":
                    callee.fusion_instruction = inst
            inst.called_computations = [*inst.called_computations, *callees]
        elif key == "control-predecessors":
            preds: dict[HloInstruction, None] = dict.fromkeys(inst.control_predecessors)
            for pname, poff in name_list(raw, off):
                pred = lookup(pname)
                if pred is None:
                    unknown(poff, f"unknown control predecessor {pname!r}")
                if pred in preds:
                    continue
                preds[pred] = None
                if isinstance(pred.control_successors, list):
                    pred.control_successors.append(inst)
                else:  # the shared empty tuple of a freshly read instruction
                    pred.control_successors = [inst]
            inst.control_predecessors = list(preds)


_CALLED_KEYS = frozenset(CALLED_COMPUTATION_KEYS)


sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
