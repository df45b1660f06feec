"""CPU time per operation of one silt loop from Python, for A/B comparisons of wheels on a
noisy machine (BENCHMARKS.md, "The memtable's search and the Python scan path").

    KEYS=100000 python scripts/py-cpu-per-op.py fill|read|scan [REPEAT]

Fills KEYS random 16-byte keys with 100-byte values into a new database (sync none), then
times the fill, REPEAT rounds of random gets, or REPEAT full scans; prints ops/s and CPU
microseconds (user) per operation. Put a wheel's unpacked directory first on PYTHONPATH
to pick the build."""
import os, random, sys, time, tempfile, shutil, resource
import silt
d = tempfile.mkdtemp()
ks = [os.urandom(16) for _ in range(int(os.environ.get("KEYS", "100000")))]
db = silt.Db(d, sync="none")
mode = sys.argv[1]
v = b"v" * 100
ru0 = resource.getrusage(resource.RUSAGE_SELF).ru_utime
t0 = time.time()
for k in ks: db[k] = v
if mode == "fill":
    cpu = resource.getrusage(resource.RUSAGE_SELF).ru_utime - ru0
    print("fill", int(len(ks) / (time.time() - t0)), "ops/s", round(cpu * 1e6 / len(ks), 3), "cpu_us/op")
    sys.exit(0)
random.Random(7).shuffle(ks)
get = db.get
mode = sys.argv[1]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 1
ru = resource.getrusage(resource.RUSAGE_SELF).ru_utime
t = time.time()
for _ in range(reps):
    if mode == "read":
        n = sum(1 for k in ks if get(k) is not None)
    else:
        n = sum(1 for _ in db.items())
dt = time.time() - t
cpu = resource.getrusage(resource.RUSAGE_SELF).ru_utime - ru
print(mode, int(n * reps / dt), "ops/s", round(cpu * 1e6 / (n * reps), 3), "cpu_us/op")
db.close(); shutil.rmtree(d)
