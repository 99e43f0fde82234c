"""Find (or download) a named dataset file and verify its SHA-256.

A name is a path relative to a dataset root, e.g. "tiny_shakespeare/input.txt". Lookup order:

1. the data dir (argument, else $ZOO_DATA_DIR, else ./data): use ``<data_dir>/<name>`` if present;
2. the mirror (argument, else $ZOO_DATA_MIRROR): a local folder laid out like shared/data (the file is
   used in place, never copied) or a URL base (http://, https://, file://) downloaded into the data dir;
3. the upstream URL of the dataset, downloaded into the data dir.

Every file is checked against the SHA-256 in FILES before it is returned. A user's own file is not a name:
`locate` takes either, and uses a path of the user's as it is, never checksummed.
"""

import hashlib
import http.client
import os
import tempfile
import urllib.request
from pathlib import Path

from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from zoo.errors import DataError

# name -> sha256 (from shared/data/README.md)
FILES: dict[str, str] = {
    "tiny_shakespeare/input.txt": "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    "multi30k/test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
    "multi30k/test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "multi30k/test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "multi30k/test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "multi30k/test_2017_flickr.de.gz": "a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee",
    "multi30k/test_2017_flickr.en.gz": "76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074",
    "multi30k/test_2017_flickr.fr.gz": "3ba671ceb2299f3304ffafefea7a833d08632fbaf0ba18546f8a2ec2391af496",
    "multi30k/test_2017_mscoco.de.gz": "799e4854c25d601cb6cb6be29eabe5667734c61ace2f495e03e429031a0bc338",
    "multi30k/test_2017_mscoco.en.gz": "aab300bfb4427697987e02cd0aacd44bfe8aa50456231b6474c08038bbed2b58",
    "multi30k/test_2017_mscoco.fr.gz": "754f3072ba9f124569ba5258b32730fc1d214bbf8e0c6dfb2b74401676220db0",
    "multi30k/test_2018_flickr.cs.gz": "7d0a9db904f94c554a8c58049a9f3a5357c27f46cc3d710d70cb0b4a2585b8c2",
    "multi30k/test_2018_flickr.de.gz": "ddd0130c7d97482dc5197a02141dae8dd79f20f03586c480d675c09a32daf608",
    "multi30k/test_2018_flickr.en.gz": "ef4f4844037d4c5dea75c9a8ed5fd78905967a26f67c255e230cc9780032654d",
    "multi30k/test_2018_flickr.fr.gz": "fb2b83fcceb937a4f7e3e93c1c51c22aba92f1e342391e6b5ba392b16a920501",
    "multi30k/train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "multi30k/train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "multi30k/train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "multi30k/train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "multi30k/val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "multi30k/val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "multi30k/val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "multi30k/val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "sst2/sentiment-dev": "9a6c7403b71a9b762158387afe4431253ae10cdfb2319b5275289f3766f48291",
    "sst2/sentiment-test": "4fefd1cd67526cf87ebc7fafc3afc21cc7cfa6ae53b45e74f77f9456e3c62752",
    "sst2/sentiment-train": "10a92a297ec38e262386e5a2713b4bc70e5d18ced88b7f54bd171a26e5b34ab5",
}

# dataset folder -> upstream URL base (the file name inside the folder is appended)
UPSTREAM: dict[str, str] = {
    "tiny_shakespeare": "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/",
    "multi30k": "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/",
    "sst2": "https://raw.githubusercontent.com/FreedomIntelligence/qnn/master/data/SST/Binary/",
}

TIMEOUT = 30.0  # seconds, per network operation
_URL_SCHEMES = ("http://", "https://", "file://")
_hash_cache: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, per process


def sha256sum(path: str | Path) -> str:
    """Return the hex SHA-256 of a file, cached per process while its size and mtime are unchanged.

    Args:
        path: file to hash.
    Returns:
        the 64-character lowercase hex digest.
    Raises:
        OSError: if the file cannot be read.
    """
    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    if key not in _hash_cache:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        _hash_cache[key] = h.hexdigest()
    return _hash_cache[key]


