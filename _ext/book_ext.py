"""Two fixes to the rendered pages, found by the offline page test (tests/pages), and a
quiet one-chapter build:

* jupyter-book 1 and sphinx-thebe both register thebe's inline configuration script,
  so every page declared ``const THEBE_JS_URL`` twice, a console SyntaxError; each
  script is kept once.
* pydata-sphinx-theme logs "Got invalid theme mode" when no default mode is set.
* ``make chapter`` stages the chapters it has not executed as their source
  (``lib.booktools stage --partial``), pages whose glue keys and glued figures do not
  exist: a thousand warnings about pages nobody asked for. The pages that the staging
  lists in ``_not_executed.txt`` give no warnings; the others give all theirs.
"""

import logging
from pathlib import Path

NOT_EXECUTED = "_not_executed.txt"  # written by lib.booktools stage --partial


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


def setup(app):
    app.connect("html-page-context", _fix_page)
    _quiet_for_pages_not_executed(app)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
