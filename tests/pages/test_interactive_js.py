"""The slider figure's JavaScript, run in headless chromium: moving the slider redraws."""

from lib.book.interactive import slider_figure


def test_the_slider_redraws_the_curve(browser, tmp_path):
    import numpy as np

    x = np.geomspace(1, 100, 20)
    values = [0.5, 1.0, 2.0]
    curves = {"alpha": np.stack([1 - np.exp(-x / (10 * v)) for v in values])}
    page = tmp_path / "fig.html"
    page.write_text("<html><body>" + slider_figure(x, values, curves, param="r", xlabel="step",
                                                   ylabel="alpha") + "</body></html>")  # fmt: skip
    browser.get_log("browser")
    browser.get(page.as_uri())
    read = "return document.querySelectorAll('path[stroke-width]')[0].getAttribute('d')"
    before = browser.execute_script(read)
    browser.execute_script(
        "const s = document.querySelector('input[type=range]'); s.value = 0;"
        "s.dispatchEvent(new Event('input'));"
    )
    after = browser.execute_script(read)
    assert before and after and before != after
    assert browser.execute_script("return document.querySelector('output').textContent") == "0.5"
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
