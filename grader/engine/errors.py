"""What can go wrong on the student's side, as seen from the trusted process.

The plugin turns each into a test status of the report (each class's ``status``) and its feedback.
"""
from grader.sandbox.protocol import ReplyKind, reply_kind

from ..i18n import join, tr


class StudentProblem(Exception):
    """Base: the submission, not the test, is the cause."""
    status = "error"

    @property
    def feedback(self):
        """What the student is told: the marked message it was raised with (``tr``), else its text."""
        return self.args[0] if self.args and isinstance(self.args[0], str) else str(self)


class StudentError(StudentProblem):
    """The student's code raised (or failed to import)."""

    def __init__(self, reply: dict, what: str = ""):
        self.type_name = reply.get("type", "Exception")
        self.mro_names = reply.get("mro", [self.type_name])
        self.message = reply.get("message", "")
        self.where = reply.get("where", "")
        self.kind = reply_kind(reply) or ReplyKind.ERROR
        self.what = what
        where = tr(" (at {where})", where=self.where) if self.where else ""
        if self.kind is ReplyKind.LOAD_ERROR:
            text = tr("could not import the module: {error}{where}", error=self._error(), where=where)
        elif self.kind is ReplyKind.BAD_RETURN:
            text = tr("{what} returned something that cannot be checked: {message}", what=what,
                      message=self.message)
        else:
            text = tr("{what} raised {error}{where}", what=what, error=self._error(), where=where)
        super().__init__(text)


    def _error(self):
        """``Type: message`` (the message may be a marked text the grader added to, ``testing._located``)."""
        return join([f"{self.type_name}: ", self.message], sep="")


class StudentMissing(StudentProblem):
    status = "missing"


class StudentTimeout(StudentProblem):
    status = "timeout"


class WorkerCrashed(StudentProblem):
    status = "crashed"


class ForbiddenCall(StudentProblem):
    status = "failed"
