"""Generated blocks of the results pages: the text between two marker comments."""


class MarkersMissing(ValueError):
    pass


def replace_block(text, begin, end, body):
    """`text` with what lies between the lines `begin` and `end` replaced by `body` (the
    markers stay). Raises MarkersMissing naming the marker it lacks."""
    for marker in (begin, end):
        if marker not in text:
            raise MarkersMissing(f"no {marker} marker")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def rewrite_block(path, begin, end, body, new_page=""):
    """Rewrites the generated block of the page at `path` (see replace_block). A page
    that does not exist yet is `new_page`, which must hold the markers."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = new_page
    text = replace_block(text, begin, end, body)
    with open(path, "w") as f:
        f.write(text)
