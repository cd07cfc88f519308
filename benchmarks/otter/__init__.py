"""The Otter-Grader comparison (see compare.py)."""
