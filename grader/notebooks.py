"""Notebooks: tagged cells become the stage module.

Two halves live here.

**Grading side** (``convert``; used by ``grader.submission``). A notebook is
read and validated with nbformat; only code cells tagged ``solution`` or
``course`` are kept, in order, joined by two blank lines. A kept cell with a
shell escape (``!cmd``) or a magic (``%time``, ``%%bash``) is refused with a
message, since it would not run as plain Python. A notebook must be named after
its stage (``a03_attention.ipynb``). Nothing here executes submitted code.

**Student side** (``setup``, ``check``, ``earlier_stages``; called from the
generated notebooks, see ``grader.notebook_build``). ``setup`` makes the earlier
stages a notebook imports (``from a05_encoder import ...``) importable in the
kernel; ``check`` writes this notebook's tagged cells, as last saved, into a
temporary folder and runs ``python -m grader check STAGE FOLDER`` on it, printing
the report instead of raising.
"""
from __future__ import annotations

import ast
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KEEP_TAGS = {"solution", "course"}
CELL_SEPARATOR = "\n\n\n"          # two blank lines between cells, as between top-level definitions
MAGIC = re.compile(r"^\s*(!|%)", re.MULTILINE)
NOTEBOOK = re.compile(r"^(a\d\d_[a-z0-9_]+)\.ipynb$")
STAGE_IMPORT = re.compile(r"^\s*(?:from|import)\s+(a\d\d_[a-z0-9_]+)\b", re.MULTILINE)


# ---------------------------------------------------------------------------
# Grading side
# ---------------------------------------------------------------------------

class NotebookError(ValueError):
    """A notebook that cannot be turned into a stage module; the message says why."""


