"""What a student's notebook runs: its setup and check cells (``course``), the
pictures (``figures`` draws, ``pictures`` runs the torch stages' models first)
and the pretrained MiniLM files (``pretrained``). ``bootstrap`` holds the one
function the setup cell carries as a copy, since it finds this package.

Ships in the student bundle. Imports only ``grader.engine``'s notebook reading
and paths.
"""
