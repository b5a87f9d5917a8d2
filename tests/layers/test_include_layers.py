#!/usr/bin/env python3
"""scripts/check_include_layers.py catches every kind of include the table of
docs/architecture.md forbids, and only those: on small trees made here
(each rule once allowed, once broken) and on a copy of this source tree
with forbidden includes added to real files."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ.get("NIMBLE_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SOURCE, "scripts", "check_include_layers.py")

# A three-library table over folders named like the real ones (the
# checker's include roots are the real components' include folders).
SMALL_DOC = """\
# layers

<!-- layers:libraries -->
| library | CMake target | owns | may include | third-party |
|---|---|---|---|---|
| `base` | b | `base/` | — | — |
| `format` | f | `format/` | base | dlpack |
| `runtime` | r | `runtime/` | base, format{internal} | {third} |

<!-- layers:exceptions -->
| file | may also include | why |
|---|---|---|
{exceptions}
"""


def run(root, doc=None):
    args = [sys.executable, SCRIPT, "--root", root]
    if doc:
        args += ["--doc", doc]
    p = subprocess.run(args, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


class SmallTree(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="nimble-layers-")
        self.addCleanup(shutil.rmtree, self.root)
        self.write("base/include/nimble/b.h", "#include <stdint.h>\n")
        self.write("base/src/b.c", '#include <string.h>\n#include <sys/stat.h>\n#include "nimble/b.h"\n')
        self.write("format/include/nimble/f.h", '#include <dlpack/dlpack.h>\n#include "nimble/b.h"\n')
        self.write("format/internal/format/layout.h", '#include "nimble/f.h"\n')
        self.write("format/src/f.c", '#include "format/layout.h"\n#include "nimble/f.h"\n')
        self.write("runtime/include/nimble/r.h", '#include "nimble/f.h"\n')
        self.write("runtime/src/r.c", '#include "nimble/r.h"\n#include "r_internal.h"\n')
        self.write("runtime/src/r_internal.h", "#include <pthread.h>\n")
        self.doc(internal=False)

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def append(self, rel, text):
        with open(os.path.join(self.root, rel), "a") as f:
            f.write(text)

    def doc(self, internal=False, third="—", exceptions=""):
        self.write("docs/architecture.md", SMALL_DOC.format(
            internal=" (internal too)" if internal else "", third=third, exceptions=exceptions))

    def check(self):
        return run(self.root)

    def test_a_tree_that_keeps_its_layers_passes(self):
        rc, out = self.check()
        self.assertEqual(rc, 0, out)
        self.assertIn("8 files, every include allowed", out)

    def test_a_lower_library_including_a_higher_one_fails_naming_file_line_and_rule(self):
        self.append("format/src/f.c", '#include "nimble/r.h"\n')
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn('format/src/f.c:3: format may not include "nimble/r.h" (a header of runtime); '
                      "format may include: base", out)
        self.assertIn("1 include(s) break the layers", out)

    def test_a_library_may_include_nothing_its_row_does_not_name(self):
        self.append("base/src/b.c", '#include "nimble/f.h"\n')
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn('base/src/b.c:4: base may not include "nimble/f.h" (a header of format); '
                      "base may include: nothing but its own headers", out)

    def test_an_internal_header_needs_internal_too(self):
        self.append("runtime/src/r.c", '#include "format/layout.h"\n')
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn('runtime/src/r.c:3: "format/layout.h" is internal to format '
                      "(format/internal/format/layout.h); runtime may include only format's public headers", out)
        self.doc(internal=True)
        rc, out = self.check()
        self.assertEqual(rc, 0, out)

    def test_a_third_party_header_must_be_in_the_row(self):
        self.append("runtime/src/r.c", "#include <curl/curl.h>\n")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("runtime/src/r.c:3: runtime may not include <curl/curl.h> (third-party 'curl'; "
                      "runtime may use: none)", out)
        self.doc(third="curl")
        rc, out = self.check()
        self.assertEqual(rc, 0, out)

    def test_an_unknown_angle_header_is_third_party_not_libc(self):
        self.append("base/src/b.c", "#include <zlib.h>\n")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("base may not include <zlib.h> (third-party 'zlib'", out)

    def test_a_quoted_header_found_nowhere_fails(self):
        self.append("runtime/src/r.c", '#include "missing.h"\n')
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn('runtime/src/r.c:3: "missing.h" is no header of the tree', out)

    def test_a_file_no_row_owns_fails(self):
        # Narrow base to its two folders: a file beside them is nobody's.
        with open(os.path.join(self.root, "docs/architecture.md")) as f:
            text = f.read()
        self.write("docs/architecture.md", text.replace("`base/` | —", "`base/src/` `base/include/` | —"))
        rc, out = self.check()
        self.assertEqual(rc, 0, out)
        self.write("base/stray.c", "#include <stdio.h>\n")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("base/stray.c: no library owns this file", out)

    def test_an_exception_allows_that_file_and_that_header_only(self):
        self.append("format/src/f.c", '#include "nimble/r.h"\n')
        self.write("format/src/g.c", '#include "nimble/r.h"\n')
        self.doc(exceptions="| `format/src/f.c` | `nimble/r.h` | a reason |")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertNotIn("format/src/f.c", out)
        self.assertIn('format/src/g.c:1: format may not include "nimble/r.h"', out)

    def test_a_table_naming_an_unknown_library_is_refused(self):
        with open(os.path.join(self.root, "docs/architecture.md")) as f:
            text = f.read()
        self.write("docs/architecture.md", text.replace("| base, format |", "| base, formats |"))
        rc, out = self.check()
        self.assertEqual(rc, 2, out)
        self.assertIn("library runtime may include 'formats', which has no row", out)


class ThisTree(unittest.TestCase):
    """A copy of the real sources and table, with one forbidden include
    added to a real file at a time."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="nimble-layers-tree-")
        cls.root = os.path.join(cls.tmp, "src")
        listed = subprocess.run([sys.executable, SCRIPT, "--root", SOURCE, "--list-dirs"],
                                capture_output=True, text=True, check=True).stdout.split()
        keep = shutil.ignore_patterns("*.txt", "*.py", "*.md", "*.json", "*.nir", "*.ptx", "*.onnx")
        for top in listed:
            shutil.copytree(os.path.join(SOURCE, top), os.path.join(cls.root, top), ignore=keep)
        os.makedirs(os.path.join(cls.root, "docs"))
        shutil.copy(os.path.join(SOURCE, "docs", "architecture.md"), os.path.join(cls.root, "docs"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def with_line(self, rel, line):
        path = os.path.join(self.root, rel)
        with open(path) as f:
            saved = f.read()
        with open(path, "w") as f:
            f.write(saved + line + "\n")
        try:
            return run(self.root), saved.count("\n") + 1
        finally:
            with open(path, "w") as f:
                f.write(saved)

    def test_the_copy_passes_as_the_tree_does(self):
        rc, out = run(self.root)
        self.assertEqual(rc, 0, out)

    def test_the_format_may_not_include_the_runtime(self):
        (rc, out), line = self.with_line("format/src/byte_reader.c", '#include "nimble/runtime.h"')
        self.assertEqual(rc, 1, out)
        self.assertIn(f'format/src/byte_reader.c:{line}: format may not include "nimble/runtime.h" '
                      "(a header of runtime); format may include: base", out)

    def test_lowering_may_not_include_the_runtime_or_its_internals(self):
        (rc, out), line = self.with_line("compile-workers/compiler/lower/lower_module.c",
                                         '#include "nimble/runtime.h"')
        self.assertEqual(rc, 1, out)
        self.assertIn(f"lower_module.c:{line}: lower may not include \"nimble/runtime.h\" (a header of runtime)", out)
        (rc, out), line = self.with_line("compile-workers/compiler/lower/lower_module.c", '#include "vm/vm.h"')
        self.assertEqual(rc, 1, out)
        self.assertIn(f'lower_module.c:{line}: lower may not include "vm/vm.h" (a header of runtime)', out)

    def test_base_stays_libc_only(self):
        (rc, out), line = self.with_line("base/src/digest.c", "#include <jansson.h>")
        self.assertEqual(rc, 1, out)
        self.assertIn(f"base/src/digest.c:{line}: base may not include <jansson.h>", out)

    def test_the_compiler_core_may_not_reach_up_into_the_passes(self):
        (rc, out), line = self.with_line("compile-workers/compiler/typing/infer.c", '#include "nimble/passes.h"')
        self.assertEqual(rc, 1, out)
        self.assertIn(f'typing/infer.c:{line}: typing may not include "nimble/passes.h" (a header of passes)', out)

    def test_only_the_named_file_has_the_exception(self):
        (rc, out), line = self.with_line("compile-workers/compiler/ops/nn.c", '#include "nimble/typing.h"')
        self.assertEqual(rc, 1, out)
        self.assertIn(f'ops/nn.c:{line}: ir may not include "nimble/typing.h" (a header of typing)', out)

    def test_the_runtime_may_not_include_a_compiler_header(self):
        (rc, out), line = self.with_line("runtime/src/vm/vm_interpreter.c", '#include "nimble/ir.h"')
        self.assertEqual(rc, 1, out)
        self.assertIn(f'vm_interpreter.c:{line}: runtime may not include "nimble/ir.h" (a header of ir)', out)


if __name__ == "__main__":
    unittest.main()
