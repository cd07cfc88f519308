"""Collecting the class's git repositories: ``python -m grader collect REPOS_DIR``.

REPOS_DIR holds one clone per student, as Classroom 50's ``gh teacher download`` (or the retired
GitHub Classroom's ``gh classroom clone student-repos``) writes them: ``<prefix><github user>/``;
``[classroom] repo_prefix`` of course.toml, or ``--prefix``, is stripped to give the student's id.
For each clone, ``collect``:

1. reads the commit that is HEAD now and the stage files in it (``starter/aNN_<name>.py``, the
   template's layout; else the shallowest folder holding stage modules);
2. records in the gradebook, per student and stage, that commit, the file's blob and **when that
   blob was first seen**: now, or earlier when the clone's reflog shows that HEAD held it before
   (the reflog is written by the instructor's own git when it cloned or pulled; a commit's date is
   written by the student and is never used). A blob already recorded keeps its first time;
3. writes ``OUT/collected/<student>/`` with the version of each stage that counts under the late
   policy (``late.choose``): the latest one, or with ``late_changes = "ignore"`` the last one that
   was on time, never one first seen after the cut-off. ``grader batch OUT/collected --out OUT``
   grades exactly that, and its reports say when each stage was first seen and what lateness cost.

Run it at each deadline (a cron job; ``--pull`` first runs ``git pull --ff-only`` in each clone, with
your own git configuration, so that its credentials reach GitHub), or whenever; work first seen after
a deadline is late by the time it was first seen. Reading a clone runs only git plumbing that reads
objects (rev-parse, ls-tree, cat-file, reflog), with system and global configuration ignored and
``core.fsmonitor`` off, so nothing a repository asks for is run.
"""
from __future__ import annotations

import datetime as dt
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.engine import stages, submission

from . import late, term
from .gradebook import Gradebook, default_url, now, redact

GIT_TIMEOUT_S = 60
PULL_TIMEOUT_S = 120
MAX_REFLOG = 200          # reflog entries looked at per repository (each is one ls-tree)
PREFERRED_FOLDER = "starter"
NO_GIT = "git is not installed (or not on PATH); `grader collect` reads the clones with it"


class GitUnavailable(RuntimeError):
    """The machine has no usable git: a grader error, not the student's."""


class RepoUnreadable(Exception):
    """This clone cannot be read; the others still are."""


def blob_id(data: bytes) -> str:
    """Git's (SHA-1) blob id of a file's bytes: how the batch finds when the file it grades was first seen."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _git(folder: Path, *args: str) -> bytes:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0",
           "HOME": os.devnull}
    cmd = ["git", "-c", "safe.directory=*", "-c", "core.fsmonitor=false", "--no-replace-objects",
           "-C", str(folder), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, env=env, timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise GitUnavailable(NO_GIT) from None
    except subprocess.TimeoutExpired:
        raise RepoUnreadable(f"git {args[0]} took more than {GIT_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        raise RepoUnreadable(f"git {args[0]}: {err[-1] if err else f'exit {proc.returncode}'}")
    return proc.stdout


def pull(folder: Path) -> str:
    """``git pull --ff-only`` in a clone, as the instructor (their credentials); '' or why it failed."""
    try:
        proc = subprocess.run(["git", "-C", str(folder), "pull", "--ff-only", "--quiet"], capture_output=True,
                              text=True, timeout=PULL_TIMEOUT_S, stdin=subprocess.DEVNULL,
                              env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    except subprocess.TimeoutExpired:
        return f"git pull took more than {PULL_TIMEOUT_S} s"
    err = proc.stderr.strip().splitlines()
    return "" if proc.returncode == 0 else f"git pull failed ({err[-1] if err else proc.returncode})"


def stage_files(folder: Path, commit: str) -> dict:
    """stage id -> (path, git object id) of the stage modules in ``commit``'s tree (regular files only)."""
    by_dir: dict = {}
    for entry in _git(folder, "ls-tree", "-r", "-z", "--full-tree", commit).split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        mode, kind, obj = meta.decode().split()
        path = raw_path.decode(errors="replace")
        name = path.rsplit("/", 1)[-1]
        if kind == "blob" and mode in ("100644", "100755") and submission.STAGE_FILE.match(name):
            by_dir.setdefault(path.rpartition("/")[0], {})[name[:-3]] = (path, obj)
    if not by_dir:
        return {}
    chosen = PREFERRED_FOLDER if PREFERRED_FOLDER in by_dir else min(by_dir, key=lambda d: (d.count("/") + bool(d), d))
    return by_dir[chosen]


