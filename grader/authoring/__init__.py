"""Authoring tools for the course's maintainers: the starter generated from the
solutions, the notebooks, the student bundle, the Gradescope autograder, the
catalogue of mistakes and a made-up class to grade.

Builds on ``grader.engine``; nothing students or the engine run imports this wing.
"""
