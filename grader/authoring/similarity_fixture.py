"""A made-up class with planted copies, to measure and test the similarity report.

    python -m grader.authoring.similarity_fixture OUT_DIR --seed 0 [--count 200] [--unreadable]
    python -m grader similarity OUT --submissions OUT_DIR

Per stage, the *independent authors* are the reference (``solutions/``, the
``BEGIN/END SOLUTION`` marker lines dropped, as a student hands it in) and each
correct alternative in ``tests/alternatives/<stage>/``: complete modules written
apart. The class (``build``), deterministic for a seed:

* one student per independent author position (the reference in every stage,
  the first alternative of every stage, the second, ...);
* students who handed in the untouched starter;
* copiers: each copies the stages of one independent student (one stage left
  out: missing) through one transformation, made on the syntax tree and the
  token stream, never by regular expressions on the text:

  ``renamed``    every local variable and private helper renamed consistently
                 (parameters, attributes, keywords and the contract's names stay:
                 the tests call them), ``rename_locals``;
  ``reordered``  top-level functions and classes shuffled, ``reorder_defs``;
  ``restyled``   comments removed or replaced, blank lines moved, indentation
                 changed from 4 to 2 spaces, ``restyle``;
  ``all``        the three together;
  ``swapped``    one function replaced by the same function of another
                 independent author (a copy with one function rewritten),
                 ``swap_function``.

``build`` returns the ground truth: for each student and stage the
independent author its module comes from (``origin``; ``"starter"``; absent
when missing) and, for ``swapped``, the author of the borrowed function.
A pair of modules is a *planted* copy when both come from the same author.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import io
import random
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from grader.engine import stages

from .batch_fixture import _as_notebooks, _as_zip
from .starter import BEGIN, END

TRANSFORMS = ("renamed", "reordered", "restyled", "all", "swapped")
# Comments a copier writes instead of the author's; the first one checks that the report escapes code.
COMMENTS = ("# </pre><script>alert('copied')</script>", "# my own version", "# vectorised, no loop",
            "# shapes checked above", "# see the slides", "# works on the examples")
WORDS = ("alpha", "beta", "gamma", "delta", "omega", "tmp", "val", "res", "buf", "acc", "cur", "aux")


# ---------------------------------------------------------------- who wrote what

def authors(stage) -> dict:
    """{author: module text} of the independent authors of ``stage``: ``reference`` and each alternative."""
    found = {"reference": strip_markers(stage.solution.read_text(encoding="utf-8"))}
    for p in stage.alternatives:
        found[p.stem] = p.read_text(encoding="utf-8")
    return found


def strip_markers(source: str) -> str:
    """The reference as a student hands it in: without the ``# BEGIN/END SOLUTION`` lines."""
    return "".join(line for line in source.splitlines(keepends=True)
                   if not (BEGIN.match(line.rstrip("\n")) or END.match(line.rstrip("\n"))))


# ---------------------------------------------------------------- transformations

def _line_offsets(source: str) -> list:
    """Character offset of the start of each line (1-based rows: index 0 unused)."""
    offsets, pos = [0, 0], 0
    for line in source.splitlines(keepends=True):
        pos += len(line)
        offsets.append(pos)
    return offsets


def _char_col(source_lines: list, row: int, byte_col: int) -> int:
    """ast gives UTF-8 byte columns; this is the character column on the same line."""
    return len(source_lines[row - 1].encode("utf-8")[:byte_col].decode("utf-8"))


def _replace_spans(source: str, spans: list) -> str:
    """``spans`` = [(row, char col start, char col end, new text)], none overlapping."""
    offsets = _line_offsets(source)
    out, pos = [], 0
    for row, start, end, text in sorted(spans):
        a, b = offsets[row] + start, offsets[row] + end
        out += [source[pos:a], text]
        pos = b
    out.append(source[pos:])
    return "".join(out)


def _def_name_span(lines: list, node) -> tuple:
    """(row, start, end) of the name in ``def name`` / ``class name`` (found with tokenize)."""
    text = "".join(lines[node.lineno - 1:node.end_lineno])
    toks = tokenize.generate_tokens(io.StringIO(text).readline)
    seen_keyword = False
    for tok in toks:
        if tok.type == tokenize.NAME and tok.string in ("def", "class"):
            seen_keyword = True
        elif seen_keyword and tok.type == tokenize.NAME:
            return node.lineno + tok.start[0] - 1, tok.start[1], tok.end[1]
    raise ValueError(f"no name after def/class at line {node.lineno}")


