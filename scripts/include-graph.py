#!/usr/bin/env python3
"""include-graph.py: the include graph of common/ and grader/, and its cycles.

  scripts/include-graph.py              common/ and grader/: the graph, then every cycle
  scripts/include-graph.py grader       one directory (its pieces, and what they include elsewhere)
  scripts/include-graph.py --files ...  files as the nodes instead of pieces
  scripts/include-graph.py --dot ...    the graph for Graphviz (| dot -Tsvg > graph.svg)

A node is a piece: a .c (or .cu), its .h and its _internal.h, "common/comm" for
comm.c, comm.h and comm_internal.h. An edge is an #include "..." line of one of its files, found as the
compiler finds it (the file's own directory, then common/ and grader/, the
build's -I). A piece that includes another is built on it, so a cycle is two
pieces built on each other: neither can be read, tested or replaced alone.
Exits 1 when there is a cycle among the directories' pieces, 0 when none.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEARCH = ["common", "grader"]   # the build's -I directories
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCES = (".c", ".h", ".cu")


def node_of(path, files):
    """The node of a file (relative to ROOT): the file itself, or its piece."""
    if files:
        return path
    base = os.path.splitext(path)[0]
    return base[: -len("_internal")] if base.endswith("_internal") else base


def resolve(name, including):
    """The file an #include "name" of file `including` reads, or None (a system header)."""
    for d in [os.path.dirname(including)] + SEARCH:
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(os.path.join(ROOT, p)):
            return p
    return None


def graph(dirs, files):
    """{node: {included node: [(file, line, header)]}} over the .c/.h/.cu files of dirs."""
    g = {}
    for d in dirs:
        for f in sorted(os.listdir(os.path.join(ROOT, d))):
            path = os.path.join(d, f)
            if not f.endswith(SOURCES) or not os.path.isfile(os.path.join(ROOT, path)):
                continue
            src = node_of(path, files)
            edges = g.setdefault(src, {})
            with open(os.path.join(ROOT, path), errors="replace") as fh:
                for lineno, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    target = resolve(m.group(1), path) if m else None
                    dst = node_of(target, files) if target else None
                    if dst and dst != src:
                        edges.setdefault(dst, []).append((path, lineno, m.group(1)))
    return g


def cycles(g):
    """Every elementary cycle among g's own nodes, each once, from its smallest node."""
    found = []

    def walk(start, node, path, on_path):
        for nxt in sorted(g.get(node, {})):
            if nxt not in g or nxt < start:
                continue
            if nxt == start:
                found.append(path + [start])
            elif nxt not in on_path:
                on_path.add(nxt)
                walk(start, nxt, path + [nxt], on_path)
                on_path.discard(nxt)

    for start in sorted(g):
        walk(start, start, [start], {start})
    return found


def main(argv):
    files = "--files" in argv
    dot = "--dot" in argv
    dirs = [a.rstrip("/") for a in argv if not a.startswith("--")]
    if "--help" in argv or "-h" in argv:
        print(__doc__.strip())
        return 0
    unknown = [a for a in argv if a.startswith("-") and a not in ("--files", "--dot")]
    if unknown:
        print(f"include-graph: unknown flag {unknown[0]}; see --help", file=sys.stderr)
        return 2
    dirs = dirs or SEARCH
    for d in dirs:
        if not os.path.isdir(os.path.join(ROOT, d)):
            print(f"include-graph: no directory {d}/ in {ROOT}", file=sys.stderr)
            return 2
    g = graph(dirs, files)
    found = cycles(g)
    in_cycle = {(c[i], c[i + 1]) for c in found for i in range(len(c) - 1)}
    if dot:
        print("digraph includes {\n  rankdir=BT; node [shape=box, fontname=monospace];")
        for src in sorted(g):
            for dst in sorted(g[src]):
                style = ' [color=red, penwidth=2]' if (src, dst) in in_cycle else ""
                print(f'  "{src}" -> "{dst}"{style};')
        print("}")
    else:
        width = max(len(n) for n in g)
        for src in sorted(g):
            print(f"{src:<{width}}  -> {' '.join(sorted(g[src])) or '(nothing)'}")
        print()
        for c in found:
            print("cycle: " + " -> ".join(c))
            for a, b in zip(c, c[1:]):
                how = ", ".join(f"{f}:{n}" for f, n, _ in g[a][b])
                print(f"    {a} includes {b} ({how})")
        what = "files" if files else "pieces"
        print(f"{len(found)} cycle{'' if len(found) == 1 else 's'} among the {len(g)} {what} of "
              f"{', '.join(d + '/' for d in dirs)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
