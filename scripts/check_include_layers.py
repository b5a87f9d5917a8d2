#!/usr/bin/env python3
"""Checks that each library's sources include only the headers its layer may.

The rule is the table in docs/architecture.md (between the
`<!-- layers:libraries -->` and `<!-- layers:exceptions -->` markers): one
row per library with the paths it owns, the libraries whose headers it may
include and the third-party headers it may include. This script only reads
and enforces it, so the drawing and the check cannot disagree.

    scripts/check_include_layers.py [--root DIR] [--doc FILE] [--graph | --list-dirs]

Every .c/.h under a directory some row owns must belong to exactly one
library (the longest owned path that holds it). For each `#include`:

  "x.h"   resolved as the compiler would: next to the including file, then
          in the components' include directories (INCLUDE_ROOTS below). A
          header of the same library is always allowed; a public header of
          another library (one under an `include/nimble/` directory) needs
          that library in the row's "may include"; any other header of
          another library (its internal ones) needs "NAME (internal too)".
          A name found nowhere must be one the row owns as generated.
  <x.h>   a C, POSIX or compiler header (SYSTEM_HEADERS) is allowed
          everywhere; anything else is third-party and must be in the row's
          third-party column (by its first path component, ".h" dropped:
          <llvm-c/Core.h> is llvm-c, <jansson.h> is jansson).

Exit status 0 when every include is allowed, 1 with one line per violation
(file:line, the header, whose it is and what the row allows), 2 when the
table itself cannot be read. --graph prints the include graph between
libraries as it is (for drawing), without judging it.
"""
import argparse
import os
import re
import sys
from collections import defaultdict

# Where a quoted include is looked for after the including file's own
# folder: the directories the components' CMakeLists put on include paths.
INCLUDE_ROOTS = (
    "base/include",
    "format/include",
    "format/internal",
    "protocol/include",
    "runtime/include",
    "runtime/src",
    "runtime/tools",
    "artifact-store/include",
    "compile-workers/include",
    "compile-workers/compiler",
    "client/include",
    "client/src",
    "scheduler/include",
)

# Headers of the C library, POSIX, Linux and the compilers' intrinsics:
# allowed everywhere (libc-only is the floor). Anything else in <> is
# third-party. A new system header is added here.
SYSTEM_HEADERS = set(
    """assert.h complex.h ctype.h errno.h fenv.h float.h inttypes.h iso646.h
    limits.h locale.h math.h setjmp.h signal.h stdalign.h stdarg.h stdatomic.h
    stdbool.h stddef.h stdint.h stdio.h stdlib.h stdnoreturn.h string.h
    tgmath.h threads.h time.h uchar.h wchar.h wctype.h
    dirent.h dlfcn.h fcntl.h fnmatch.h ftw.h glob.h grp.h libgen.h netdb.h
    poll.h pthread.h pwd.h regex.h sched.h semaphore.h spawn.h strings.h syslog.h
    termios.h unistd.h
    cpuid.h immintrin.h x86intrin.h arm_neon.h arm_acle.h""".split())
SYSTEM_PREFIXES = ("sys/", "netinet/", "arpa/", "linux/", "asm/")

LIBRARIES_MARK = "<!-- layers:libraries -->"
EXCEPTIONS_MARK = "<!-- layers:exceptions -->"
INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.M)


class TableError(Exception):
    pass


def table_rows(text, mark, what):
    """The body rows (lists of cells) of the markdown table after `mark`."""
    at = text.find(mark)
    if at < 0:
        raise TableError(f"no {mark} marker before the {what} table")
    rows = []
    for line in text[at + len(mark):].lstrip("\n").splitlines():
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue
        rows.append(cells)
    if not rows:
        raise TableError(f"no {what} table right after {mark}")
    return rows[1:]  # the first row is the header


def code_spans(cell):
    return re.findall(r"`([^`]+)`", cell)


def parse_rules(doc_path):
    """{library: {owns, generated, may, internal, third_party}} and
    {file: set of headers} from docs/architecture.md."""
    with open(doc_path, encoding="utf-8") as f:
        text = f.read()
    libs = {}
    for cells in table_rows(text, LIBRARIES_MARK, "libraries"):
        if len(cells) != 5:
            raise TableError(f"libraries row {cells!r}: want 5 cells (library | target | owns | may include | third-party)")
        names = code_spans(cells[0])
        if len(names) != 1:
            raise TableError(f"libraries row {cells!r}: the first cell names one library in backquotes")
        name = names[0]
        if name in libs:
            raise TableError(f"library {name} has two rows")
        owns, generated = [], []
        for span in code_spans(cells[2]):
            # "onnx.pb-c.h (generated)": a header made in the build tree.
            if "/" not in span:
                generated.append(span)
            else:
                owns.append(span)
        if not owns:
            raise TableError(f"library {name} owns no path")
        may, internal = set(), set()
        for m in re.finditer(r"([a-z][a-z0-9-]*)(\s*\(internal too\))?", cells[3]):
            may.add(m.group(1))
            if m.group(2):
                internal.add(m.group(1))
        third = set(re.findall(r"[a-z][a-z0-9_-]*", cells[4]))
        libs[name] = dict(owns=owns, generated=generated, may=may, internal=internal, third_party=third)
    if not libs:
        raise TableError("the libraries table has no rows")
    for name, lib in libs.items():
        for other in lib["may"]:
            if other not in libs:
                raise TableError(f"library {name} may include '{other}', which has no row")
    exceptions = defaultdict(set)
    for cells in table_rows(text, EXCEPTIONS_MARK, "exceptions"):
        spans = code_spans(cells[0]) if cells else []
        headers = code_spans(cells[1]) if len(cells) > 1 else []
        if len(cells) != 3 or len(spans) != 1 or not headers or not cells[2]:
            raise TableError(f"exceptions row {cells!r}: want `file` | `header`... | why")
        exceptions[spans[0]].update(headers)
    return libs, exceptions