def reflog(folder: Path) -> list:
    """[(commit, when HEAD became it in this clone)], newest first: written by the instructor's git."""
    out = []
    try:
        text = _git(folder, "reflog", "show", "--date=unix", "--format=%H %gd", "HEAD").decode()
    except RepoUnreadable:  # no reflog (a copied folder, logAllRefUpdates off): first seen = now
        return out
    for line in text.splitlines()[:MAX_REFLOG]:
        m = re.fullmatch(r"([0-9a-f]{40,64}) \S+@\{(\d+)\}", line.strip())
        if m:
            out.append((m.group(1), dt.datetime.fromtimestamp(int(m.group(2)), dt.timezone.utc)))
    return out


@functools.cache
def starter_blob(stage_id: str) -> str:
    """The blob id of the stage's starter file: a stage still equal to it was not worked on."""
    return blob_id(stages.get(stage_id).starter.read_bytes())


@dataclass
class Clone:
    student: str
    folder: Path


def find_clones(repos_dir: Path, prefix: str) -> tuple[list, list]:
    """The clones in ``repos_dir`` (student ids with ``prefix`` stripped) and what is not a clone."""
    clones, ignored = [], []
    for entry in sorted(repos_dir.iterdir(), key=lambda p: p.name):
        if entry.name.startswith((".", "__")):
            continue
        if not entry.is_dir() or not (entry / ".git").exists():
            ignored.append(entry.name)
            continue
        name = entry.name
        student = name[len(prefix):] if prefix and name.startswith(prefix) and len(name) > len(prefix) else name
        clones.append(Clone(student, entry))
    return clones, ignored


