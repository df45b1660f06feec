"""`python -m silt.bench` runs (tiny sizes, silt and the standard library's sqlite3, the
peers that are always there) and writes its table and JSON, so the benchmark cannot rot
between the runs that fill BENCHMARKS.md."""

import json
import subprocess
import sys


def test_bench_runs(tmp_path):
    out = tmp_path / "bench.json"
    r = subprocess.run(
        [sys.executable, "-m", "silt.bench", "--engines", "silt,sqlite3", "--keys", "300",
         "--seconds", "0.1", "--repeat", "1", "--dir", str(tmp_path), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "| fill |" in r.stdout and "| durable, 4 threads |" in r.stdout
    data = json.loads(out.read_text())
    silt = data["results"]["silt"]
    assert silt["fill"]["ops"] == 300 and silt["scan"]["ops"] == 300
    assert silt["durable, 4 threads"]["ops"] > 0
    assert 0 < silt["durable, 1 thread"]["fsyncs_per_commit"] <= 1.01
    assert set(data["results"]) == {"silt", "sqlite3"}
    # A peer that is not installed is skipped, and said so.
    r = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['plyvel'] = None; "
         "from silt.bench import main; sys.exit(main(['--engines', 'plyvel,silt', '--keys', '50', "
         "'--seconds', '0.05', '--repeat', '1', '--dir', %r, '--out', %r]))"
         % (str(tmp_path), str(tmp_path / "b2.json"))],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "plyvel: skipped" in r.stderr
