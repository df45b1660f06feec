#!/usr/bin/env bash
# The Python package's tests (crates/silt-py): builds the wheel with maturin, installs it
# into a virtual environment this script creates (${CARGO_TARGET_DIR:-target}/py-venv,
# with maturin, pytest and mypy from PyPI), and runs the pytest suite against the
# installed wheel. scripts/test.sh runs it as a stage of its own.
#
# The wheel is a dev-profile build: it compiles in seconds on top of the workspace's
# test build, and the suite needs correctness, not speed (the benchmark builds with
# --release: python -m silt.bench). On Debian, `python3 -m venv` needs the package
# python3-venv; it is installed (as root or with sudo) if the venv cannot be made.
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-python3}"
mkdir -p "${CARGO_TARGET_DIR:-target}"
target="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)"
venv="$target/py-venv"
wheels="$target/py-wheels"

make_venv() {
  rm -rf "$venv"
  "$python" -m venv "$venv"
}

if ! [ -x "$venv/bin/python" ]; then
  if ! make_venv 2>/dev/null; then
    echo "py-test: '$python -m venv' failed; installing Debian's python3-venv"
    if [ "$(id -u)" -eq 0 ]; then
      sudo=()
    elif command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "py-test: need root (or sudo) to apt-get install python3-venv" >&2
      exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get install -y --no-install-recommends python3-venv >/dev/null ||
      { "${sudo[@]}" apt-get update >/dev/null &&
        "${sudo[@]}" apt-get install -y --no-install-recommends python3-venv >/dev/null; }
    make_venv
  fi
fi

# maturin >= 1.9.4 sets PYO3_BUILD_EXTENSION_MODULE (the wheel must not link libpython).
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
  "maturin>=1.9.4,<2" "pytest>=8,<10" "mypy>=1.18,<3"

rm -rf "$wheels"
(cd crates/silt-py &&
  "$venv/bin/maturin" build --profile dev --interpreter "$venv/bin/python" -o "$wheels")
"$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
  "$wheels"/silt-*.whl

# From the tests' directory's parent: `import silt` finds the installed wheel, never the
# sources in python/ (which lack the extension).
cd crates/silt-py
"$venv/bin/python" -m pytest tests -q -p no:cacheprovider
