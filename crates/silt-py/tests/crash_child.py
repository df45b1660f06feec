"""The child of test_crash.py: writes durably and prints each acknowledgement.

    python crash_child.py DB_PATH FIRST_SEQ

Writes forever (until killed), numbering writes from FIRST_SEQ. Each step is either a
single put (key ``k<seq>``) or a batch putting ``b<seq>/0..2`` and deleting
``k<seq - 1>``'s companion key ``d<seq - 1>``; after the call returns it prints
``ack <seq>``: from then on the write must survive a crash. A small memtable and small log
segments make flushes, compactions and segment rotations run while the parent kills it.
"""

import sys

import silt


def value(seq: int) -> bytes:
    return b"value-%d-" % seq + bytes([seq % 251]) * (seq % 300)


def main() -> None:
    path, seq = sys.argv[1], int(sys.argv[2])
    db = silt.Db(
        path,
        sync="full",
        memtable_bytes=64 * 1024,
        l0_compaction_trigger=2,
        wal_segment_bytes=1 << 20,
    )
    out = sys.stdout
    while True:
        if seq % 5 == 0:
            with db.batch() as b:
                for i in range(3):
                    b[b"b%08d/%d" % (seq, i)] = value(seq)
        else:
            db[b"k%08d" % seq] = value(seq)
        out.write("ack %d\n" % seq)
        out.flush()
        seq += 1


if __name__ == "__main__":
    main()
