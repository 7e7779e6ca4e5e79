"""Every relative link and every #anchor in README.md and docs/**/*.md resolves.

A link is checked when it has no scheme (such as https:): its file or folder must exist
in the repository, relative to the page (or to the repository's root when it starts with
"/", as GitHub reads it); a #anchor must name a heading (or an
<a name=...>/id=... anchor) of the page it points to, slugged as GitHub does: lowercase,
spaces to "-", punctuation dropped, "-1", "-2" for repeated headings. Links inside code
blocks and `code spans` are text, not links. A failure names the file, line and link.

Reads the source tree, found by following the runfiles link of README.md to the workspace:
tags "local" and "external" (never cached: the pages are not its declared inputs).

  bazel test //tests:docs_links_test
  /usr/bin/python3 tests/docs_links_test.py --root=.     # the check alone, from a checkout
"""
import argparse
import os
import re
import sys
import tempfile
import unittest
import unicodedata
import urllib.parse

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"""<a\s+[^>]*?(?:name|id)\s*=\s*["']([^"']+)["']""", re.I)
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def slug(heading):
    """GitHub's anchor of a heading: its text as rendered (links as their text, no
    markup), lowercase, every character that is not a letter, digit, mark, "_", "-" or
    space dropped, spaces to "-"."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # [text](url) -> text
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags
    text = text.lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LNM":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def lines_outside_code(text):
    """(line number, line, line with code spans blanked) of the lines outside fenced
    blocks: a heading's anchor counts its code, a link in code is no link."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield n, line, CODE_SPAN.sub(lambda c: " " * len(c.group(0)), line)


def anchors(path, cache={}):
    """The anchors a page defines: its headings' slugs (repeats numbered) and HTML ones."""
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        found, seen = set(), {}
        for _, line, _ in lines_outside_code(text):
            m = HEADING.match(line)
            if m:
                s = slug(m.group(2))
                found.add(s if s not in seen else f"{s}-{seen[s]}")
                seen[s] = seen.get(s, 0) + 1
            found.update(a.lower() for a in HTML_ANCHOR.findall(line))
        cache[path] = found
    return cache[path]


def links(text):
    """(line number, target) of every link of a page outside code."""
    for n, _, line in lines_outside_code(text):
        for m in LINK.finditer(line):
            yield n, m.group(1)
        m = REFERENCE.match(line)
        if m:
            yield n, m.group(1)


def pages(root):
    """README.md and every docs/**/*.md, relative to root."""
    out = ["README.md"] if os.path.exists(os.path.join(root, "README.md")) else []
    for folder, dirs, files in os.walk(os.path.join(root, "docs")):
        dirs.sort()
        out += sorted(os.path.relpath(os.path.join(folder, f), root) for f in files
                      if f.endswith(".md"))
    return out


def check(root):
    """The problems of every page's links: "file:line: link: what is wrong"."""
    problems = []
    for page in pages(root):
        path = os.path.join(root, page)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for n, target in links(text):
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue  # a URL (https:, mailto:): not ours to check
            file_part, _, anchor = target.partition("#")
            file_part = urllib.parse.unquote(file_part)
            base = root if file_part.startswith("/") else os.path.dirname(path)
            dest = os.path.normpath(os.path.join(base, file_part.lstrip("/"))) \
                if file_part else path
            where = f"{page}:{n}: {target}"
            if not os.path.realpath(dest).startswith(os.path.realpath(root) + os.sep):
                problems.append(f"{where}: points outside the repository")
            elif not os.path.exists(dest):
                problems.append(f"{where}: {os.path.relpath(dest, root)} does not exist")
            elif anchor and dest.endswith(".md") and \
                    urllib.parse.unquote(anchor).lower() not in anchors(dest):
                problems.append(f"{where}: no heading of {os.path.relpath(dest, root)} "
                                f"has the anchor #{anchor}")
    return problems


def workspace():
    """The source tree: where README.md's runfiles link points, or --root."""
    return os.path.dirname(os.path.realpath("README.md"))


class DocsLinksTest(unittest.TestCase):
    def test_every_link_of_the_repository_resolves(self):
        root = workspace()
        self.assertTrue(os.path.isdir(os.path.join(root, "docs")), root)
        problems = check(root)
        self.assertEqual(problems, [], "\n" + "\n".join(problems))

    def test_slugs_follow_githubs_rules(self):
        self.assertEqual(slug("TCP congestion control: bbr against cubic (2026-12-02 afternoon)"),
                         "tcp-congestion-control-bbr-against-cubic-2026-12-02-afternoon")
        self.assertEqual(
            slug("Another VM, with each TCP congestion control (`cc-bbr`, `cc-cubic`)"),
            "another-vm-with-each-tcp-congestion-control-cc-bbr-cc-cubic")
        self.assertEqual(slug("Throughput at 1 Gbit/s"), "throughput-at-1-gbits")
        self.assertEqual(slug("P3 ÷ baseline – **1.61×** on [ResNet](x.md)"),
                         "p3--baseline--161-on-resnet")
        self.assertEqual(slug("row_lstm: every weight mode"), "row_lstm-every-weight-mode")
        self.assertEqual(slug("Kubernetes: `--kubernetes`"), "kubernetes---kubernetes")

    def test_broken_links_and_anchors_are_named_with_file_and_line(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "docs", "sub"))
            with open(os.path.join(root, "README.md"), "w") as f:
                f.write("# Top\n\nSee [docs](docs/a.md#a-heading) and [web](https://x.y/z).\n")
            with open(os.path.join(root, "docs", "a.md"), "w") as f:
                f.write("# A heading\n\n## Twice\n\n## Twice\n\n[ok](#twice-1) [bad](#twice-2)\n"
                        "[gone](sub/missing.md) [up](../../outside.md)\n\n```\n[x](nowhere.md)\n"
                        "```\n`[y](nowhere.md)`\n![pic](sub/)\n[ref]: a.md#nope\n")
            problems = check(root)
        self.assertEqual(problems, [
            "docs/a.md:7: #twice-2: no heading of docs/a.md has the anchor #twice-2",
            "docs/a.md:8: sub/missing.md: docs/sub/missing.md does not exist",
            "docs/a.md:8: ../../outside.md: points outside the repository",
            "docs/a.md:15: a.md#nope: no heading of docs/a.md has the anchor #nope"])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", help="check this checkout and exit (no unit tests)")
    args, rest = ap.parse_known_args()
    if args.root:
        problems = check(args.root)
        print("\n".join(problems) or f"{len(pages(args.root))} pages: every link resolves")
        sys.exit(1 if problems else 0)
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
