#!/usr/bin/env python3
"""The GPU machine's build route: Bazel's own compile and link commands, run without Bazel.

The GPU machine has a compiler and a libtorch (inside PyTorch's Python package) but no
Bazel, no gRPC and no network (docs/building.md, "Building on a machine without Bazel").
Bazel stays the one source of truth for what is built from which sources: `manifest`
turns `bazel aquery` output (every CppCompile and CppLink action of the targets) into a
manifest of commands; `build` runs that manifest somewhere else, against another libtorch
and against Debian's libraries unpacked into a private prefix.

  commands.py manifest --aquery=AQ.json --torch_placeholder=DIR --out=manifest.json
  commands.py build --manifest=manifest.json --root=ROOT --torch=DIR --deps=PREFIX [--jobs=N]
      [--opt=-O0] [--only=//server:p3_server,...]

The manifest's commands name libtorch by the placeholder folder the aquery was made with
(third_party/libtorch.bzl, P3_LIBTORCH): `build` puts the real folder in its place, drops
the CUDA libraries when that libtorch has none, and links glog where its libc10 needs it.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time

PLACEHOLDER = "@P3_LIBTORCH@"
DEPS = "@P3_DEPS@"


def _paths(aq):
    frags = {f["id"]: f for f in aq.get("pathFragments", [])}
    cache = {}

    def path(fid):
        if fid not in cache:
            f = frags[fid]
            parent = f.get("parentId")
            cache[fid] = (path(parent) + "/" if parent else "") + f["label"]
        return cache[fid]

    return {a["id"]: path(a["pathFragmentId"]) for a in aq.get("artifacts", [])}


def _depset_files(aq, artifacts):
    sets = {d["id"]: d for d in aq.get("depSetOfFiles", [])}
    memo = {}

    def files(sid):
        if sid not in memo:
            d = sets[sid]
            out = set(artifacts[a] for a in d.get("directArtifactIds", []))
            for t in d.get("transitiveDepSetIds", []):
                out |= files(t)
            memo[sid] = out
        return memo[sid]

    return files


def make_manifest(aq, placeholder):
    """The compile and link commands of an aquery, libtorch's folder replaced by PLACEHOLDER."""
    artifacts = _paths(aq)
    files = _depset_files(aq, artifacts)
    labels = {t["id"]: t["label"] for t in aq.get("targets", [])}
    compiles, links, sources = [], [], set()

    # libtorch's headers are reached through @torch_api's links to the placeholder's folders.
    links_to = {"external/torch_api/include": PLACEHOLDER + "/include",
                "external/torch_api/api_include": PLACEHOLDER + "/include/torch/csrc/api/include"}

    def fix(args):
        return [links_to.get(a, a.replace(placeholder, PLACEHOLDER)) for a in args]

    for action in aq.get("actions", []):
        args = action["arguments"]
        params = {p["execPath"]: p["arguments"] for p in action.get("paramFiles", [])}
        # Bazel 4.2.3's --include_param_files writes a param file's arguments inline and
        # keeps the @file reference after them: drop the reference then, else expand it.
        expanded = []
        for a in args:
            content = params.get(a[1:]) if a.startswith("@") else None
            if content is None:
                expanded.append(a)
            elif expanded[-len(content):] != content:
                expanded += content
        outputs = [artifacts[o] for o in action.get("outputIds", [])]
        inputs = set()
        for sid in action.get("inputDepSetIds", []):
            inputs |= files(sid)
        for f in inputs:
            if f.endswith((".cc", ".h")) and not f.startswith(("bazel-out/", "external/torch_api/")):
                sources.add(f)
        entry = {"target": labels.get(action.get("targetId"), ""), "args": fix(expanded)}
        if action["mnemonic"] == "CppCompile":
            entry["out"] = next(o for o in outputs if o.endswith(".o"))
            entry["src"] = expanded[expanded.index("-c") + 1]
            compiles.append(entry)
        elif action["mnemonic"] == "CppLink":
            entry["out"] = action_out = next(o for o in outputs if not o.endswith(".params"))
            entry["inputs"] = sorted(i for i in inputs if i.endswith((".o", ".a", ".so", ".lo")))
            del action_out
            links.append(entry)
    # The executables only (a cc_library's static and shared archives are Bazel's business),
    # and the objects they link.
    links = [l for l in links if not l["out"].endswith((".a", ".so", ".lo"))]
    used = set()
    for l in links:
        used |= set(l["inputs"])
    compiles = [c for c in compiles if c["out"] in used]
    compiles.sort(key=lambda c: c["out"])
    links.sort(key=lambda c: c["out"])
    # A generated source (bazel-out/.../*.pb.cc) is read from the bundle too.
    generated = sorted({c["src"] for c in compiles if c["src"].startswith("bazel-out/")})
    sources = {c["src"] for c in compiles if not c["src"].startswith("bazel-out/")}
    return {"compiles": compiles, "links": links, "sources": sorted(sources),
            "generated": generated}


def _needs_glog(lib):
    try:
        out = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True).stdout
    except OSError:
        return False
    return "libglog" in out


