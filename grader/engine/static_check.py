"""Reading a submission's source (never running it) for forbidden APIs.

The worker's runtime guard catches forbidden calls as they happen; this scan
catches a submission that disarms the guard. It resolves import aliases
(``import torch.nn.functional as F``) so that ``F.scaled_dot_product_attention``
is recognised while a student's own method of the same name is not.
"""
from __future__ import annotations

import ast

from ..i18n import tr


def _dotted(node, aliases):
    """'torch.nn.functional.x' for an attribute chain rooted at an imported name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id], *reversed(parts)])
    return None


def _matches(dotted: str, banned: str) -> bool:
    return dotted == banned or dotted.startswith(banned + ".")


def scan(source: str, filename: str, forbidden: list) -> list:
    """Lines like 'a05_encoder.py:12 uses torch.nn.MultiheadAttention'."""
    if not forbidden:
        return []
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return []  # the import will report it
    aliases, hits = {}, []

    def hit(node, dotted):
        for banned in forbidden:
            if _matches(dotted, banned):
                hits.append(tr("{filename}:{node_lineno} uses {banned}, which this stage forbids",
                               filename=filename, node_lineno=node.lineno, banned=banned))
                return

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                hit(node, a.name)
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                hit(node, full)
                aliases[a.asname or a.name] = full
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            dotted = _dotted(node, aliases)
            if dotted:
                hit(node, dotted)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in aliases:
            hit(node, aliases[node.id])
    return sorted(set(hits), key=lambda h: int(h.split(":")[1].split()[0]))