def observe(clone: Clone, book: Gradebook, when: dt.datetime, stage_ids) -> tuple[list, dict, str, list]:
    """This clone's rows for the ``collections`` table, the blobs' contents, HEAD, and notes on files
    left out (too large: that stage is not collected, the others are)."""
    folder = clone.folder
    head = _git(folder, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").decode().strip()
    files = stage_files(folder, head)
    history = reflog(folder)
    trees: dict = {}
    before = book.observations(clone.student)
    rows, contents, notes = [], {}, []
    for sid in stage_ids:
        if sid not in files:
            if any(o["blob"] for o in before.get(sid, [])):  # it was handed in before: now it is gone
                rows.append({"collected_at": when, "student": clone.student, "stage": sid, "repo": str(folder),
                             "commit_id": head, "path": "", "blob": "", "first_seen": None, "seen_via": None})
            continue
        path, obj = files[sid]
        if int(_git(folder, "cat-file", "-s", obj)) > submission.MAX_FILE_BYTES:
            notes.append(f"{path} is larger than {submission.MAX_FILE_BYTES >> 20} MB; not collected")
            continue
        data = _git(folder, "cat-file", "blob", obj)
        blob = blob_id(data)
        seen = [(when, "collect")]
        for commit, at in history:
            if commit not in trees:
                try:
                    trees[commit] = {k: v[1] for k, v in stage_files(folder, commit).items()}
                except RepoUnreadable:  # an entry whose commit is gone (rewritten history, gc)
                    trees[commit] = {}
            if trees[commit].get(sid) == obj:
                seen.append((at, "reflog"))
        seen += [(o["first_seen"], o["seen_via"]) for o in before.get(sid, []) if o["blob"] == blob]
        first, via = min(seen, key=lambda s: s[0])
        rows.append({"collected_at": when, "student": clone.student, "stage": sid, "repo": str(folder),
                     "commit_id": head, "path": path, "blob": blob, "first_seen": first, "seen_via": via})
        contents[blob] = data
    return rows, contents, head, notes


def write_snapshot(dest: Path, student: str, book: Gradebook, policy, stage_ids) -> dict:
    """``dest`` holds the version of each stage that counts; returns stage id -> the chosen observation."""
    observed = book.observations(student)
    tmp = dest.with_name(f".{dest.name}.new")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    chosen = {}
    for sid in stage_ids:
        pick, _ = late.choose(observed.get(sid, []), policy, student, sid, starter_blob(sid))
        if pick is not None:
            (tmp / f"{sid}.py").write_bytes(book.collected_file(pick["blob"]))
            chosen[sid] = pick
    old = dest.with_name(f".{dest.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        dest.rename(old)
    tmp.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
    return chosen


def times_for(book: Gradebook, student: str, folder: Path, policy, stage_ids) -> tuple[dict, dict]:
    """When the stage files the batch grades in ``folder`` were first seen (stage id -> late.Seen), and the
    stages left out of it for the cut-off (stage id -> late.Seen of the work left out). A file that was
    never collected (another folder, an edited snapshot) has no time."""
    observed = book.observations(student)
    seen, cut = {}, {}
    for sid in stage_ids:
        rows = observed.get(sid, [])
        file = folder / f"{sid}.py"
        if file.is_file():
            blob = blob_id(file.read_bytes())
            times = [(o["first_seen"], o["seen_via"]) for o in rows if o["blob"] == blob]
            if times:
                seen[sid] = late.Seen(*min(times, key=lambda t: t[0]))
        elif rows:
            _, left_out = late.choose(rows, policy, student, sid, starter_blob(sid))
            if left_out is not None:
                cut[sid] = late.Seen(left_out["first_seen"], left_out["seen_via"])
    return seen, cut


def run_collect(repos_dir, *, out="grading-out", gradebook_url=None, course=None, prefix=None, pull_first=False,
                when: dt.datetime | None = None, say=print) -> int:
    """Collect every clone in ``repos_dir``; return the exit code (0 collected, 2 usage error).
    ``pull_first``: ``git pull --ff-only`` each clone first (a failed pull is said, and what the
    clone holds is collected); ``when`` replaces the clock (tests); ``say`` prints one line."""
    repos = Path(repos_dir)
    if not repos.is_dir():
        print(f"error: {repos_dir} is not a folder of git clones", file=sys.stderr)
        return 2
    if shutil.which("git") is None:
        raise GitUnavailable(NO_GIT)
    chosen_stages = [s.id for s in stages.all_stages()]
    try:
        settings = term.load(course, chosen_stages)
    except term.TermError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    prefix = settings.repo_prefix if prefix is None else prefix
    out_dir = Path(out)
    url = gradebook_url or default_url(str(out_dir))
    out_dir.mkdir(parents=True, exist_ok=True)
    book = Gradebook(url)
    when = (when or now()).astimezone(dt.timezone.utc)   # the gradebook keeps UTC (SQLite drops offsets)
    clones, ignored = find_clones(repos, prefix)
    for name in ignored:
        say(f"ignored {name}: not a git clone (an LMS export? grade it with `batch --manifest`)")
    seen_ids, collected = {}, 0
    try:
        for clone in clones:
            if clone.student in seen_ids:
                say(f"skipped {clone.folder.name}: {seen_ids[clone.student]} has the same student id {clone.student!r}")
                continue
            seen_ids[clone.student] = clone.folder.name
            failed = pull(clone.folder) if pull_first else ""
            if failed:
                say(f"not pulled {clone.folder.name}: {failed}; collecting what the clone holds")
            try:
                rows, contents, head, notes = observe(clone, book, when, chosen_stages)
            except RepoUnreadable as exc:
                say(f"unreadable {clone.folder.name}: {exc}; nothing recorded for {clone.student}")
                continue
            book.record_collection(rows, contents)
            picked = write_snapshot(out_dir / "collected" / clone.student, clone.student, book,
                                    settings.late, chosen_stages)
            collected += 1
            new = [r["stage"] for r in rows if r["blob"] and r["first_seen"] == when]
            say(f"collected {clone.student}: HEAD {head[:10]}, {len(picked)} stage file(s) graded"
                + (f", first seen now: {', '.join(new)}" if new else "") + "".join(f"; {n}" for n in notes))
    finally:
        book.close()
    say(f"{collected} of {len(clones)} clone(s) collected at {when.isoformat(timespec='seconds')} into "
        f"{out_dir / 'collected'}; gradebook {redact(url)}. Next: python -m grader batch "
        f"{out_dir / 'collected'} --out {out_dir}")
    return 0