def _resolve(args, torch, deps, link, opt):
    torch = os.path.abspath(torch)
    out = [a.replace(PLACEHOLDER, torch) for a in args]
    has_cuda = os.path.exists(os.path.join(torch, "lib", "libtorch_cuda.so"))
    if not has_cuda:
        out = [a for a in out if a not in ("-ltorch_cuda", "-lc10_cuda")]
    if shutil.which("ld.gold") is None:
        out = [a for a in out if a != "-fuse-ld=gold"]
    lib = os.path.join(deps, "usr/lib/x86_64-linux-gnu")
    if link:
        extra = [f"-L{lib}", "-Wl,--disable-new-dtags", f"-Wl,-rpath,{lib}"]
        if _needs_glog(os.path.join(torch, "lib", "libc10.so")):
            extra += ["-lglog", "-lgflags"]
        # Before the libraries: -L must come first to count for every -l.
        first_lib = next((i for i, a in enumerate(out) if a.startswith("-l")), len(out))
        out = out[:first_lib] + extra + out[first_lib:]
    else:
        # Debian's headers for Abseil, gRPC, protobuf, JSON and Catch2, after the project's
        # own include paths and libtorch's.
        c = out.index("-c")
        out = out[:c] + ["-isystem", os.path.join(deps, "usr/include")] + ([opt] if opt else []) \
            + out[c:]
    return out


def _run(cmd, root, log):
    start = time.time()
    p = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if p.returncode != 0 or p.stderr.strip():
        log.write(" ".join(cmd) + "\n" + p.stdout + p.stderr + "\n")
        log.flush()
    return p.returncode, time.time() - start, p.stderr


def build(manifest, root, torch, deps, jobs, opt, only):
    compiles, links = manifest["compiles"], manifest["links"]
    if only:
        links = [l for l in links if l["target"] in only]
        missing = set(only) - {l["target"] for l in links}
        if missing:
            sys.exit(f"commands.py: not in the manifest: {', '.join(sorted(missing))}")
        wanted = set()
        for l in links:
            wanted |= set(l["inputs"])
        compiles = [c for c in compiles if c["out"] in wanted]
    log_path = os.path.join(root, "build.log")
    failures, warnings = [], 0
    with open(log_path, "w") as log:
        todo = []
        for c in compiles:
            os.makedirs(os.path.join(root, os.path.dirname(c["out"])), exist_ok=True)
            target = os.path.join(root, c["out"])
            src = os.path.join(root, c["src"])
            if os.path.exists(target) and os.path.getmtime(target) >= os.path.getmtime(src):
                continue
            todo.append(c)
        print(f"commands.py: {len(todo)} of {len(compiles)} compiles to run, {len(links)} links, "
              f"{jobs} jobs", flush=True)
        done = 0
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            futures = {pool.submit(_run, _resolve(c["args"], torch, deps, False, opt), root, log): c
                       for c in todo}
            for f in concurrent.futures.as_completed(futures):
                rc, seconds, stderr = f.result()
                done += 1
                c = futures[f]
                if rc != 0:
                    failures.append(c["src"])
                elif stderr.strip():
                    warnings += 1
                print(f"PROGRESS compile {done}/{len(todo)} {c['src']} {seconds:.0f}s"
                      f"{' FAILED' if rc else ''}", flush=True)
        if failures:
            sys.exit(f"commands.py: {len(failures)} compile(s) failed ({', '.join(failures[:5])}); "
                     f"see {log_path}")
        for l in links:
            os.makedirs(os.path.join(root, os.path.dirname(l["out"])), exist_ok=True)
            rc, seconds, stderr = _run(_resolve(l["args"], torch, deps, True, None), root, log)
            print(f"PROGRESS link {l['target']} {seconds:.0f}s{' FAILED' if rc else ''}", flush=True)
            if rc != 0:
                failures.append(l["target"])
    if failures:
        sys.exit(f"commands.py: link of {', '.join(failures)} failed; see {log_path}")
    print(f"commands.py: built {len(links)} binaries; {warnings} compile(s) printed warnings "
          f"({log_path})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("manifest")
    m.add_argument("--aquery", required=True)
    m.add_argument("--torch_placeholder", required=True)
    m.add_argument("--out", required=True)
    b = sub.add_parser("build")
    b.add_argument("--manifest", required=True)
    b.add_argument("--root", required=True)
    b.add_argument("--torch", required=True)
    b.add_argument("--deps", required=True)
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    b.add_argument("--opt", default="", help="e.g. -O0: appended to every compile")
    b.add_argument("--only", default="", help="comma-separated target labels to link")
    a = parser.parse_args()
    if a.command == "manifest":
        with open(a.aquery) as f:
            aq = json.load(f)
        manifest = make_manifest(aq, a.torch_placeholder.rstrip("/"))
        with open(a.out, "w") as f:
            json.dump(manifest, f, indent=1)
        print(f"commands.py: {len(manifest['compiles'])} compiles, {len(manifest['links'])} links, "
              f"{len(manifest['sources'])} source files")
    else:
        with open(a.manifest) as f:
            manifest = json.load(f)
        build(manifest, a.root, a.torch, a.deps, a.jobs, a.opt,
              [t for t in a.only.split(",") if t])


if __name__ == "__main__":
    main()
