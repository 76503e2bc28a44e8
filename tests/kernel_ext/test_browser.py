"""JupyterLab in a real browser: the widgets render and respond (headless Chromium + Selenium).

Starts ``jupyter lab`` on 127.0.0.1, opens a notebook that loads the extension, runs a
``%%schedule`` cell, a pin panel and a short ``%tune``, then checks the DOM (the widgets'
elements, not just the absence of errors), clicks a stepper button and picks a pin in the
browser, and saves screenshots under ``tests/artifacts/`` (gitignored).

Needs the jupyter extra, ``selenium``, and Debian's ``chromium`` and ``chromium-driver``
(``apt-get install chromium chromium-driver``); skipped, saying which is missing, otherwise.
"""

import json
import os
import pathlib
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

nbformat = pytest.importorskip("nbformat", reason="the jupyter extra is not installed")
pytest.importorskip("jupyterlab", reason="the jupyter extra is not installed")
webdriver = pytest.importorskip(
    "selenium.webdriver", reason="selenium is not installed (pip install selenium)"
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

ARTIFACTS = pathlib.Path(__file__).parents[1] / "artifacts"
TUTORIALS = pathlib.Path(__file__).parents[2] / "tutorials"
LESSON = "01_ir_and_loop_nests.ipynb"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip(
        "headless Chromium is not installed (apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )

CELLS = [
    "%load_ext kernel_ext\nimport workbench as wb\nfrom kernel_ext import DecisionTree, PinPanel, TraceGraph",
    "%%schedule GMM n=32 m=32 k=32\n"
    "b = sch.get_block('Z')\n"
    "_, i, j, k = sch.get_loops(b)\n"
    "i_outer, i_inner = sch.split(i, factors=[None, 8])\n"
    "sch.reorder(i_outer, j, k, i_inner)\n"
    "sch.parallel(i_outer)",
    "func = wb.workloads.get('GMM', n=32, m=32, k=32)\n"
    "panel = PinPanel(wb.generate_design_space(func, target='llvm', seed=0)[0])\n"
    "panel",
    "TraceGraph(panel.sch)",
    "db = %tune GMM n=32 m=32 k=32 --trials 4 --per-batch 2",
    "DecisionTree.from_database(db, func)",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on localhost serving a fresh notebook; yields (url, token)."""
    root = tmp_path_factory.mktemp("lab")
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in CELLS],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    nbformat.write(nb, root / "browser_test.ipynb")
    for name in (LESSON, "checks.py"):  # a lesson of the course and its checks, side by side
        shutil.copy(TUTORIALS / name, root / name)
    port, token = _free_port(), secrets.token_hex(16)
    settings = root / ".lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # no "get notified about Jupyter news?" toast over the screenshots
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(root / ".jupyter-config"),
        "JUPYTERLAB_SETTINGS_DIR": str(root / ".lab-settings"),
    }
    log = open(root / "lab.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--allow-root",
            "--LabApp.expose_app_in_browser=True",
            "--ServerApp.disable_check_xsrf=True",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    json.load(r)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + (root / "lab.log").read_text())
                time.sleep(0.5)
        yield url, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1000",
    ):
        opts.add_argument(arg)
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    try:
        driver = webdriver.Chrome(options=opts, service=service)
    except Exception as exc:  # a browser that cannot start here is an environment problem
        pytest.skip(f"headless Chromium could not start: {exc}")
    yield driver
    driver.quit()


def _wait(driver, css: str, timeout: float = 120):
    return WebDriverWait(driver, timeout).until(
        lambda d: d.find_element(By.CSS_SELECTOR, css) if d.find_elements(By.CSS_SELECTOR, css) else False
    )


def _shot(driver, element, name: str) -> pathlib.Path:
    ARTIFACTS.mkdir(exist_ok=True)
    driver.execute_script(
        "(arguments[0].closest('.jp-Cell') || arguments[0]).scrollIntoView({block: 'start'});", element
    )
    time.sleep(0.5)
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def _open_and_run_all(browser, url: str, token: str, notebook: str) -> None:
    browser.get(f"{url}/lab/tree/{notebook}?token={token}&reset")
    WebDriverWait(browser, 90).until(
        lambda d: d.execute_script(
            "return !!(window.jupyterapp && window.jupyterapp.shell.currentWidget"
            " && window.jupyterapp.shell.currentWidget.sessionContext"
            " && window.jupyterapp.shell.currentWidget.sessionContext.session"
            " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel)"
        )
    )
    time.sleep(2)
    browser.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells');")


def test_widgets_render_and_respond_in_jupyterlab(lab, browser):
    url, token = lab
    _open_and_run_all(browser, url, token, "browser_test.ipynb")
    # widget clicks are handled by the kernel, which is busy until the last cell is done
    done = ".wb-decision-tree, .wb-decision-tree-fallback"
    errors = "[data-mime-type='application/vnd.jupyter.error']"
    WebDriverWait(browser, 400).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, done) or d.find_elements(By.CSS_SELECTOR, errors)
    )
    failed = browser.find_elements(By.CSS_SELECTOR, errors)
    assert not failed, f"a cell failed in JupyterLab: {failed[0].text[-2000:]}"
    tree = browser.find_element(By.CSS_SELECTOR, done)
    WebDriverWait(browser, 30).until(
        lambda d: (
            d.execute_script(
                "return window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status"
            )
            == "idle"
        )
    )

    # 1. the stepper: a widget with a slider, buttons and the highlighted loop nest
    stepper = _wait(browser, ".wb-stepper")
    assert "T.parallel" in stepper.text
    assert stepper.find_elements(
        By.CSS_SELECTOR, ".widget-slider, .jupyter-widget-slider, input[type=range], .noUi-target, .slider"
    )
    assert stepper.find_elements(By.CSS_SELECTOR, "[data-changed='1']")
    _shot(browser, stepper, "1_stepper_last_step")
    prev = next(b for b in stepper.find_elements(By.TAG_NAME, "button") if "prev" in b.text)
    prev.click()
    prev.click()
    WebDriverWait(browser, 30).until(lambda d: "Step 3" in stepper.text)
    _shot(browser, stepper, "2_stepper_step_3")

    # 2. the pin panel: one <select> per sampling instruction; picking one re-renders
    panel = _wait(browser, ".wb-pin-panel")
    selects = panel.find_elements(By.TAG_NAME, "select")
    assert len(selects) >= 4
    before = panel.text
    tile_j = next(
        s
        for s, label in zip(selects, panel.find_elements(By.CSS_SELECTOR, "code"))
        if "loop j " in label.text
    )
    Select(tile_j).select_by_index(2)
    WebDriverWait(browser, 30).until(lambda d: "1 pinned" in panel.text)
    assert panel.text != before
    _shot(browser, panel, "3_pin_panel_pinned")

    # 3. the graphs: the design-space trace and the tree of measured decisions (SVG with dot)
    graph = _wait(browser, ".wb-trace-graph, .wb-trace-graph-fallback")
    assert "sample_perfect_tile" in graph.text
    _shot(browser, graph, "4_trace_graph")
    assert "4 programs" in tree.find_element(By.XPATH, "..").text
    _shot(browser, tree, "6_decision_tree")

    # 4. the convergence plot: a plotly figure filled by the tuner's events
    conv = _wait(browser, ".wb-convergence")
    assert "done" in conv.text
    assert conv.find_elements(By.CSS_SELECTOR, ".js-plotly-plot, .plot-container")
    assert conv.find_elements(By.CSS_SELECTOR, ".scatterlayer .point, .scatterlayer path.js-line")
    _shot(browser, conv, "5_convergence_done")


def test_a_lesson_shows_its_exercise_feedback_in_jupyterlab(lab, browser):
    """Lesson 1 of the course, run in JupyterLab as a student would: each exercise's check
    renders its verdict (the starting points are wrong on purpose, so both say what to fix)."""
    url, token = lab
    _open_and_run_all(browser, url, token, LESSON)
    errors = "[data-mime-type='application/vnd.jupyter.error']"
    WebDriverWait(browser, 300).until(
        lambda d: (
            len(d.find_elements(By.CSS_SELECTOR, ".wb-feedback")) >= 2
            or d.find_elements(By.CSS_SELECTOR, errors)
        )
    )
    failed = browser.find_elements(By.CSS_SELECTOR, errors)
    assert not failed, f"a cell of {LESSON} failed in JupyterLab: {failed[0].text[-2000:]}"
    first, second = browser.find_elements(By.CSS_SELECTOR, ".wb-feedback")[:2]
    assert "Exercise 1" in first.text and "it computes A - B.T" in first.text
    assert "wb-feedback-wrong" in first.get_attribute("class")
    assert "Exercise 2" in second.text and "no block has a reduction axis" in second.text
    _shot(browser, first, "7_lesson_exercise_feedback")

    # the student fixes exercise 2 in its cell and runs it again: the verdict turns green
    fixed = (
        'A = wb.placeholder((32, 16), "float32", name="A")\n'
        'j = wb.reduce_axis(16, name="j")\n'
        'M = wb.compute((32,), lambda i: wb.max(A[i, j], axis=j), name="M")\n'
        'func = wb.create_func([A, M], name="row_max")\n'
        "check_exercise_2(func)"
    )
    browser.execute_script(
        "const nb = window.jupyterapp.shell.currentWidget.content;"
        "const i = nb.widgets.findIndex(c => c.model.sharedModel.getSource()"
        "                                     .includes('check_exercise_2('));"
        "nb.activeCellIndex = i;"
        "nb.widgets[i].model.sharedModel.setSource(arguments[0]);"
        "window.jupyterapp.commands.execute('notebook:run-cell');",
        fixed,
    )
    ok = WebDriverWait(browser, 120).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".wb-feedback-ok"))[0]
    assert "Exercise 2" in ok.text and "M = A.max(axis=1)" in ok.text
    _shot(browser, ok, "8_lesson_exercise_fixed")
