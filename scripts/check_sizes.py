#!/usr/bin/env python3
"""Keep the rooms small: no production module over MAX_MODULE_LINES lines
and no function over MAX_FUNCTION_LINES (tests, benchmarks, examples and
generated code aside). Prints each one that is larger; exit 1 if any."""

from __future__ import annotations

import ast
import pathlib
import sys

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
SKIP = {"tests", "chaos_tests", "bench", "examples", "build", "dist", ".venv", "proto"}


def production_files(root: pathlib.Path):
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if parts[0] in SKIP or any(p.startswith(".") for p in parts):
            continue
        yield path


def main(root: str = ".") -> int:
    base = pathlib.Path(root)
    problems = []
    for path in production_files(base):
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            problems.append(f"{path}: {lines} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    problems.append(f"{path}:{node.lineno}: {node.name} is {n} lines "
                                    f"(at most {MAX_FUNCTION_LINES})")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
