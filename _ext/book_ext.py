"""Two fixes to the rendered pages, found by the offline page test (tests/pages):

* jupyter-book 1 and sphinx-thebe both register thebe's inline configuration script,
  so every page declared ``const THEBE_JS_URL`` twice, a console SyntaxError; each
  script is kept once.
* pydata-sphinx-theme logs "Got invalid theme mode" when no default mode is set.
"""


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
    return {"parallel_read_safe": True, "parallel_write_safe": True}
