#!/usr/bin/env python3
"""No module cycle anywhere in the package: every strongly connected
component of the import graph (grimp's, the graph import-linter checks; an
import under ``TYPE_CHECKING`` or inside a function counts) must be one
module. Prints each cycle found with one import chain around it; exit 1 if
any. Run with the package importable as ``duomq`` (scripts/lint.sh)."""

from __future__ import annotations

import sys

import grimp

PACKAGE = "duomq"


def cycles(graph) -> list[list[str]]:
    """The import graph's components of more than one module (Tarjan's,
    iterative: the graph has hundreds of modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def chain(graph, component: list[str]) -> list[str]:
    """One cycle through the component's first module, as imports."""
    start = component[0]
    inside = set(component)
    for nxt in sorted(graph.find_modules_directly_imported_by(start) & inside):
        back = graph.find_shortest_chain(importer=nxt, imported=start)
        if back:
            return [start, *back]
    return component


def main() -> int:
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    found = cycles(graph)
    for component in found:
        print(f"module cycle ({len(component)} modules): " + " -> ".join(chain(graph, component)))
    if found:
        print(f"{len(found)} module cycle(s): break each (a value moved to a module both "
              f"import, or a narrow interface)", file=sys.stderr)
        return 1
    print(f"module cycles: none in {len(graph.modules)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
