"""The cells a generated notebook runs: ``setup`` (first cell) and ``check``.

``setup`` makes the earlier stages a notebook imports (``from a05_encoder import
...``) importable in the kernel; ``check`` writes this notebook's tagged cells,
as last saved, into a temporary folder and runs ``python -m grader check STAGE
FOLDER`` on it, printing the report instead of raising. See
``grader.authoring.notebook_build`` for how the notebooks are made.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader import i18n
from grader.engine.notebooks import STAGE_IMPORT, NotebookError, cells_to_source, notebook_to_source, read
from grader.engine.stages import STARTER_HEADER
from grader.i18n import tr

_state: dict = {}


def _say(text: str) -> None:
    print(text, flush=True)


def _starter_text(root: Path, name: str):
    """starter/<name>.py without the generated header (what an untouched notebook holds), or None."""
    path = Path(root) / "starter" / f"{name}.py"
    if not path.is_file():
        return None
    return path.read_text(encoding="utf-8").removeprefix(STARTER_HEADER)


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


def check(stage_id: str, timeout_s: float = 900, language: str | None = None) -> None:
    """Run the public tests of ``stage_id`` on this notebook's tagged cells and print the report, in
    ``language`` ("en", "ko" or "both"; default: the locale, as ``grader check``).

    Never raises: whatever goes wrong is printed, so the notebook keeps running.
    """
    language = i18n.choose(language, default=i18n.from_environment())

    def say(text) -> None:
        _say(i18n.render(text, language))

    if "root" not in _state:
        say(tr("Run the first (setup) cell of this notebook, then this one again."))
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
            say(tr("Cannot check: {problem}", problem=exc.args[0] if exc.args else exc))
            return
        say(tr("Checking {notebook}", notebook=description))
        (work / f"{stage_id}.py").write_text(source, encoding="utf-8")
        for name, (text, where) in earlier_stages(stage_id, source).items():
            (work / f"{name}.py").write_text(text, encoding="utf-8")
            say(tr("  with {module} from {where}", module=name, where=where))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "JPY_", "MPLBACKEND"))}
        env["PYTHONPATH"] = str(root)
        env.setdefault("COLUMNS", "110")
        try:
            proc = subprocess.run([sys.executable, "-m", "grader", "check", stage_id, str(work), "--lang", language],
                                  cwd=root, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            say(tr("The check did not finish within {seconds} s; is something in your code very slow or waiting "
                   "forever?", seconds=f"{timeout_s:.0f}"))
            return
        _say(proc.stdout.rstrip())
        if proc.returncode != 0:
            _say(proc.stderr.rstrip()[-3000:])
            say(tr("(the check stopped with exit code {code})", code=proc.returncode))
        pending = proc.stdout.count("NotImplementedError")
        if pending:
            say(tr("\n{count} place(s) above reached a `raise NotImplementedError`: write those parts, save, and "
                   "run this cell again.", count=pending))
    finally:
        shutil.rmtree(work, ignore_errors=True)