def read(text: str, name: str = "notebook"):
    """Parse and validate a notebook (nbformat v4); raise ``NotebookError`` with a readable reason.

    Uses nbformat when it is installed (it is in the course venv); a bare
    student bundle without it falls back to a structural check of the JSON.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{name} is not a readable Jupyter notebook: its JSON is broken at line {exc.lineno} "
                            f"({exc.msg}); was it saved from Jupyter/Colab as .ipynb?") from None
    if not isinstance(data, dict) or "cells" not in data or "nbformat" not in data:
        raise NotebookError(f"{name} is not a valid Jupyter notebook (no 'cells' or 'nbformat' field)")
    try:
        import nbformat
    except ImportError:  # pragma: no cover - the course venv has nbformat
        if data.get("nbformat") != 4 or not isinstance(data.get("cells"), list):
            raise NotebookError(f"{name} is not a valid Jupyter notebook in format 4") from None
        return data
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # missing cell ids etc. are repaired, not worth a warning
        try:
            nb = nbformat.reads(text, as_version=4)
            try:
                nbformat.validate(nb)
            except nbformat.ValidationError:
                # outputs play no part in grading: a notebook whose only fault is in an output
                # (some frontends write odd ones) is read without them
                for cell in nb.get("cells", []):
                    if isinstance(cell, dict) and cell.get("cell_type") == "code":
                        cell["outputs"], cell["execution_count"] = [], None
                nbformat.validate(nb)
        except Exception as exc:  # nbformat.ValidationError, or a crash on a badly shaped field
            reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            raise NotebookError(f"{name} is not a valid Jupyter notebook ({str(reason).splitlines()[0][:200]})") \
                from None
    return nb


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _tags(cell) -> set:
    tags = cell.get("metadata", {}).get("tags", [])
    return set(tags) if isinstance(tags, list) else set()


def _magic_line(source: str):
    """The first shell escape / magic line of a cell, or None. Plain Python never has one."""
    try:
        ast.parse(source)
        return None  # parses as Python: a '!' or '%' at a line start can only be inside a string
    except SyntaxError:
        match = MAGIC.search(source)
        return source[match.start():].strip().splitlines()[0] if match else None


def cells_to_source(nb, name: str) -> str:
    """The stage module: every code cell tagged ``solution`` or ``course``, in order."""
    kept, code_cells = [], 0
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        code_cells += 1
        if not _tags(cell) & KEEP_TAGS:
            continue
        source = _source(cell)
        magic = _magic_line(source)
        if magic is not None:
            raise NotebookError(f"{name}: cell {i + 1} (tagged {'/'.join(sorted(_tags(cell) & KEEP_TAGS))}) runs "
                                f"a shell command or magic ({magic[:40]!r}); graded cells must be plain Python. "
                                "Move it to an untagged cell.")
        kept.append(source)
    if not kept:
        raise NotebookError(f"{name}: none of its {code_cells} code cells is tagged 'solution' or 'course', so "
                            "there is nothing to grade; did the cell tags get removed? Tag your code cells "
                            "'solution' again (Jupyter: the gear / property inspector; Colab: hand in the .py "
                            "file instead)")
    return CELL_SEPARATOR.join(kept) + "\n"


def notebook_to_source(path, name: str | None = None) -> str:
    """Read the notebook at ``path`` and return its stage module source (``NotebookError`` if impossible)."""
    path = Path(path)
    name = name or path.name
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"{name} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return cells_to_source(read(text, name), name)


def convert(paths: list, dest: Path) -> list:
    """Write ``aNN_name.py`` into ``dest`` for each notebook; return error lines (one per bad notebook).

    Each error line starts with the notebook's file name, i.e. with its stage id.
    """
    errors = []
    for path in paths:
        name = Path(path).name
        match = NOTEBOOK.match(name)
        if not match:
            errors.append(f"{name}: a notebook must be named after its stage, e.g. a03_attention.ipynb; ignored")
            continue
        try:
            source = notebook_to_source(path, name)
        except (NotebookError, OSError) as exc:
            message = str(exc)
            if not message.startswith(name):
                message = f"{name}: {message}"
            errors.append(f"{message} (the stage scores zero)")
            continue
        (Path(dest) / f"{match.group(1)}.py").write_text(source, encoding="utf-8")
    return errors


# ---------------------------------------------------------------------------
# Student side: helpers the generated notebooks call
# ---------------------------------------------------------------------------

_state: dict = {}


def _say(text: str) -> None:
    print(text, flush=True)


def _starter_text(root: Path, name: str):
    """starter/<name>.py without the generated header (what an untouched notebook holds), or None."""
    path = Path(root) / "starter" / f"{name}.py"
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    try:
        from .starter import HEADER
    except ImportError:  # pragma: no cover
        HEADER = ""
    return text.removeprefix(HEADER)


def _saved(path: Path) -> str:
    return time.strftime("%H:%M:%S", time.localtime(path.stat().st_mtime))


def earlier_stages(stage_id: str, source: str | None = None) -> dict:
    """The earlier stage modules ``stage_id`` imports (recursively): {name: (source, where it came from)}.

    For each, your notebook of that stage if you changed its code (as last
    saved), else ``starter/<name>.py`` (your .py work, or the stub).
    """
    root, start = Path(_state["root"]), Path(_state["notebook_dir"])
    found: dict = {}
    todo = sorted(set(STAGE_IMPORT.findall(source if source is not None else (_starter_text(root, stage_id) or ""))))
    while todo:
        name = todo.pop(0)
        if name in found or name == stage_id:
            continue
        text, where = None, None
        untouched = _starter_text(root, name)
        for nb_path in (start.parent / name / f"{name}.ipynb", root / "assignments" / name / f"{name}.ipynb"):
            if nb_path.is_file():
                try:
                    candidate = notebook_to_source(nb_path)
                except NotebookError as exc:
                    _say(f"note: {exc}; using starter/{name}.py instead")
                    break
                if untouched is None or candidate.strip() != untouched.strip():
                    text, where = candidate, f"your notebook {nb_path} (saved {_saved(nb_path)})"
                break
        if text is None and untouched is not None:
            path = root / "starter" / f"{name}.py"
            text, where = path.read_text(encoding="utf-8"), f"{path}"
        if text is None:
            _say(f"note: cannot find stage {name} (neither a notebook nor starter/{name}.py)")
            continue
        found[name] = (text, where)
        todo.extend(sorted(set(STAGE_IMPORT.findall(text)) - set(found)))
    return found


def setup(stage_id: str, root, also=()) -> None:
    """Called by a notebook's first cell: remember where things are, work from the course folder, and
    make the earlier stages this one imports (and ``also``, used by its pictures) importable."""
    root = Path(root).resolve()
    if _state.get("stage") != stage_id or "notebook_dir" not in _state:
        _state["notebook_dir"] = str(Path.cwd().resolve())  # the first call runs in the notebook's folder
    _state.update(stage=stage_id, root=str(root))
    os.chdir(root)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    imports = "\n".join([_starter_text(root, stage_id) or ""] + [f"import {name}" for name in also])
    earlier = earlier_stages(stage_id, imports)
    if earlier:
        if not _state.get("modules"):
            _state["modules"] = tempfile.mkdtemp(prefix="course-modules-")
            atexit.register(shutil.rmtree, _state["modules"], ignore_errors=True)
        folder = Path(_state["modules"])
        for old in folder.glob("a[0-9][0-9]_*.py"):
            old.unlink()
        for name, (text, where) in earlier.items():
            (folder / f"{name}.py").write_text(text, encoding="utf-8")
            sys.modules.pop(name, None)  # re-running this cell picks up your latest saved version
            _say(f"{name} is imported from {where}")
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    _say(f"course folder: {root}; stage {stage_id}; ready")


def _this_notebook(stage_id: str):
    """(notebook dict, description) of the notebook being run, as last saved (live on Colab)."""
    if "google.colab" in sys.modules:  # Colab keeps the notebook in the browser; ask it for the current one
        try:
            from google.colab import _message  # type: ignore
            nb = _message.blocking_request("get_ipynb", request="", timeout_sec=30)["ipynb"]
            return nb, "this notebook (as shown in Colab)"
        except Exception:  # noqa: BLE001 - fall back to the saved file
            pass
    candidates = []
    try:
        from IPython import get_ipython
        shell = get_ipython()
        if shell is not None and shell.user_ns.get("__vsc_ipynb_file__"):
            candidates.append(Path(shell.user_ns["__vsc_ipynb_file__"]))  # VS Code
    except ImportError:
        pass
    if os.environ.get("JPY_SESSION_NAME", "").endswith(".ipynb"):             # Jupyter server 2
        candidates.append(Path(os.environ["JPY_SESSION_NAME"]))
    start = Path(_state.get("notebook_dir", Path.cwd()))
    root = Path(_state.get("root", Path.cwd()))
    candidates += [start / f"{stage_id}.ipynb", *_same_stage_notebooks(start, stage_id),
                   root / "assignments" / stage_id / f"{stage_id}.ipynb"]
    for path in candidates:
        if path.is_absolute() and path.is_file() and _is_stage_notebook(path, stage_id):
            note = "" if path.name == f"{stage_id}.ipynb" else \
                f"\n(hand it in as {stage_id}.ipynb: the grader finds notebooks by their name)"
            return path, f"{path} as last saved at {_saved(path)} (save with Ctrl-S before checking){note}"
    raise FileNotFoundError(f"cannot find this notebook ({stage_id}.ipynb) in {start}; keep its name, "
                            f"or save your code into starter/{stage_id}.py and run `python -m grader check "
                            f"{stage_id}` in a terminal")


def _is_stage_notebook(path: Path, stage_id: str) -> bool:
    if path.name == f"{stage_id}.ipynb":
        return True
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("course", {}).get(
            "stage") == stage_id
    except (OSError, ValueError, AttributeError):
        return False


def _same_stage_notebooks(folder: Path, stage_id: str) -> list:
    """Renamed copies (``a03_attention (1).ipynb``) of this stage's notebook in ``folder``, newest first."""
    try:
        found = [p for p in folder.glob("*.ipynb") if p.name != f"{stage_id}.ipynb" and _is_stage_notebook(p, stage_id)]
    except OSError:
        return []
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def check(stage_id: str, timeout_s: float = 900) -> None:
    """Run the public tests of ``stage_id`` on this notebook's tagged cells and print the report.

    Never raises: whatever goes wrong is printed, so the notebook keeps running.
    """
    if "root" not in _state:
        _say("Run the first (setup) cell of this notebook, then this one again.")
        return
    root = Path(_state["root"])
    work = Path(tempfile.mkdtemp(prefix="course-check-"))
    try:
        try:
            nb, description = _this_notebook(stage_id)
            if isinstance(nb, Path):
                source = notebook_to_source(nb, nb.name)
            else:
                source = cells_to_source(read(json.dumps(nb), f"{stage_id}.ipynb"), f"{stage_id}.ipynb")
        except (NotebookError, FileNotFoundError) as exc:
            _say(f"Cannot check: {exc}")
            return
        _say(f"Checking {description}")
        (work / f"{stage_id}.py").write_text(source, encoding="utf-8")
        for name, (text, where) in earlier_stages(stage_id, source).items():
            (work / f"{name}.py").write_text(text, encoding="utf-8")
            _say(f"  with {name} from {where}")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "JPY_", "MPLBACKEND"))}
        env["PYTHONPATH"] = str(root)
        env.setdefault("COLUMNS", "110")
        try:
            proc = subprocess.run([sys.executable, "-m", "grader", "check", stage_id, str(work)], cwd=root,
                                  env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _say(f"The check did not finish within {timeout_s:.0f} s; is something in your code very slow "
                 "or waiting forever?")
            return
        _say(proc.stdout.rstrip())
        if proc.returncode != 0:
            _say(proc.stderr.rstrip()[-3000:])
            _say(f"(the check stopped with exit code {proc.returncode})")
        pending = proc.stdout.count("NotImplementedError")
        if pending:
            _say(f"\n{pending} place(s) above reached a `raise NotImplementedError`: write those parts, "
                 "save, and run this cell again.")
    finally:
        shutil.rmtree(work, ignore_errors=True)