def _mismatch(name: str, where, expected: str, actual: str) -> str:
    return f"checksum mismatch for {name} at {where}: expected sha256 {expected}, got sha256 {actual}"


def _download(url: str, dest: Path, name: str, expected: str, progress: bool) -> None:
    """Stream url to a temp file next to dest, check its SHA-256, then move it into place atomically."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), disable=not progress
    )
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as f, urllib.request.urlopen(url, timeout=TIMEOUT) as r, bar:
            task = bar.add_task(f"downloading {name}", total=int(r.headers.get("Content-Length") or 0) or None)
            while chunk := r.read(1 << 16):
                f.write(chunk)
                h.update(chunk)
                bar.update(task, advance=len(chunk))
        if h.hexdigest() != expected:
            raise DataError(_mismatch(name, url, expected, h.hexdigest()))
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def resolve(name: str, data_dir: str | Path | None = None, mirror: str | None = None, progress: bool = True) -> Path:
    """Return a local path to the verified dataset file `name`, downloading it if needed.

    Args:
        name: file name relative to a dataset root, one of FILES (e.g. "tiny_shakespeare/input.txt").
        data_dir: where files live and downloads go; default $ZOO_DATA_DIR, else ./data.
        mirror: a local folder laid out like shared/data, or a URL base (http://, https://, file://);
            default $ZOO_DATA_MIRROR, else no mirror.
        progress: show a rich progress bar while downloading.
    Returns:
        path of the file: ``<data_dir>/<name>``, or ``<mirror>/<name>`` for a local-folder mirror.
    Raises:
        DataError: if the name is unknown, if the copy in the data dir fails its checksum, or if the
            file could not be found or downloaded from any place (the message lists each place tried).
    """
    if name not in FILES:
        raise DataError(f"unknown dataset file {name!r}; known names:\n  " + "\n  ".join(sorted(FILES)))
    expected = FILES[name]
    data_dir = Path(data_dir or os.environ.get("ZOO_DATA_DIR") or "data").expanduser()
    mirror = mirror or os.environ.get("ZOO_DATA_MIRROR") or None
    local = data_dir / name
    tried: list[str] = []  # "place: why it failed"

    # (a) the data dir
    if local.is_file():
        _check_data_dir_copy(local, name, expected)
        return local
    tried.append(f"{local}: not found (data dir)")

    # (b) the mirror, then (c) upstream
    urls: list[str] = []
    found = _from_mirror(mirror, name, expected, tried, urls)
    if found is not None:
        return found
    folder, _, rest = name.partition("/")
    if folder in UPSTREAM:
        urls.append(UPSTREAM[folder] + rest)

    for url in urls:
        try:
            _download(url, local, name, expected, progress)
            return local
        except (OSError, http.client.HTTPException, ValueError, DataError) as e:
            tried.append(f"{url}: {e}")
    raise _not_found(name, expected, tried, local)


def _check_data_dir_copy(local: Path, name: str, expected: str) -> None:
    """Raise DataError when the data dir's copy `local` of dataset file `name` fails its sha256 (`expected`); the
    message says how to use the file as the user's own or get the published one, and never to delete it."""
    actual = sha256sum(local)
    if actual == expected:
        return
    raise DataError(
        _mismatch(name, local, expected, actual)
        + f": it is not the published {name}, and zoo leaves it as it is.\nFix: to train on that "
        f"file as your own, pass its path ({local}) instead of the name {name!r} (your own files are "
        f"not checksummed); for the published dataset, set data.data_dir (or ZOO_DATA_DIR) to "
        f"another folder and re-run."
    )


def _from_mirror(mirror: str | None, name: str, expected: str, tried: list[str], urls: list[str]) -> Path | None:
    """The verified path of `name` in a local-folder mirror, else None. A URL mirror is appended to `urls` (to
    download); a missing mirror, file, or a checksum mismatch is appended to `tried` as "place: why"."""
    if mirror is None:
        tried.append("mirror: none set (argument or ZOO_DATA_MIRROR)")
    elif str(mirror).startswith(_URL_SCHEMES):
        urls.append(str(mirror).rstrip("/") + "/" + name)
    else:
        path = Path(mirror).expanduser() / name
        if not path.is_file():
            tried.append(f"{path}: not found (local mirror)")
        elif (actual := sha256sum(path)) != expected:
            tried.append(f"{path}: " + _mismatch(name, "local mirror", expected, actual))
        else:
            return path
    return None


def _not_found(name: str, expected: str, tried: list[str], local: Path) -> DataError:
    """The DataError of a dataset file found nowhere: each place tried and why, and the fixes."""
    return DataError(
        f"could not get dataset file {name!r} (sha256 {expected}). Places searched:\n  - "
        + "\n  - ".join(tried)
        + "\nFix one of:\n"
        "  - set ZOO_DATA_MIRROR=/path/to/shared/data (a local folder with the same layout), or pass "
        "data.mirror=/path/to/shared/data;\n"
        f"  - put the file at {local} (or set ZOO_DATA_DIR to a folder that has {name});\n"
        "  - run with network access so it can be downloaded from upstream."
    )


def looks_like_path(value: str) -> bool:
    """True for a value meant as a file path rather than a dataset name: it has a path separator or a
    suffix (".txt"), or starts with "~" or "."."""
    return "/" in value or os.sep in value or value.startswith(("~", ".")) or Path(value).suffix != ""


def locate(
    value: str,
    data_dir: str | Path | None = None,
    mirror: str | None = None,
    progress: bool = True,
    names: tuple[str, ...] = (),
) -> Path:
    """The file behind a dataset setting: a resolver name (one of FILES: found or downloaded and checksummed
    by `resolve`), or the path of the user's own file, "~" expanded, returned resolved and never checksummed.
    A name wins over a relative path spelled the same; write "./<name>" for a file of yours there.

    Args:
        value: a resolver name (e.g. "tiny_shakespeare/input.txt") or a file path.
        data_dir, mirror, progress: passed to `resolve` for a name.
        names: the resolver names that fit the caller, listed when `value` is neither a name nor a file.
    Returns:
        the file's path.
    Raises:
        DataError: "not found: PATH" for a path-like value (looks_like_path) that does not exist, a
            directory, a value that is neither a name nor a file, or resolve's errors for a name.
    """
    value = str(value)
    if value in FILES:
        return resolve(value, data_dir, mirror, progress)
    path = Path(value).expanduser()
    if path.is_file():
        return path.resolve()
    shown = str(path.absolute()) + ("" if str(path.absolute()) == value else f" (from {value!r})")
    builtin = f", or a built-in dataset name: {', '.join(names)}" if names else ""
    if path.is_dir():
        raise DataError(f"{shown} is a directory.\nFix: pass the path of a file in it{builtin}")
    if looks_like_path(value):
        raise DataError(f"not found: {shown}\nFix: check the path of your file{builtin}")
    raise DataError(
        f"{value!r} is neither a built-in dataset name nor an existing file (there is no "
        f"{path.absolute()}).\nFix: pass the path of your own file{builtin}"
    )


def file_entry(value: str) -> str:
    """How a dataset setting is recorded (checkpoints, results.json): a resolver name as it is, a path of the
    user's resolved ("~" expanded, absolute)."""
    return value if value in FILES else str(Path(str(value)).expanduser().resolve())


def dataset_name(values) -> str:
    """The name of the data behind dataset settings: the built-in datasets' folders ("sst2") and the
    user's files' resolved paths, each once, in order, joined by ", "."""
    out = [v.split("/", 1)[0] if v in FILES else file_entry(v) for v in values]
    return ", ".join(dict.fromkeys(out))
