"""Build backend (PEP 517) of the promptscore package: writes the wheel itself, a zip of the
package's modules, the library `make` built and the dist-info files, so that building needs
nothing beyond the Python standard library (no setuptools, no wheel package: a venv of Debian's
python3-venv installs it as it is, and pip's build isolation has nothing to fetch).

The library is ../build/libpromptscore.so.0 (run `make -j2` in the repository root first);
PROMPTSCORE_LIB=/path/to/libpromptscore.so.0 names another one, and PROMPTSCORE_LIB=system
bundles none (the package then loads the libpromptscore.so.0 that `make install` put on the
loader's path). The version is promptscore/__init__.py's __version__.
"""
import base64
import hashlib
import io
import os
import re
import sysconfig
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "promptscore"
SONAME = "libpromptscore.so.0"
SUMMARY = ("Exact per-token log-probabilities and top-K of prompts under GGUF models "
           "(bindings to libpromptscore)")


def _version():
    with open(os.path.join(HERE, NAME, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise SystemExit("promptscore: no __version__ in promptscore/__init__.py")
    return m.group(1)


def _lib_path():
    env = os.environ.get("PROMPTSCORE_LIB")
    if env == "system":
        return None
    path = env or os.path.join(HERE, "..", "build", SONAME)
    if not os.path.exists(path):
        raise SystemExit(
            "promptscore: %s not found. Build the library first: `make -j2` in the repository "
            "root (or set PROMPTSCORE_LIB to a libpromptscore.so.0, or to 'system' to use the "
            "one `make install` put on the loader's path)" % path)
    return os.path.realpath(path)


def _metadata():
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: >=3.9\n"
            "Requires-Dist: numpy\nDescription-Content-Type: text/markdown\n\n%s"
            % (NAME, _version(), SUMMARY, readme))


def _tag():
    # the wheel holds a shared library of this machine: tagged for its platform
    return "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform())


def _dist_info():
    return "%s-%s.dist-info" % (NAME, _version())


def _package_files():
    """(path in the wheel, bytes) of the package: its modules, py.typed, the library."""
    out = []
    pkg = os.path.join(HERE, NAME)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") or name == "py.typed":
            with open(os.path.join(pkg, name), "rb") as f:
                out.append(("%s/%s" % (NAME, name), f.read()))
    lib = _lib_path()
    if lib:
        with open(lib, "rb") as f:
            out.append(("%s/%s" % (NAME, SONAME), f.read()))
    return out


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, _dist_info())
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return _dist_info()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = _package_files()
    di = _dist_info()
    files.append((di + "/METADATA", _metadata().encode("utf-8")))
    files.append((di + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: promptscore build_backend\n"
                                  "Root-Is-Purelib: false\nTag: %s\n" % _tag()).encode()))
    record = []
    for path, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (path, digest, len(data)))
    record.append(di + "/RECORD,,")
    files.append((di + "/RECORD", ("\n".join(record) + "\n").encode()))
    name = "%s-%s-%s.whl" % (NAME, _version(), _tag())
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if path.endswith(SONAME) else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return name


def build_sdist(sdist_directory, config_settings=None):
    """The package's sources (without a library: building a wheel from it needs
    PROMPTSCORE_LIB or a build folder next to it)."""
    base = "%s-%s" % (NAME, _version())
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        def add(path, data):
            info = tarfile.TarInfo("%s/%s" % (base, path))
            info.size = len(data)
            info.mode = 0o644
            t.addfile(info, io.BytesIO(data))
        add("PKG-INFO", _metadata().encode("utf-8"))
        for rel in ("pyproject.toml", "build_backend.py", "README.md"):
            with open(os.path.join(HERE, rel), "rb") as f:
                add(rel, f.read())
        pkg = os.path.join(HERE, NAME)
        for n in sorted(os.listdir(pkg)):
            if n.endswith(".py") or n == "py.typed":
                with open(os.path.join(pkg, n), "rb") as f:
                    add("%s/%s" % (NAME, n), f.read())
    return name