def owner_of(path, libs):
    """The library owning `path` (relative, '/'-separated): the longest
    owned path that is it or a folder holding it."""
    best, best_len = None, -1
    for name, lib in libs.items():
        for p in lib["owns"]:
            if (path == p or (p.endswith("/") and path.startswith(p))) and len(p) > best_len:
                best, best_len = name, len(p)
    return best


def source_files(root, libs):
    tops = sorted({p.split("/")[0] for lib in libs.values() for p in lib["owns"]})
    out = []
    for top in tops:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for fn in sorted(filenames):
                if fn.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/"))
    return out


def resolve(root, including, name):
    """The tree path a quoted include names, or None."""
    here = os.path.normpath(os.path.join(os.path.dirname(including), name)).replace(os.sep, "/")
    if os.path.isfile(os.path.join(root, here)):
        return here
    for inc_root in INCLUDE_ROOTS:
        cand = f"{inc_root}/{name}"
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def is_public(path):
    return "/include/nimble/" in path


def describe(lib):
    may = ", ".join(f"{m} (internal too)" if m in lib["internal"] else m for m in sorted(lib["may"]))
    return may or "nothing but its own headers"


def check(root, doc, graph=False):
    libs, exceptions = parse_rules(doc)
    files = source_files(root, libs)
    errors = []
    edges = defaultdict(set)
    for path in files:
        me = owner_of(path, libs)
        if me is None:
            errors.append(f"{path}: no library owns this file (add its path to a row of {doc})")
            continue
        lib = libs[me]
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in INCLUDE_RE.finditer(text):
            kind, name = m.group(1), m.group(2)
            line = text.count("\n", 0, m.start()) + 1
            where = f"{path}:{line}"
            if name in exceptions.get(path, ()):
                continue
            if kind == "<" and not name.startswith("nimble/"):
                if name in SYSTEM_HEADERS or name.startswith(SYSTEM_PREFIXES):
                    continue
                pkg = name.split("/")[0]
                pkg = pkg[:-2] if pkg.endswith(".h") else pkg
                edges[me].add(f"<{pkg}>")
                if pkg not in lib["third_party"]:
                    allowed = ", ".join(sorted(lib["third_party"])) or "none"
                    errors.append(f"{where}: {me} may not include <{name}> (third-party '{pkg}'; "
                                  f"{me} may use: {allowed})")
                continue
            target = resolve(root, path, name)
            if target is None:
                if name in lib["generated"]:
                    continue
                errors.append(f"{where}: \"{name}\" is no header of the tree (nor one {me} generates)")
                continue
            them = owner_of(target, libs)
            if them is None:
                errors.append(f"{where}: \"{name}\" ({target}) belongs to no library")
                continue
            if them == me:
                continue
            public = is_public(target)
            edges[me].add(them if public else f"{them} (internal)")
            if them not in lib["may"]:
                errors.append(f"{where}: {me} may not include \"{name}\" (a header of {them}); "
                              f"{me} may include: {describe(lib)}")
            elif not public and them not in lib["internal"]:
                errors.append(f"{where}: \"{name}\" is internal to {them} ({target}); "
                              f"{me} may include only {them}'s public headers")
    if graph:
        for name in libs:
            print(f"{name}: {', '.join(sorted(edges[name])) or '-'}")
    return errors, len(files)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(here), help="the source tree (default: this checkout)")
    ap.add_argument("--doc", help="the rule table (default: ROOT/docs/architecture.md)")
    ap.add_argument("--graph", action="store_true", help="print the include graph between libraries")
    ap.add_argument("--list-dirs", action="store_true",
                    help="print the top-level folders the table owns, one a line (for the build's globbing)")
    args = ap.parse_args()
    doc = args.doc or os.path.join(args.root, "docs", "architecture.md")
    try:
        if args.list_dirs:
            libs, _ = parse_rules(doc)
            print("\n".join(sorted({p.split("/")[0] for lib in libs.values() for p in lib["owns"]})))
            return 0
        errors, count = check(args.root, doc, args.graph)
    except (TableError, OSError) as e:
        print(f"check_include_layers: {doc}: {e}", file=sys.stderr)
        return 2
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"check_include_layers: {len(errors)} include(s) break the layers of docs/architecture.md",
              file=sys.stderr)
        return 1
    print(f"check_include_layers: {count} files, every include allowed by docs/architecture.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
