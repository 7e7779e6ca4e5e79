"""results_lib.csv_io and results_lib.markdown: writing rows and generated blocks."""
import os
import tempfile
import unittest

from results_lib import csv_io, markdown


class CsvIoTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_write_rows_takes_every_key_in_first_seen_order(self):
        path = os.path.join(self.tmp.name, "a.csv")
        csv_io.write_rows(path, [{"a": 1, "b": 2}, {"a": 3, "c": 4}])
        with open(path) as f:
            self.assertEqual(f.read(), "a,b,c\n1,2,\n3,,4\n")
        self.assertEqual(csv_io.read_rows(path)[1], {"a": "3", "b": "", "c": "4"})

    def test_append_rows_writes_the_header_once(self):
        path = os.path.join(self.tmp.name, "sub", "b.csv")
        csv_io.append_rows(path, [{"x": 1}], ["x", "y"])
        csv_io.append_rows(path, [{"x": 2, "y": 3, "z": 9}], ["x", "y", "z"])
        with open(path) as f:
            self.assertEqual(f.read(), "x,y\n1,\n2,3\n")


class MarkdownTest(unittest.TestCase):
    BEGIN, END = "<!-- t:begin -->", "<!-- t:end -->"

    def test_replace_block_keeps_the_markers_and_the_rest(self):
        text = f"# Page\n\n{self.BEGIN}\nold\n{self.END}\ntail\n"
        self.assertEqual(markdown.replace_block(text, self.BEGIN, self.END, "| new |"),
                         f"# Page\n\n{self.BEGIN}\n| new |\n{self.END}\ntail\n")

    def test_a_page_without_markers_is_refused_unchanged(self):
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            f.write("# no markers\n")
        try:
            with self.assertRaisesRegex(markdown.MarkersMissing, "t:begin"):
                markdown.rewrite_block(f.name, self.BEGIN, self.END, "x")
            with open(f.name) as g:
                self.assertEqual(g.read(), "# no markers\n")
        finally:
            os.unlink(f.name)

    def test_a_new_page_starts_from_its_template(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.md")
            markdown.rewrite_block(path, self.BEGIN, self.END, "body",
                                   new_page=f"# T\n{self.BEGIN}\n{self.END}\n")
            with open(path) as f:
                self.assertEqual(f.read(), f"# T\n{self.BEGIN}\nbody\n{self.END}\n")


if __name__ == "__main__":
    unittest.main()
