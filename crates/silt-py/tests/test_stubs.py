"""The type stubs match the extension (mypy's stubtest compares them with the runtime
signatures) and type-check a user's code (typed_usage.py under mypy --strict).
scripts/py-test.sh installs mypy; without it these tests are skipped."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("mypy")

HERE = os.path.dirname(os.path.abspath(__file__))


def run(*args):
    r = subprocess.run(
        [sys.executable, "-m", *args],
        capture_output=True,
        text=True,
        cwd=HERE,
    )
    return r.returncode, r.stdout + r.stderr


def test_stubtest():
    code, out = run("mypy.stubtest", "silt")
    assert code == 0, out


def test_stubs_type_check_user_code(tmp_path):
    code, out = run(
        "mypy", "--strict", "--python-version", "3.10", "--cache-dir", str(tmp_path), "typed_usage.py"
    )
    assert code == 0, out
