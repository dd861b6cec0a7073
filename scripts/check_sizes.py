#!/usr/bin/env python3
"""Keep the rooms small: no production module over MAX_MODULE_LINES lines
and no function over MAX_FUNCTION_LINES (tests, benchmarks, examples and
generated code aside), in Python and in C. Prints each one that is larger;
exit 1 if any.

A C function is what this code base writes as one: a definition whose
opening brace stands alone at the start of a line, ending at the first
closing brace there; it counts from the first line of its signature."""

from __future__ import annotations

import ast
import pathlib
import re
import sys

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
SKIP = {"tests", "chaos_tests", "bench", "examples", "build", "dist", ".venv"}
GENERATED = {"duomq_pb2.py", "duomq_pb2.pyi", "layout.h"}
_C_NAME = re.compile(r"(\w+)\s*\(")


def production_files(root: pathlib.Path, pattern: str = "*.py"):
    for path in sorted(root.rglob(pattern)):
        parts = path.relative_to(root).parts
        if parts[0] in SKIP or any(p.startswith(".") for p in parts) or path.name in GENERATED:
            continue
        yield path


def python_functions(text: str):
    """(line, name, lines) of each function."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.lineno, node.name, (node.end_lineno or node.lineno) - node.lineno + 1


def c_functions(text: str):
    """(line, name, lines) of each C function (see the module docstring)."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.rstrip() != "{":
            continue
        start = i - 1               # the signature: back to a line starting at column 0
        while start > 0 and (not lines[start] or lines[start][0].isspace()):
            start -= 1
        header = " ".join(lines[start:i])
        match = _C_NAME.search(header)
        if match is None or header.rstrip().endswith(("=", ";")):
            continue                # an initializer, not a function
        end = next((k for k in range(i + 1, len(lines)) if lines[k].startswith("}")), i)
        yield start + 1, match.group(1), end - start + 1


def main(root: str = ".") -> int:
    base = pathlib.Path(root)
    problems = []
    sources = [(path, python_functions) for path in production_files(base)]
    sources += [(path, c_functions) for ext in ("*.c", "*.h")
                for path in production_files(base, ext)]
    for path, functions in sources:
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            problems.append(f"{path}: {lines} lines (at most {MAX_MODULE_LINES})")
        for line, name, n in functions(text):
            if n > MAX_FUNCTION_LINES:
                problems.append(f"{path}:{line}: {name} is {n} lines "
                                f"(at most {MAX_FUNCTION_LINES})")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
