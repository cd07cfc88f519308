"""What a student's notebook imports: its setup and check cells (``course``),
the pictures (``figures``) and the pretrained MiniLM files (``pretrained``).

Ships in the student bundle. Imports only ``grader.engine``'s notebook reading.
"""
