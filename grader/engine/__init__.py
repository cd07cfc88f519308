"""The trusted engine: intake of a submission, the pytest session and its plugin,
the fork servers and confined workers it talks to, and the report.

Nothing here imports a student's module: that happens only in ``grader.sandbox``,
inside a confined worker. This wing imports no other wing but ``grader.sandbox``'s
protocol.
"""
