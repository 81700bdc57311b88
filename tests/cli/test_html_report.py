"""``rooftop profile --html`` and ``rooftop train --html``: one self-contained page, every name escaped, loaded
in a real headless Chromium (Debian's ``chromium``; these tests skip without it)."""

import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from rooftop.report.html import CSP, SCRIPT, STYLE, _hash
from tests.conftest import run_cli

SCRIPT_NAME = "<script>document.title='pwned'</script>"
IMG_NAME = "<img src=x onerror=\"document.title='img'\">"
KERNELS = [(SCRIPT_NAME, 12.5), ("gemm_kernel", 40.0), (IMG_NAME, 3.0), ("</td></tr></table><b>x", 7.0)]
TRAIN = ["train", "llama-3-8b", "--chip", "h100", "--chips", "8", "--batch-tokens", "256Ki", "--seq-len", "4096"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


def _evil_trace(path: Path) -> Path:
    """A GPU trace (JAX's JSON form) whose kernels have hostile names, each run 3 times."""
    events = [
        {"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "pid": 1, "tid": 7, "name": "thread_name", "args": {"name": "Stream #7"}},
    ]
    t = 0.0
    for _ in range(3):
        for name, dur in KERNELS:
            events.append({"ph": "X", "pid": 1, "tid": 7, "name": name, "ts": t, "dur": dur, "args": {}})
            t += dur + 1
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _references(text: str) -> list[str]:
    """Every src, href, action, poster or srcset of an element of the page (what a browser would fetch)."""
    from html.parser import HTMLParser

    found: list[str] = []

    class Refs(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.extend(v or "" for k, v in attrs if k in ("src", "href", "action", "poster", "srcset", "data"))

    Refs().feed(text)
    return found


def _chromium(*args: str) -> subprocess.CompletedProcess:
    assert CHROMIUM is not None
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=False)


def _png_pixels(path: Path) -> tuple[int, int, set[bytes]]:
    """(width, height, distinct pixels of the first rows) of an 8-bit RGB(A) PNG, read with zlib alone."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6)
    raw = zlib.decompress(idat)
    stride = 1 + width * (3 if colour == 2 else 4)
    rows = [raw[i * stride + 1 : (i + 1) * stride] for i in range(min(height, 400))]
    px = 3 if colour == 2 else 4
    # filters aside, a blank page has one byte pattern throughout; a drawn one has many
    return width, height, {row[i : i + px] for row in rows for i in range(0, len(row), px * 7)}


@pytest.fixture(scope="module")
def profile_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("html")
    page = folder / "report.html"
    code, _out, err = run_cli("profile", str(_evil_trace(folder / "evil.trace.json")), "--chip", "h100",
                              "--html", str(page))  # fmt: skip
    assert code == 0, err
    return page


def test_profile_page_is_self_contained_and_escaped(profile_page: Path) -> None:
    text = profile_page.read_text()
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP.replace(chr(39), "&#x27;")}">' in text
    assert "default-src 'none'" in CSP and _hash(SCRIPT) in CSP and _hash(STYLE) in CSP
    assert text.count("<script>") == 1 and SCRIPT_NAME not in text and IMG_NAME not in text
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in text
    refs = _references(text)
    assert refs and all(r.startswith("data:image/png;base64,") for r in refs)  # nothing to fetch
    assert not re.search(r"https?://", text)
    assert text.count('src="data:image/png;base64,') == 1


@needs_chromium
def test_profile_page_in_headless_chromium(profile_page: Path, tmp_path: Path) -> None:
    run = _chromium("--dump-dom", profile_page.as_uri() + "#sort=3")
    assert run.returncode == 0, run.stderr[-2000:]
    dom = run.stdout
    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert title and "pwned" not in title.group(1) and "img" != title.group(1)  # no script from the input ran
    first = dom[dom.index('<table class="sortable">') : dom.index("</table>")]
    cells = re.findall(r'<tr><td class="name" data-v="[^"]*">([^<]*)</td>', first)
    # the four kernels, as text, sorted by the script (#sort=3: op, runs, measured, total time: ascending)
    assert cells == [
        "&lt;img src=x onerror=\"document.title='img'\"&gt;",
        "&lt;/td&gt;&lt;/tr&gt;&lt;/table&gt;&lt;b&gt;x",
        "&lt;script&gt;document.title='pwned'&lt;/script&gt;",
        "gemm_kernel",
    ]
    assert 'aria-sort="ascending"' in first  # the page's own script ran (allowed by its hash)
    assert "<img" not in dom.replace('<img class="chart"', "")  # the hostile <img> is not an element
    shot = tmp_path / "shot.png"
    run = _chromium(f"--screenshot={shot}", "--window-size=1280,1600", profile_page.as_uri())
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    width, height, pixels = _png_pixels(shot)
    assert (width, height) == (1280, 1600) and len(pixels) > 20  # not a blank page


@needs_chromium
def test_train_page_in_headless_chromium(tmp_path: Path) -> None:
    page = tmp_path / "train.html"
    code, out, err = run_cli(*TRAIN, "--top", "3", "--json", "--html", str(page))
    assert code == 0, err
    best = json.loads(out)["best"]
    text = page.read_text()
    assert best["parallelism"]["label"] in text and not re.search(r"https?://", text)
    run = _chromium("--dump-dom", page.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    tables = re.findall(r'<table class="sortable">(.*?)</table>', run.stdout, re.S)
    assert len(tables) == 3  # the step part by part, the ranked layouts, the memory
    ranked = re.findall(r"<tr><td[^>]*>([0-9]+)</td>", tables[1])
    assert ranked == ["1", "2", "3"]
    parts = re.findall(r'<tr><td class="name" data-v="([a-z_]+)">([a-z ]+)</td>', tables[0])
    assert ("compute_forward", "compute forward") in parts


def test_html_bad_path_is_one_line(tmp_path: Path) -> None:
    code, _out, err = run_cli(*TRAIN, "--html", str(tmp_path / "report.txt"))
    assert code == 2 and err.count("\n") == 1 and "must end in .html, .htm" in err
    assert list(tmp_path.iterdir()) == []
