"""The one piece of a notebook's setup cell that cannot be imported: finding the course folder.

A notebook cannot ``import grader`` before it knows where the course folder
is, so ``grader.authoring.notebook_build`` copies the source of
``find_course_root`` (``inspect.getsource``) into every setup cell, which
then calls it and goes on with ``grader.lab.course.setup``. It lives here, as
a real function, so that linters and tests see it; it therefore imports what
it needs itself and uses nothing else from this file.
"""


def find_course_root():
    """The course folder (with grader/ and assignments/), also put first on sys.path so `grader` imports.

    Looked for in $COURSE_ROOT, this folder and its parents; on Colab also under /content and your
    Drive, and if still not found, you are asked to upload the course bundle (.zip).
    """
    import os
    import sys
    import zipfile
    from pathlib import Path

    def first_course_folder(places):
        return next((place.resolve() for place in places
                     if (place / "grader" / "lab" / "course.py").is_file() and (place / "assignments").is_dir()),
                    None)

    on_colab = "google.colab" in sys.modules
    here = Path.cwd().resolve()
    places = [Path(os.environ.get("COURSE_ROOT") or here), here, *here.parents]
    if on_colab:
        places += [place for pattern in ("*", "*/*", "drive/MyDrive/*", "drive/MyDrive/*/*")
                   for place in sorted(Path("/content").glob(pattern))]
    root = first_course_folder(places)
    if root is None and on_colab:  # not found: ask for the course bundle (.zip) and unpack it into /content/course
        from google.colab import files
        print("Upload the course bundle (the .zip with grader/, assignments/ and starter/):")
        for name, data in files.upload().items():
            Path(name).write_bytes(data)
            with zipfile.ZipFile(name) as archive:
                archive.extractall("/content/course")
        markers = sorted(Path("/content/course").glob("**/grader/lab/course.py"))
        root = first_course_folder(marker.parents[2] for marker in markers)
    if root is None:
        raise FileNotFoundError("cannot find the course folder (with grader/ and assignments/): open this notebook "
                                "from inside it, or set the environment variable COURSE_ROOT")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return root
