#!/usr/bin/env python3
"""The project's package dependency graph, read from the BUILD files and the #includes.

Layers, lowest first (docs/design.md): a package may depend only on packages of lower
layers; packages of one layer never depend on each other, except inside the `tests`
group.

  python3 tools/package_graph.py            # prints the Mermaid graph
  python3 tools/package_graph.py --check    # exit 1 naming each upward edge, or the
                                            # graph in docs/design.md being out of date
  python3 tools/package_graph.py --write    # rewrites the graph in docs/design.md

Run from the repository root (the test //tests:package_graph_test does so).
"""
import argparse
import os
import re
import sys

# Lowest first. A package is in the first layer whose entry equals it or is a prefix
# followed by "/".
LAYERS = [
    ("data", ["configs"]),
    ("base", ["p3/base"]),
    ("core", ["p3/core"]),
    ("protocol and config", ["proto"]),
    ("models and data", ["models"]),
    ("model config", ["models/config"]),
    ("edges and engines", ["server", "worker", "p3/pipeline", "p3/sim"]),
    ("Python front end", ["worker/python"]),  # the `p3` package over the worker
    ("examples", ["worker/examples"]),
    ("tool libraries", ["tools/launcher", "tools/results_lib"]),
    ("tools", ["tools"]),
    ("tests", ["tests"]),
]
GROUPS = {"tests"}  # layers whose packages may depend on each other
SKIP_DIRS = {"third_party", "docs", "out", ".git", ".ci"}
DOC = "docs/design.md"
BEGIN = "<!-- package-graph:begin (tools/package_graph.py --write) -->"
END = "<!-- package-graph:end -->"


def packages(root):
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        top = rel.split(os.sep)[0]
        if top in SKIP_DIRS or top.startswith("bazel-") or (rel != "." and
                                                              "WORKSPACE" in filenames):
            dirnames[:] = []
            continue
        if "BUILD" in filenames and rel != ".":
            found.append(rel.replace(os.sep, "/"))
    return sorted(found)


def layer_of(package):
    # The longest matching entry wins: models/config is not in models' layer.
    candidates = [(len(m), i) for i, (_, ms) in enumerate(LAYERS) for m in ms
                  if package == m or package.startswith(m + "/")]
    return max(candidates)[1] if candidates else None


def build_edges(root, pkgs):
    edges = {}
    for p in pkgs:
        text = open(os.path.join(root, p, "BUILD")).read()
        text = re.sub(r"#.*", "", text)
        # Who may see a target is not a dependency.
        text = re.sub(r"visibility\s*=\s*\[[^\]]*\]", "", text)
        for dep in re.findall(r'"//([A-Za-z0-9_/.-]*)(?::[^"]*)?"', text):
            if dep and dep != p and not dep.startswith("third_party"):
                edges.setdefault((p, dep), "BUILD")
    return edges


def include_edges(root, pkgs):
    edges = {}
    pkg_set = set(pkgs)
    for p in pkgs:
        folder = os.path.join(root, p)
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".h", ".cc")):
                continue
            for line in open(os.path.join(folder, name), errors="replace"):
                m = re.match(r'\s*#include "([^"]+)/[^/"]+"', line)
                if not m:
                    continue
                dep = m.group(1)
                while dep and dep not in pkg_set:
                    dep = dep.rpartition("/")[0]
                if dep and dep != p:
                    edges.setdefault((p, dep), f"{p}/{name}")
    return edges


def upward(edges):
    problems = []
    for (src, dst), where in sorted(edges.items()):
        ls, ld = layer_of(src), layer_of(dst)
        if ls is None or ld is None:
            problems.append(f"{where}: {src} -> {dst}: package not in a layer (add it to LAYERS)")
        elif ld > ls or (ld == ls and LAYERS[ls][0] not in GROUPS):
            problems.append(f"{where}: {src} -> {dst} runs {'up' if ld > ls else 'sideways'} "
                            f"({LAYERS[ls][0]} -> {LAYERS[ld][0]})")
    return problems


def mermaid(pkgs, edges):
    def node(p):
        return p.replace("/", "_")
    shown = [p for p in pkgs if not p.startswith("tests")]
    lines = ["```mermaid", "flowchart BT"]
    for name, members in LAYERS:
        inside = [p for p in shown if layer_of(p) == [n for n, _ in LAYERS].index(name)]
        if not inside:
            continue
        lines.append(f'  subgraph layer_{name.replace(" ", "_")}["{name}"]')
        lines += [f'    {node(p)}["{p}/"]' for p in inside]
        lines.append("  end")
    for src, dst in sorted({(s, d) for s, d in edges if s in shown and d in shown}):
        lines.append(f"  {node(src)} --> {node(dst)}")
    lines.append("```")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--root", default=".")
    args = parser.parse_args()
    pkgs = packages(args.root)
    edges = build_edges(args.root, pkgs)
    for key, where in include_edges(args.root, pkgs).items():
        edges.setdefault(key, where)
    graph = mermaid(pkgs, edges)
    doc_path = os.path.join(args.root, DOC)
    doc = open(doc_path).read()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"{DOC}: the markers of the package graph are missing")
    before, rest = doc.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    new_doc = f"{before}{BEGIN}\n{graph}\n{END}{after}"
    if args.write:
        open(doc_path, "w").write(new_doc)
    if args.check:
        problems = upward(edges)
        if new_doc != doc:
            problems.append(f"{DOC}: the package graph is out of date; run "
                            "python3 tools/package_graph.py --write")
        for p in problems:
            print(p)
        print(f"{len(pkgs)} packages, {len(edges)} package edges, {len(problems)} problems")
        return 1 if problems else 0
    if not args.write:
        print(graph)
    return 0


if __name__ == "__main__":
    sys.exit(main())