def rename_locals(source: str, rng: random.Random, keep=()) -> str:
    """Rename, consistently, every function-local variable and every top-level helper not in ``keep``
    (the contract's names). Parameters, attributes, keyword names, imports, globals and builtins stay.
    The result's syntax tree equals the original's with the names mapped (checked)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    protected = set(dir(builtins)) | set(keep)
    local, helpers = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            protected.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            protected.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            protected.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            protected.add(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    local.add(sub.id)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name not in keep:
            helpers.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):  # module constants stay
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name):
                    protected.add(sub.id)
    names = sorted((local | {h.name for h in helpers}) - protected)
    taken = protected | {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    mapping = {}
    for name in names:
        new = f"{rng.choice(WORDS)}_{name[:1].lstrip('_') or 'x'}{rng.randrange(100)}"
        while new in taken:
            new += "_"
        taken.add(new)
        mapping[name] = ("_" if name.startswith("_") else "") + new
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in mapping:
            row = node.lineno
            spans.append((row, _char_col(lines, row, node.col_offset), _char_col(lines, row, node.end_col_offset),
                          mapping[node.id]))
    for h in helpers:
        if h.name in mapping:
            spans.append((*_def_name_span(lines, h), mapping[h.name]))
    renamed = _replace_spans(source, spans)
    _check_same_tree(tree, renamed, mapping)
    return renamed


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping):
        self.mapping = mapping

    def visit_Name(self, node):
        node.id = self.mapping.get(node.id, node.id)
        return node


def _check_same_tree(tree, renamed: str, mapping: dict) -> None:
    for node in tree.body:  # the helpers renamed are top-level ones
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.name = mapping.get(node.name, node.name)
    expected = ast.dump(_Rename(mapping).visit(tree))
    if ast.dump(ast.parse(renamed)) != expected:
        raise AssertionError("renaming changed more than the names")


def _first_row(node) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def _defined_before_use(node) -> set:
    """Names a def or class statement evaluates when it runs (bases, decorators, defaults, class body)."""
    parts = list(getattr(node, "decorator_list", []))
    if isinstance(node, ast.ClassDef):
        parts += node.bases + node.keywords
        parts += [s for s in node.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    else:
        parts += node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
    return {n.id for p in parts for n in ast.walk(p) if isinstance(n, ast.Name)}


def reorder_defs(source: str, rng: random.Random) -> str:
    """Shuffle each run of consecutive top-level functions and classes (with the comments and blank
    lines above each); a class stays after what its bases, decorators or body use at definition time."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    runs, current = [], []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            current.append(node)
        else:
            if len(current) > 1:
                runs.append(current)
            current = []
    if len(current) > 1:
        runs.append(current)
    out = list(lines)
    for run in reversed(runs):  # from the bottom, so that earlier rows stay valid
        starts = [_first_row(run[0])] + [run[i - 1].end_lineno + 1 for i in range(1, len(run))]
        chunks = ["".join(lines[s - 1:n.end_lineno]) for s, n in zip(starts, run)]
        chunks = [c if c.endswith("\n") else c + "\n" for c in chunks]
        names = [n.name for n in run]
        needs = [_defined_before_use(n) & set(names) for n in run]
        order = list(range(len(run)))
        for _ in range(200):
            candidate = order[:]
            rng.shuffle(candidate)
            placed, ok = set(), True
            for i in candidate:
                ok = ok and needs[i] <= placed
                placed.add(names[i])
            if ok and candidate != order:
                order = candidate
                break
        out[starts[0] - 1:run[-1].end_lineno] = [chunks[i] for i in order]
    result = "".join(out)
    ast.parse(result)
    return result


def restyle(source: str, rng: random.Random, comments=COMMENTS) -> str:
    """Comments removed or replaced (by ``comments`` in turn), blank lines removed and others added,
    indentation 4 -> 2 spaces (continuation lines re-indented too; text inside strings untouched)."""
    lines = source.splitlines(keepends=True)
    inside_string, logical, comment_at = set(), {}, {}
    depth, at_start = 0, True
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        kind = tok.type
        if kind == tokenize.INDENT:
            depth += 1
        elif kind == tokenize.DEDENT:
            depth -= 1
        elif kind == tokenize.NEWLINE:
            at_start = True
        elif kind == tokenize.COMMENT:
            comment_at[tok.start[0]] = tok.start[1]
        elif kind not in (tokenize.NL, tokenize.ENDMARKER):
            if at_start:
                logical[tok.start[0]] = depth
                at_start = False
            if kind == tokenize.STRING and tok.end[0] > tok.start[0]:
                inside_string.update(range(tok.start[0] + 1, tok.end[0] + 1))
    out, used, level = [], 0, 0
    for row, line in enumerate(lines, start=1):
        text = line.rstrip("\r\n")
        if row in comment_at:
            col = comment_at[row]
            code = text[:col].rstrip()
            if rng.random() < 0.5:
                text = code
            else:
                text = (code + "  " if code.strip() else text[:col]) + comments[used % len(comments)]
                used += 1
            if not code.strip() and not text.strip():
                continue  # a comment line removed
        if row in inside_string:
            out.append(text + "\n")
            continue
        if not text.strip():
            continue  # blank lines go; some come back below
        if row in logical:
            level = logical[row]
            if out and rng.random() < 0.2:
                out.append("\n")
            out.append("  " * level + text.lstrip() + "\n")
        else:  # a continuation line inside brackets or after a backslash
            out.append("  " * (level + 2) + text.lstrip() + "\n")
    result = "".join(out)
    ast.parse(result)
    return result


