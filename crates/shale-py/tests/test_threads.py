"""Threads: engine calls release the GIL, and one DB serves many threads at once."""

import threading
import time

import shale


def test_concurrent_readers_and_a_writer(db):
    for i in range(2000):
        db[b"k%05d" % i] = b"v%d" % i
    db.flush()
    errors = []

    def reader(seed):
        try:
            for n in range(3000):
                i = (seed * 7919 + n * 31) % 2000
                assert db[b"k%05d" % i] == b"v%d" % i
            assert len(list(db.prefix(b"k01"))) == 1000
        except BaseException as e:  # surfaced by the main thread
            errors.append(e)

    def writer():
        try:
            for i in range(2000):
                db[b"w%05d" % i] = b"x"
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    threads.append(threading.Thread(target=writer))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(list(db.prefix(b"w"))) == 2000


def test_engine_calls_let_other_threads_run(db):
    """While a thread is inside engine calls, a pure-Python thread keeps running.

    A ticker thread counts as fast as it can. Alone (the main thread asleep) it sets
    the pace; then the main thread makes engine calls (big batch writes, a flush) and
    we count the ticks meanwhile. Had the bindings held the GIL inside a call, the
    ticker would only run in the few milliseconds between calls (CPython switches
    threads between bytecodes, every 5 ms), so it would reach a few percent of its pace.
    """
    batches = []
    for n in range(8):
        batch = db.batch()
        for i in range(n * 40_000, (n + 1) * 40_000):
            batch.put(b"key%07d" % i, b"value %d" % i)
        batches.append(batch)

    ticks = 0
    stop = threading.Event()

    def ticker():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    t = threading.Thread(target=ticker)
    t.start()
    try:
        start = ticks
        time.sleep(0.2)  # releases the GIL: the ticker's own pace
        pace = (ticks - start) / 0.2
        before = ticks
        started = time.perf_counter()
        for batch in batches:
            batch.write()  # one engine call: WAL append and 40k memtable inserts
        db.flush()
        elapsed = time.perf_counter() - started
        during = ticks - before
    finally:
        stop.set()
        t.join()
    share = during / (pace * elapsed)
    print(f"ticker at {share:.0%} of its pace during {elapsed:.3f} s of engine calls")
    assert elapsed > 0.1, f"the calls were too quick ({elapsed:.3f} s) to tell anything"
    assert share > 0.2, (
        f"the ticker ran at {share:.0%} of its pace during {elapsed:.3f} s of engine "
        "calls: the GIL was held"
    )
