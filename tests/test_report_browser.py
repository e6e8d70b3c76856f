"""report.html rendered by a real browser: Debian's ``chromium``, headless.

Checks a screenshot (exists, the window's size, not blank) and that every image loads (a copy of
the page with a small script that, after the load event, writes how many ``<img>`` elements have
no decoded pixels into the DOM, read back with ``--dump-dom``). Without chromium the tests skip on
a developer's machine and fail under CI (``CI`` set): ``.ci/run`` installs it."""

import os
import re
import shutil
import subprocess

import pytest

from fastblox.report import write_report
from fastblox.sweep import run_sweep

WIDTH, HEIGHT = 1280, 1600
#: counts the images that did not load once the page (and so every image) has loaded
CHECK = ('<script>window.addEventListener("load",function(){var im=document.images,b=0;'
         'for(var i=0;i<im.length;i++){if(!im[i].complete||im[i].naturalWidth===0)b++;}'
         'var d=document.createElement("div");d.id="img-check";d.setAttribute("data-total",im.length);'
         'd.setAttribute("data-broken",b);document.body.appendChild(d);});</script>')
BROKEN_IMG = '<img src="data:image/png;base64,AAAA" alt="broken on purpose">'


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    msg = "chromium is not installed (Debian: apt-get install -y chromium)"
    if os.environ.get("CI"):
        pytest.fail(msg + ": CI must have it (.ci/run installs it)")
    pytest.skip(msg)


def _run(args, tmp_path) -> subprocess.CompletedProcess:
    # --no-sandbox: CI runs as root; a private profile folder so runs never share state
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A plain sweep folder's report (the figures drawn by the report itself)."""
    root = tmp_path_factory.mktemp("browser") / "sweep"
    cfg = {"base": {"workload": "gavel", "num_jobs": 120, "cluster": "4x4"},
           "grid": {"policy": ["fifo", "srtf"], "load": [3, 6]}, "seeds": [0, 1]}
    assert run_sweep(cfg, root, executor="serial", progress=False).ok
    return write_report(root)


def _image_check(html_path, tmp_path, extra: str = "") -> tuple[int, int]:
    page = tmp_path / "check.html"
    page.write_text(html_path.read_text().replace("</body>", extra + CHECK + "</body>"))
    r = _run(["--virtual-time-budget=10000", "--dump-dom", page.as_uri()], tmp_path)
    m = re.search(r'<div id="img-check" data-total="(\d+)" data-broken="(\d+)">', r.stdout)
    assert m, f"no image check in chromium's DOM (exit {r.returncode}): {r.stderr[-2000:]}"
    return int(m.group(1)), int(m.group(2))


def test_screenshot(report, tmp_path):
    from PIL import Image

    shot = tmp_path / "report.png"
    r = _run([f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", report.as_uri()], tmp_path)
    assert shot.is_file(), f"chromium wrote no screenshot (exit {r.returncode}): {r.stderr[-2000:]}"
    with Image.open(shot) as im:
        assert im.size == (WIDTH, HEIGHT)
        rgb = im.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20)
    # a rendered table and plots: many colours, and much of the page not white
    assert colours is not None and len(colours) > 200
    white = sum(n for n, c in colours if c == (255, 255, 255))
    assert white < 0.9 * WIDTH * HEIGHT


def test_no_broken_images(report, tmp_path):
    n_img = report.read_text().count("<img")
    assert n_img == 4  # avg and p99 JCT vs load and a JCT CDF per load, drawn by the report
    assert _image_check(report, tmp_path) == (n_img, 0)
    # the check itself sees a broken image
    assert _image_check(report, tmp_path, BROKEN_IMG) == (n_img + 1, 1)