def _functions(tree) -> dict:
    """{qualified name: node} of top-level functions and methods of top-level classes."""
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found[f"{node.name}.{sub.name}"] = sub
    return found


def _free_names(fn) -> set:
    bound = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    bound |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


def _module_names(tree) -> set:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def swap_function(source: str, donor: str, rng: random.Random) -> tuple:
    """``source`` with one function (or method) replaced by the same-named one of ``donor``;
    returns (new source, qualified name). Prefers a function whose donor version uses only names
    ``source`` defines, and one that really differs."""
    tree, dtree = ast.parse(source), ast.parse(donor)
    mine, theirs = _functions(tree), _functions(dtree)
    available = _module_names(tree) | set(dir(builtins))
    common = [q for q in mine if q in theirs and ast.dump(mine[q]) != ast.dump(theirs[q])]
    if not common:
        raise ValueError("no function to swap")
    fits = [q for q in common if _free_names(theirs[q]) <= available]
    name = rng.choice(fits or common)
    node, dnode = mine[name], theirs[name]
    lines, dlines = source.splitlines(keepends=True), donor.splitlines(keepends=True)
    shift = node.col_offset - dnode.col_offset
    block = dlines[_first_row(dnode) - 1:dnode.end_lineno]
    if shift > 0:
        block = [" " * shift + ln if ln.strip() else ln for ln in block]
    elif shift < 0:
        block = [ln[-shift:] if ln[:-shift].strip() == "" else ln for ln in block]
    block = [b if b.endswith("\n") else b + "\n" for b in block]
    result = "".join(lines[:_first_row(node) - 1] + block + lines[node.end_lineno:])
    ast.parse(result)
    return result, name


def transform(kind: str, source: str, rng: random.Random, *, keep=(), donor: str | None = None) -> tuple:
    """(new source, borrowed function or "") after the transformation ``kind`` (one of TRANSFORMS)."""
    if kind == "renamed":
        return rename_locals(source, rng, keep), ""
    if kind == "reordered":
        return reorder_defs(source, rng), ""
    if kind == "restyled":
        return restyle(source, rng), ""
    if kind == "all":
        return restyle(reorder_defs(rename_locals(source, rng, keep), rng), rng), ""
    if kind == "swapped":
        return swap_function(source, donor, rng)
    raise ValueError(f"unknown transformation {kind!r}")


# ---------------------------------------------------------------- the class

@dataclass
class Student:
    id: str
    role: str                   # "author <position>", "starter", "copier <transform> of <student>", "unreadable"
    format: str = "folder"
    origin: dict = field(default_factory=dict)     # stage -> independent author, or "starter"
    borrowed: dict = field(default_factory=dict)   # stage -> (author, function) of a swapped-in function


def contract_names(stage) -> set:
    """The names a submission must keep: everything the starter defines at top level."""
    return _module_names(ast.parse(stage.starter.read_text(encoding="utf-8")))


