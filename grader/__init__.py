"""The Transformer course grader. See docs/ARCHITECTURE.md."""
