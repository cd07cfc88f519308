"""What can go wrong on the student's side, as seen from the trusted process.

The plugin turns each into a test status of the report (each class's ``status``).
"""
from grader.sandbox.protocol import ReplyKind, reply_kind


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
        self.kind = reply_kind(reply) or ReplyKind.ERROR
        self.what = what
        where = f" (at {self.where})" if self.where else ""
        if self.kind is ReplyKind.LOAD_ERROR:
            text = f"could not import the module: {self.type_name}: {self.message}{where}"
        elif self.kind is ReplyKind.BAD_RETURN:
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
