"""The type stubs match the extension (mypy's stubtest compares them with the runtime
signatures) and type-check a user's code (typed_usage.py under mypy --strict).
scripts/py-test.sh installs mypy; without it these tests are skipped."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("mypy")

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cache_dir, *args):
    r = subprocess.run(
        [sys.executable, "-m", *args],
        capture_output=True,
        text=True,
        # From the test's temporary directory, where mypy's cache then goes (stubtest
        # writes it into the current directory, not the sources).
        cwd=cache_dir,
        env={**os.environ, "MYPY_CACHE_DIR": str(cache_dir / ".mypy_cache")},
    )
    return r.returncode, r.stdout + r.stderr


def test_stubtest(tmp_path):
    code, out = run(tmp_path, "mypy.stubtest", "silt")
    assert code == 0, out


def test_stubs_type_check_user_code(tmp_path):
    code, out = run(tmp_path, "mypy", "--strict", "--python-version", "3.10", os.path.join(HERE, "typed_usage.py"))
    assert code == 0, out
