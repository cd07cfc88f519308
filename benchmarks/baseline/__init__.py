"""The benchmarks' baseline: the hidden suites with no trust boundary at all.

Only the ``boundary`` benchmark uses it, to price the boundary. It is not part of
the grader and can grade nothing but the reference: the student's module and
``grader.engine.testing.reference`` share bare module names in one process.
"""
