"""Class tooling for instructors: batch grading of a whole class, its executors
(local processes or a Dask cluster), the gradebook and the HTML pages.

Builds on ``grader.engine``; nothing in the engine imports this wing.
"""
