"""The only part of the grader that the worker process imports.

Everything here is public: it holds no test, no expected value and no
reference code. The worker imports student modules; the trusted side never does.
"""