def build(out: Path, seed: int = 0, *, count: int | None = None, stage_ids=None, starter_only: int = 2,
          unreadable: bool = False, formats=("folder", "zip", "notebooks")) -> list:
    """Write the class into ``out`` (one folder, zip or folder of notebooks per student); return [Student].

    ``count`` (default: the independent students, ``starter_only`` and one copier per transformation)
    adds copiers, transformations in turn. ``unreadable`` adds a corrupt zip and a folder whose stage
    module is not UTF-8 (next to a readable one)."""
    rng = random.Random(seed)
    chosen = stages.resolve(stage_ids)
    texts = {s.id: authors(s) for s in chosen}
    positions = max(len(t) for t in texts.values())
    plan = [("author", i) for i in range(positions)] + [("starter", None)] * starter_only
    n_copiers = len(TRANSFORMS) if count is None else max(0, count - len(plan))
    plan += [("copier", TRANSFORMS[i % len(TRANSFORMS)]) for i in range(n_copiers)]
    ids = [f"student_{i + 1:03d}" for i in range(len(plan))]
    rng.shuffle(ids)  # ids say nothing about the role
    made, modules = [], {}
    for sid, (kind, arg) in zip(ids, plan):
        st, files = Student(sid, ""), {}
        if kind == "author":
            st.role = f"author {arg}"
            for s in chosen:
                names = list(texts[s.id])
                if arg < len(names):
                    st.origin[s.id], files[s.id] = names[arg], texts[s.id][names[arg]]
        elif kind == "starter":
            st.role = "starter"
            for s in chosen:
                st.origin[s.id], files[s.id] = "starter", s.starter.read_text(encoding="utf-8")
        made.append(st)
        modules[sid] = files
    sources = [m for m in made if m.role.startswith("author")]
    for st, (kind, arg) in zip(made, plan):
        if kind != "copier":
            continue
        src = rng.choice(sources)
        st.role = f"copier {arg} of {src.id}"
        left_out = rng.choice(sorted(src.origin)) if len(src.origin) > 1 else None
        for s in chosen:
            if s.id not in src.origin or s.id == left_out:
                continue
            author = src.origin[s.id]
            donors = [a for a in texts[s.id] if a != author]
            donor = rng.choice(donors) if donors else None
            kind_here = arg if (arg != "swapped" or donor) else "renamed"
            text, fn = transform(kind_here, texts[s.id][author], rng, keep=contract_names(s),
                                 donor=texts[s.id][donor] if donor else None)
            st.origin[s.id] = author
            if fn:
                st.borrowed[s.id] = (donor, fn)
            modules[st.id][s.id] = text
    out.mkdir(parents=True, exist_ok=True)
    for st in made:
        st.format = formats[rng.randrange(len(formats))] if st.role != "starter" else "folder"
        _write(out, st, modules[st.id])
    if unreadable:
        (out / "broken_zip.zip").write_bytes(b"PK\x03\x04 this is not really a zip file")
        made.append(Student("broken_zip", "unreadable", "zip"))
        folder = out / "latin1"
        folder.mkdir()
        first = chosen[0]
        (folder / first.module_file).write_bytes("# écrit à la main\n".encode("latin-1") + b"x = 1\n")
        st = Student("latin1", "unreadable", "folder")
        if len(chosen) > 1:  # a readable stage next to it: still compared
            second = chosen[1]
            (folder / second.module_file).write_text(texts[second.id]["reference"], encoding="utf-8")
            st.origin[second.id] = "reference"
        made.append(st)
    return made


def _write(out: Path, st: Student, files: dict) -> None:
    work = out / f".work-{st.id}"
    work.mkdir()
    for stage_id, text in files.items():
        (work / f"{stage_id}.py").write_text(text, encoding="utf-8")
    if st.format == "zip":
        _as_zip(work, out / f"{st.id}.zip", inner=st.id)
    elif st.format == "notebooks":
        _as_notebooks(work, out / st.id)
    else:
        work.rename(out / st.id)
        return
    for p in work.iterdir():
        p.unlink()
    work.rmdir()


def planted(made: list, stage_id: str) -> tuple:
    """The pairs of ids whose modules of ``stage_id`` are copies of one author (sorted id pairs),
    and the pairs that share only a swapped-in function (neither copies nor independent)."""
    have = sorted((m.id, m.origin[stage_id]) for m in made if m.origin.get(stage_id, "starter") != "starter")
    copies, partial = set(), set()
    for i, (a, oa) in enumerate(have):
        for b, ob in have[i + 1:]:
            if oa == ob:
                copies.add((a, b))
            else:
                borrowed_a = next((m.borrowed.get(stage_id) for m in made if m.id == a), None)
                borrowed_b = next((m.borrowed.get(stage_id) for m in made if m.id == b), None)
                if (borrowed_a and borrowed_a[0] == ob) or (borrowed_b and borrowed_b[0] == oa):
                    partial.add((a, b))
    return copies, partial


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m grader.authoring.similarity_fixture",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, help="students in all (default: authors, 2 starters, one copier each)")
    p.add_argument("--stages", help="comma-separated stage ids")
    p.add_argument("--unreadable", action="store_true", help="also a corrupt zip and a non-UTF-8 module")
    args = p.parse_args(argv)
    stage_ids = [s for s in (args.stages or "").split(",") if s] or None
    made = build(Path(args.out_dir), args.seed, count=args.count, stage_ids=stage_ids, unreadable=args.unreadable)
    for st in made:
        print(f"{st.id:14} {st.format:9} {st.role}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
