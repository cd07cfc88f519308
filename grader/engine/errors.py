"""What can go wrong on the student's side, as seen from the trusted process.

The plugin turns each into a test status of the report (each class's ``status``).
"""


class StudentProblem(Exception):
    """Base: the submission, not the test, is the cause."""
    status = "error"


class StudentError(StudentProblem):
    """The student's code raised (or failed to import)."""

    def __init__(self, reply: dict, what: str = ""):
        self.type_name = reply.get("type", "Exception")
        self.mro_names = reply.get("mro", [self.type_name])
        self.message = reply.get("message", "")
        self.where = reply.get("where", "")
        self.kind = reply.get("kind", "error")
        self.what = what
        where = f" (at {self.where})" if self.where else ""
        if self.kind == "load_error":
            text = f"could not import the module: {self.type_name}: {self.message}{where}"
        elif self.kind == "bad_return":
            text = f"{what} returned something that cannot be checked: {self.message}"
        else:
            text = f"{what} raised {self.type_name}: {self.message}{where}"
        super().__init__(text)


class StudentMissing(StudentProblem):
    status = "missing"


class StudentTimeout(StudentProblem):
    status = "timeout"


class WorkerCrashed(StudentProblem):
    status = "crashed"


class ForbiddenCall(StudentProblem):
    status = "failed"
