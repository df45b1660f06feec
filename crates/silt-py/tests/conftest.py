"""Fixtures of the silt-py test suite, and the figures it reports.

The suite runs against the installed wheel (``scripts/py-test.sh`` builds it and
installs it into a virtual environment), never against the source tree, so what is
tested is what a user installs. Tests that measure something (group commit) record
their figures with ``report(...)``; they are printed at the end of the run.
"""

import os
import sys

import pytest

import silt

# Figures recorded by tests, printed in the terminal summary.
FIGURES = []


def report(line: str) -> None:
    """Records a measured figure for the end-of-run summary."""
    FIGURES.append(line)


def pytest_terminal_summary(terminalreporter):
    if FIGURES:
        terminalreporter.section("silt-py figures")
        for line in FIGURES:
            terminalreporter.write_line(line)


# Log segments of 1 MiB instead of the default 64 MiB: opening a database reads its
# preallocated segment, which a debug build of the extension (what scripts/py-test.sh
# builds, to keep CI short) takes seconds to do at 64 MiB. Small segments also make the
# tests rotate segments. test_api.py::test_persistence_and_reopen keeps the default.
SMALL_LOG = dict(wal_segment_bytes=1 << 20)


def open_db(path, **options):
    """`silt.Db(path, **options)` with 1 MiB log segments unless told otherwise."""
    return silt.Db(path, **{**SMALL_LOG, **options})


@pytest.fixture
def path(tmp_path):
    """A database directory that does not exist yet."""
    return str(tmp_path / "db")


@pytest.fixture
def db(path):
    """An open database, closed after the test."""
    d = open_db(path)
    yield d
    d.close()


# Make `tests/` importable for the crash test's child script.
sys.path.insert(0, os.path.dirname(__file__))
