"""The book's additions to the rendered pages.

* Every glued value is rendered by the book's one formatter (``lib.book.page.render_glued``):
  a missing value shows as "—" whatever its format spec, never as ``nan``.
* The book's stylesheet (``book.css``, beside this file): display equations never run out
  of the column, and the opening box is set apart.
* The footer names the build's date and commit; every chapter can be downloaded as its
  MyST-Markdown source (``.md``) beside the executed notebook (``.ipynb``).
* Two fixes found by the offline page test (tests/pages): jupyter-book 1 and sphinx-thebe
  both register thebe's inline configuration script, so every page declared ``const
  THEBE_JS_URL`` twice (a console SyntaxError), and each script is kept once;
  pydata-sphinx-theme logs "Got invalid theme mode" when no default mode is set.
* A quiet one-chapter build: ``make chapter`` stages the chapters it has not executed as
  their source (``bookbuild stage --partial``), pages whose glue keys and glued figures
  do not exist: a thousand warnings about pages nobody asked for. The pages that the
  staging lists in ``_not_executed.txt`` give no warnings; the others give all theirs.
"""

import datetime
import logging
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
MD_FOLDER = "md"  # where the chapters' Markdown sources are served (bookbuild.stage)


def _render_glue_with_the_books_formatter():
    from myst_nb.ext.glue import crossref, roles

    from lib.book.page import render_glued

    roles.format_plain_text = render_glued
    crossref.format_plain_text = render_glued


def _commit(root: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=10, check=True)  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()  # fmt: skip
        return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _footer(app, config):
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    text = f"Built {date} from commit {_commit(Path(app.srcdir))}."
    opts = dict(config.html_theme_options or {})
    opts["extra_footer"] = f'<p class="book-build">{text}</p>'
    config.html_theme_options = opts


def _static(app):
    app.config.html_static_path.append(str(HERE / "static"))


NOT_EXECUTED = "_not_executed.txt"  # written by bookbuild stage --partial


class _NotExecuted(logging.Filter):
    """Drops the warnings located in the pages not executed (before Sphinx counts them)."""

    def __init__(self, docnames):
        super().__init__()
        self.docnames = docnames
        self.dropped = 0

    def filter(self, record):
        from docutils import nodes
        from sphinx.util.logging import get_node_location

        location = getattr(record, "location", None)
        if isinstance(location, tuple):
            location = location[0]
        elif isinstance(location, nodes.Node):
            location = get_node_location(location)
        where = str(location or "")
        for doc in self.docnames:
            if where == doc or where.startswith(f"{doc}.") or f"/{doc}." in where:
                self.dropped += 1
                return False
        return True


def _quiet_for_pages_not_executed(app):
    listed = Path(app.srcdir) / NOT_EXECUTED
    if not listed.is_file():
        return
    quiet = _NotExecuted([d for d in listed.read_text().split() if d])
    for handler in logging.getLogger("sphinx").handlers:
        if type(handler).__name__ == "WarningStreamHandler":
            handler.filters.insert(0, quiet)  # before Sphinx's own filters count it

    def said(app, exception):
        from sphinx.util import logging as sphinx_logging

        if quiet.dropped:
            sphinx_logging.getLogger(__name__).info(
                f"({quiet.dropped} warnings about the pages not executed are not shown)"
            )

    app.connect("build-finished", said)


def _fix_page(app, pagename, templatename, context, doctree):
    seen, kept = set(), []
    for js in context.get("script_files", []):
        key = (getattr(js, "filename", None) or "", repr(getattr(js, "attributes", {})))
        if key not in seen:
            seen.add(key)
            kept.append(js)
    context["script_files"] = kept
    if not context.get("default_mode"):
        context["default_mode"] = "light"


def _download_markdown(app, pagename, templatename, context, doctree):
    """A chapter's download menu also offers its MyST-Markdown source."""
    if not (Path(app.srcdir) / "_extra" / MD_FOLDER / f"{pagename}.md").is_file():
        return
    for group in context.get("header_buttons", []):
        if group.get("label") == "download-buttons":
            group["buttons"].insert(0, {
                "type": "link",
                "url": context["pathto"](f"{MD_FOLDER}/{pagename}.md", 1),
                "text": ".md",
                "tooltip": "Download the chapter's source (MyST Markdown, opens in Jupyter "
                           "with jupytext)",
                "icon": "fas fa-file-lines",
                "label": "download-markdown-button",
            })  # fmt: skip


def setup(app):
    _render_glue_with_the_books_formatter()
    app.connect("config-inited", _footer)
    app.connect("builder-inited", _static)
    app.add_css_file("book.css")
    app.connect("html-page-context", _fix_page)
    app.connect("html-page-context", _download_markdown, priority=502)
    _quiet_for_pages_not_executed(app)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
