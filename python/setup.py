"""Build step of the promptscore package: copies the shared core library into the package.

The package is pure Python over ctypes; what it needs from the build is libpromptscore.so.0.
By default that is ../build/libpromptscore.so.0 (run `make -j2` in the repository root first);
PROMPTSCORE_LIB=/path/to/libpromptscore.so.0 names another one, and PROMPTSCORE_LIB=system
bundles nothing (the package then loads the libpromptscore.so.0 that `make install` put on the
loader's path). The metadata is in pyproject.toml.
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
SONAME = "libpromptscore.so.0"


def lib_path():
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


class BuildPy(build_py):
    def run(self):
        super().run()
        src = lib_path()
        if src:
            dst = os.path.join(self.build_lib, "promptscore", SONAME)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
            os.chmod(dst, 0o755)


class BinaryDistribution(Distribution):
    """The wheel carries a shared library: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPy}, distclass=BinaryDistribution)
