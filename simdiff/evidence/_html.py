"""The report as one self-contained HTML page: the markdown rendered, the figures inline.

:func:`render_html` turns the text of ``report.md`` into a page that can be
mailed on its own: Python-Markdown (``tables`` and ``fenced_code``) renders
it, every ``<img>`` that names a file beside the report gets that file as a
base64 ``data:`` URI, and a short stylesheet in the page's head draws table
borders and puts verdict words in bold colour.
"""

from __future__ import annotations

import base64
import html
import mimetypes
import re
from pathlib import Path

from simdiff.errors import InputError

__all__ = ["render_html"]

#: Verdict words (the claims' outcomes and the check verdicts) that get a colour class.
VERDICT_CLASSES = {
    "confirmed": "good",
    "pass": "good",
    "refuted": "bad",
    "never": "bad",
    "fail": "bad",
    "error": "bad",
    "depends": "mixed",
    "unstable": "mixed",
    "inconclusive": "mixed",
    "not measurable": "none",
    "not measured": "none",
}

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
       max-width: 72rem; margin: 1.5rem auto; padding: 0 1rem; line-height: 1.45;
       color: #1b1b1b; }
h1, h2, h3 { line-height: 1.2; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.88rem; }
th, td { border: 1px solid #999; padding: 0.25rem 0.45rem; vertical-align: top;
         text-align: left; }
th { background: #eee; }
tr:nth-child(even) td { background: #fafafa; }
strong { font-weight: 700; }
strong.good { color: #176b1d; }
strong.bad { color: #a3161b; }
strong.mixed { color: #9a5a00; }
strong.none { color: #555; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
            font-size: 0.85rem; background: #f3f3f3; }
pre { padding: 0.6rem; overflow-x: auto; white-space: pre-wrap; }
img { max-width: 100%; height: auto; border: 1px solid #ddd; }
"""

_CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)
_SRC = re.compile(r'(<img\b[^>]*?\bsrc=")([^"]*)(")')
_STRONG = re.compile(r"<strong>([^<]*)</strong>")


def _escape_outside_code(text: str) -> str:
    """``<`` as ``&lt;`` outside code spans and fences, so no stored text becomes a tag.

    The report holds no HTML of its own; a ``<`` in an error message or a
    ``repr`` (``<lambda>``) would otherwise open an element that is never
    closed.  Code is left alone: Python-Markdown escapes it itself.
    """
    pieces = _CODE.split(text)
    return "".join(p if i % 2 else p.replace("<", "&lt;") for i, p in enumerate(pieces))


def _inline(match: re.Match[str], base: Path) -> str:
    src = html.unescape(match.group(2))
    if src.startswith("data:"):
        return match.group(0)
    path = base / src
    if "://" in src or not path.is_file():
        raise InputError(
            f"report.html: the figure {src!r} is not a file beside the report in {base}"
        )
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"{match.group(1)}data:{mime};base64,{data}{match.group(3)}"


def _verdict_class(match: re.Match[str]) -> str:
    cls = VERDICT_CLASSES.get(match.group(1).strip().lower())
    return f'<strong class="{cls}">{match.group(1)}</strong>' if cls else match.group(0)


def render_html(markdown_text: str, base: Path, title: str = "simdiff report") -> str:
    """The page for ``markdown_text``, its images read from ``base`` and inlined.

    Parameters
    ----------
    markdown_text : str
        The report's markdown (``report.md``).
    base : Path
        The directory the markdown's image paths are relative to.
    title : str
        The page's ``<title>``.

    Returns
    -------
    str
        A complete HTML5 document that refers to no other file.

    Raises
    ------
    InputError
        An image the markdown names is not a file in ``base``.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> page = render_html("# r\\n\\n| a | b |\\n|---|---|\\n| **pass** | x < y |", Path("."))
    >>> '<strong class="good">pass</strong>' in page, "x &lt; y" in page
    (True, True)
    """
    import markdown

    body = markdown.markdown(
        _escape_outside_code(markdown_text), extensions=["tables", "fenced_code"]
    )
    body = _SRC.sub(lambda m: _inline(m, base), body)
    body = _STRONG.sub(_verdict_class, body)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )
