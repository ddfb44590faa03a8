import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.join(HERE, "..", "..", "python")
sys.path.insert(0, PYDIR)

import kg_common  # noqa: E402
import metrics_cache  # noqa: E402
import metrics_reduce  # noqa: E402
import metrics_scan  # noqa: E402


def series_by_key(result):
    return dict((s["key"], s) for s in result["series"])


def comparable(result):
    r = dict(result)
    for k in ("elapsedMs", "fastLines", "shapes", "jobs"):
        r.pop(k)
    return r


class FilesTest(unittest.TestCase):
    # Every call reads the file, as a probe run by hand does (what a long-lived process keeps: KeptTest below).
    keep = False

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kg-metrics-")
        self.saved_keep = metrics_cache._KEEP
        metrics_cache._KEEP = self.keep
        metrics_cache.forget()

    def tearDown(self):
        metrics_cache._KEEP = self.saved_keep
        metrics_cache.forget()
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, text, mode="w"):
        path = os.path.join(self.dir, name)
        with open(path, mode + "b") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
        return path


class MetricsReduceTest(FilesTest):
    def test_bucketing_keeps_extremes_and_last(self):
        random.seed(7)
        lines = []
        for step in range(100000):
            loss = 1.0 + random.random() * 0.01
            if step == 31337:
                loss = 1000.0
            if step == 77777:
                loss = -5.0
            lines.append(json.dumps({"step": step, "loss": loss, "lr": 3e-4}))
        path = self.write("log.jsonl", "\n".join(lines) + "\n")
        r = metrics_reduce.main([path, "--buckets", "100"])
        loss = series_by_key(r)["loss"]
        self.assertLessEqual(len(loss["x"]), 100)
        self.assertGreater(len(loss["x"]), 40)
        self.assertEqual(max(loss["max"]), 1000.0)
        self.assertEqual(min(loss["min"]), -5.0)
        # The spike sits in the bucket that ends at or after its step, and in no other.
        i = next(k for k, x in enumerate(loss["x"]) if x >= 31337)
        self.assertEqual(loss["max"][i], 1000.0)
        self.assertEqual(sum(1 for v in loss["max"] if v == 1000.0), 1)
        self.assertEqual(loss["count"], 100000)
        self.assertEqual(loss["lastX"], 99999)
        self.assertEqual(loss["lastValue"], json.loads(lines[-1])["loss"])
        self.assertEqual(r["lines"], 100000)
        self.assertEqual(r["xRange"], [0, 99999])
        self.assertEqual(r["keys"], ["loss", "lr", "step"])
        self.assertGreater(r["fastLines"], 99000)

    def test_window_matches_brute_force(self):
        random.seed(3)
        rows = []
        for step in range(5000):
            rows.append({"step": step, "loss": random.random(), "acc": random.random()})
        random.shuffle(rows[1000:2000])  # out of order lines must not matter
        path = self.write("w.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        lo, hi, nb = 1234.0, 3210.0, 37
        r = metrics_reduce.main([path, "--buckets", str(nb), "--from", str(lo), "--to", str(hi)])
        w = (hi - lo) / nb
        want = {}
        for row in rows:
            x = float(row["step"])
            if not lo <= x <= hi:
                continue
            k = min(int(math.floor((x - lo) / w)), nb - 1)
            b = want.setdefault(k, {"min": 9e9, "max": -9e9, "lastx": -1, "last": None, "n": 0})
            b["min"] = min(b["min"], row["loss"])
            b["max"] = max(b["max"], row["loss"])
            if x >= b["lastx"]:
                b["lastx"], b["last"] = x, row["loss"]
            b["n"] += 1
        loss = series_by_key(r)["loss"]
        ks = sorted(want)
        self.assertEqual(loss["x"], [int(want[k]["lastx"]) for k in ks])
        self.assertEqual(loss["min"], [want[k]["min"] for k in ks])
        self.assertEqual(loss["max"], [want[k]["max"] for k in ks])
        self.assertEqual(loss["last"], [want[k]["last"] for k in ks])
        self.assertEqual(loss["count"], sum(b["n"] for b in want.values()))
        self.assertEqual(r["window"], {"from": lo, "to": hi})
        self.assertEqual(r["xRange"], [0, 4999])

    def test_nan_infinity_malformed_counted_and_fast_equals_slow(self):
        text = "".join(
            [
                '{"step": 0, "loss": 2.5, "acc": 0.1, "tag": "train", "ok": true}\n',
                '{"step": 1, "loss": NaN, "acc": 0.2, "tag": "train", "ok": true}\n',
                '{"step": 2, "loss": Infinity, "acc": -Infinity, "tag": "train", "ok": false}\n',
                "this is not json\n",
                '{"step": 3, "loss": 2.4, "acc": 0.3, "tag": "tr\\"ain", "ok": null}\n',
                "\n",
                '{"step": 4, "loss": 1e999, "acc": 0.4, "tag": "train", "ok": true}\n',
                '{"step": 5, "eval": {"loss": 3.25, "ppl": 25.8}, "note": [1, 2]}\n',
                '{"step": 6, "loss": 2.3, "acc": 0.5, "tag": "train", "ok": true}\r\n',
                '   {"step": 7, "loss": 2.2, "acc": 0.6, "tag": "x", "ok": true}\n',
                '{"step": 8, "loss": 2.1, "loss": 9.9, "acc": 0.7}\n',
                '{"message": "hello"}\n',
                "[1, 2, 3]\n",
                '{"step": 9, "loss": 01}\n',
                '{"loss": 4.0}\n',
                '{"step": 10, "loss": 2.0, "acc": 0.8, "tag": "train", "ok": true}\n',
                '{"step": 11, "loss": 1.9, "acc": 0.9, "tag": "train", "ok": true}\n',
                '{"step": 12, "eval": {"loss": 3.0, "ppl": 20.1}, "note": [3, 4]}\n',
                '{"step": 13, "loss": -1.5e-3, "acc": 1.0, "tag": "train", "ok": true}\n',
            ]
        )
        path = self.write("mixed.jsonl", text)
        fast = metrics_reduce.main([path])
        slow = metrics_reduce.main([path, "--no-fast"])
        self.assertEqual(comparable(fast), comparable(slow))
        self.assertGreater(fast["fastLines"], 0)
        self.assertEqual(slow["fastLines"], 0)
        self.assertEqual(fast["lines"], 19)
        self.assertEqual(fast["blank"], 1)
        self.assertEqual(
            fast["skipped"],
            # malformed: prose, the array line, "01"; nonNumeric: the message line; no step: the bare loss line;
            # nonFinite: NaN, Infinity, -Infinity and 1e999 (which overflows float).
            {"malformed": 3, "nonNumeric": 1, "nonFinite": 4, "noX": 1, "tooLong": 0, "tooManyKeys": 0, "tooDeep": 0},
        )
        s = series_by_key(fast)
        self.assertEqual(s["loss"]["x"], [0, 3, 6, 7, 8, 10, 11, 13])
        self.assertEqual(s["loss"]["last"], [2.5, 2.4, 2.3, 2.2, 9.9, 2.0, 1.9, -0.0015])
        self.assertEqual(s["eval.loss"]["x"], [5, 12])
        self.assertEqual(s["eval.ppl"]["last"], [25.8, 20.1])
        self.assertNotIn("note", s)
        self.assertNotIn("step", s)
        self.assertIn("eval.loss", fast["keys"])

    def test_parallel_parts_merge_exactly(self):
        random.seed(5)
        out = []
        for i in range(20000):
            step = i if i % 3000 else max(0, i - 700)  # resumed runs replay earlier steps
            if i % 997 == 0:
                out.append('{"step": %d, "loss": NaN}' % step)
            elif i % 500 == 0:
                out.append('{"step": %d, "eval": {"loss": %.4f}}' % (step, random.random()))
            else:
                out.append('{"step": %d, "loss": %.6f, "lr": %.2e}' % (step, random.random(), 1e-4 * (1 + i % 7)))
        path = self.write("par.jsonl", "\n".join(out) + "\n" + '{"step": 1')
        saved = metrics_scan.PART_MIN
        metrics_scan.PART_MIN = 4096
        try:
            one = metrics_reduce.main([path, "--jobs", "1", "--buckets", "300"])
            many = metrics_reduce.main([path, "--jobs", "5", "--buckets", "300"])
            win1 = metrics_reduce.main([path, "--jobs", "1", "--from", "100", "--to", "9000"])
            win5 = metrics_reduce.main([path, "--jobs", "5", "--from", "100", "--to", "9000"])
        finally:
            metrics_scan.PART_MIN = saved
        self.assertEqual(one["jobs"], 1)
        self.assertEqual(many["jobs"], 5)
        self.assertEqual(comparable(one), comparable(many))
        self.assertEqual(comparable(win1), comparable(win5))
        self.assertEqual(many["lines"], 20000)
        self.assertEqual(many["skipped"]["nonFinite"], 21)
        self.assertEqual(many["nextOffset"], os.path.getsize(path) - len('{"step": 1'))

    def test_event_file_parts_from_half_the_bytes_merge_exactly(self):
        # An event file's bytes cost about twice a jsonl's to read, so a part is worth a process from half PART_MIN:
        # a launch's event file of a resumed HF run is read on every core, not on one.
        path = os.path.join(self.dir, "events.out.tfevents.1")
        writer = os.path.join(HERE, "..", "..", "scripts", "fixtures", "tfevents_writer.py")
        subprocess.run([sys.executable, writer, path, "--steps", "3000"], check=True)
        size = os.path.getsize(path)
        saved = metrics_scan.PART_MIN
        # between one and two PART_MIN: a jsonl this size would be one part
        metrics_scan.PART_MIN = size * 2 // 3
        try:
            one = metrics_reduce.main([path, "--jobs", "1", "--buckets", "300"])
            two = metrics_reduce.main([path, "--jobs", "2", "--buckets", "300"])
        finally:
            metrics_scan.PART_MIN = saved
        self.assertEqual(one["jobs"], 1)
        self.assertEqual(two["jobs"], 2)
        self.assertEqual(comparable(one), comparable(two))
        self.assertEqual(two["lines"], one["lines"])

    def test_torn_last_line_and_offset_follow(self):
        full = "".join('{"step": %d, "loss": %s}\n' % (i, 1.0 / (i + 1)) for i in range(10))
        torn = '{"step": 10, "loss": 0.0'
        path = self.write("live.jsonl", full + torn)
        r = metrics_reduce.main([path])
        self.assertEqual(r["lines"], 10)
        self.assertEqual(r["nextOffset"], len(full.encode()))
        self.assertEqual(r["size"], len((full + torn).encode()))
        self.assertEqual(series_by_key(r)["loss"]["lastX"], 9)
        # The writer finishes the line and adds two more; only those bytes are read.
        with open(path, "ab") as f:
            f.write(b'9}\n{"step": 11, "loss": 0.05}\n{"step": 12, "loss": 0.04}\n')
        r2 = metrics_reduce.main([path, "--offset", str(r["nextOffset"])])
        self.assertEqual(r2["offset"], r["nextOffset"])
        self.assertEqual(r2["lines"], 3)
        loss = series_by_key(r2)["loss"]
        self.assertEqual(loss["x"], [10, 11, 12])
        self.assertEqual(loss["last"], [0.09, 0.05, 0.04])
        self.assertEqual(r2["nextOffset"], os.path.getsize(path))
        r3 = metrics_reduce.main([path, "--offset", str(r2["nextOffset"])])
        self.assertEqual(r3["lines"], 0)
        self.assertEqual(r3["series"], [])
        self.assertFalse(r3["reset"])
        # A new run rewrites the log: shorter than the offset, so it is read from the start.
        with open(path, "wb") as f:
            f.write(b'{"step": 0, "loss": 7}\n')
        r4 = metrics_reduce.main([path, "--offset", str(r3["nextOffset"])])
        self.assertTrue(r4["reset"])
        self.assertEqual((r4["offset"], r4["requestedOffset"]), (0, r3["nextOffset"]))
        self.assertEqual(series_by_key(r4)["loss"]["last"], [7])

    def test_empty_file_and_a_line_longer_than_the_buffer(self):
        r = metrics_reduce.main([self.write("empty.jsonl", "")])
        self.assertEqual((r["lines"], r["series"], r["xRange"], r["nextOffset"]), (0, [], None, 0))
        big = '{"step": 1, "note": "%s", "loss": 0.5}\n' % ("x" * (metrics_scan.BLOCK + 100))
        path = self.write("long.jsonl", '{"step": 0, "loss": 1}\n' + big + '{"step": 2, "loss": 0.25}\n')
        r = metrics_reduce.main([path])
        self.assertEqual(series_by_key(r)["loss"]["last"], [1, 0.5, 0.25])
        self.assertEqual(r["nextOffset"], os.path.getsize(path))

    def test_time_axis_step_times_and_series_choice(self):
        text = "".join(
            '{"_timestamp": %.3f, "step": %d, "loss": %s, "lr": 0.1}\n' % (1700000000.5 + i * 2, i, 5 - i)
            for i in range(50)
        )
        path = self.write("t.jsonl", text)
        r = metrics_reduce.main([path, "--x", "time", "--series", "loss"])
        self.assertEqual(r["xKeys"], ["_timestamp"])
        self.assertEqual([s["key"] for s in r["series"]], ["loss"])
        self.assertEqual(r["series"][0]["x"][0], 1700000000.5)
        r = metrics_reduce.main([path])
        loss = series_by_key(r)["loss"]
        self.assertEqual(loss["x"][:2], [0, 1])
        self.assertEqual(loss["t"][:2], [1700000000.5, 1700000002.5])
        self.assertNotIn("_timestamp", series_by_key(r))

    def test_no_step_numbers_lines(self):
        path = self.write("nostep.jsonl", "".join('{"loss": %d}\n' % (10 - i) for i in range(10)))
        r = metrics_reduce.main([path])
        self.assertEqual(r["x"], "line")
        self.assertEqual(series_by_key(r)["loss"]["x"], list(range(1, 11)))

    def test_bad_arguments_are_probe_errors(self):
        with self.assertRaises(kg_common.ProbeError):
            metrics_reduce.main([])
        with self.assertRaises(kg_common.ProbeError):
            metrics_reduce.main(["x", "--from", "3"])
        with self.assertRaises(kg_common.ProbeError):
            metrics_reduce.main([os.path.join(self.dir, "missing.jsonl")])

    def test_runs_as_a_script(self):
        path = self.write("s.jsonl", '{"step": 1, "loss": 2}\n')
        out = subprocess.run(
            [sys.executable, os.path.join(PYDIR, "metrics_reduce.py"), path], capture_output=True, check=True
        )
        self.assertEqual(json.loads(out.stdout)["series"][0]["key"], "loss")

    def test_million_lines(self):
        path = os.path.join(self.dir, "big.jsonl")
        random.seed(11)
        spike_step = 654321
        with open(path, "w") as f:
            chunk = []
            for i in range(1000000):
                loss = 4.0 * math.exp(-i / 2e5) + (i % 97) * 1e-4
                if i == spike_step:
                    loss = 99.0
                chunk.append('{"step":%d,"loss":%.5f,"lr":0.0003,"tok_per_s":%.1f}\n' % (i, loss, 12800 + i % 300))
                if len(chunk) == 10000:
                    f.write("".join(chunk))
                    chunk = []
                if i == 500000:
                    f.write('{"step":%d,"eval_loss":3.1}\n' % i)
            f.write("".join(chunk))
        size = os.path.getsize(path)
        t0 = time.time()
        c0 = time.process_time()
        r = metrics_reduce.main([path])
        wall = time.time() - t0
        cpu = time.process_time() - c0
        out = len(kg_common.dumps(r))
        sys.stderr.write(
            "\n  metrics_reduce: 1,000,001 lines, %.1f MB in %.2f s wall (%.2f s CPU); result %d bytes (%.3f%% of file)\n"
            % (size / 1e6, wall, cpu, out, 100.0 * out / size)
        )
        self.assertEqual(r["lines"], 1000001)
        s = series_by_key(r)
        self.assertEqual(s["loss"]["count"], 1000000)
        self.assertEqual(max(s["loss"]["max"]), 99.0)
        self.assertLessEqual(len(s["loss"]["x"]), 2000)
        self.assertEqual(s["eval_loss"]["x"], [500000])
        self.assertLess(out, size / 100)


def training_log(n, start=0, replay_every=None):
    """n lines like a real log (an eval line every 250 steps); replay_every: a resumed run replays 300 steps."""
    out = []
    for i in range(start, start + n):
        step = i - 300 if replay_every and i % replay_every == 0 and i >= 300 else i
        out.append('{"step": %d, "loss": %.6f, "lr": %.2e, "tok_per_s": %d}\n' % (step, loss_at(i), 3e-4, 12800 + i % 300))
        if i % 250 == 249:
            out.append('{"step": %d, "eval": {"loss": %.5f}}\n' % (step, loss_at(i) + 0.1))
    return "".join(out)


def loss_at(i):
    return 4.0 * math.exp(-i / 20000.0) + (i * 7919 % 97) * 1e-4


def without(result, *keys):
    r = comparable(result)
    for k in keys:
        r.pop(k)
    return r


class PreviewTest(FilesTest):
    def test_a_large_file_is_sampled_in_whole_lines_from_start_to_end(self):
        text = training_log(40000)
        path = self.write("big.jsonl", text + '{"step": 40000, "loss": 0.')
        size = os.path.getsize(path)
        r = metrics_reduce.main([path, "--preview-bytes", "65536"])
        sample = r["sample"]
        self.assertIsNotNone(sample)
        self.assertEqual(sample["of"], size)
        self.assertGreater(sample["windows"], 2)
        self.assertLessEqual(sample["windows"], 16)  # windows of at least 4 KiB
        self.assertEqual(r["bytesRead"], sample["bytes"])
        # Whole windows of whole lines: about the budget, far from the whole file.
        self.assertGreater(sample["bytes"], 65536 // 2)
        self.assertLess(sample["bytes"], 65536 + 8192)
        self.assertEqual(r["nextOffset"], 0)  # nothing to follow from
        self.assertEqual(r["skipped"]["malformed"], 0)  # the window edges cut no line in two
        loss = series_by_key(r)["loss"]
        # The first and the last line are in, the torn one is not; every value is the one the line holds.
        self.assertEqual(r["xRange"], [0, 39999])
        self.assertEqual(loss["lastX"], 39999)
        self.assertEqual(loss["lastValue"], float("%.6f" % loss_at(39999)))
        for x, v in zip(loss["x"], loss["last"]):
            self.assertEqual(v, float("%.6f" % loss_at(x)))
        self.assertLess(loss["count"], 40000 / 4)
        self.assertGreater(len(loss["x"]), 10)
        # Each sampled line counted once: loss lines plus eval lines are all the lines read.
        self.assertEqual(loss["count"] + series_by_key(r)["eval.loss"]["count"], r["lines"])

    def test_lines_longer_than_a_window_still_give_a_preview(self):
        # Some loggers write histograms on every line: 10 KB lines, windows of 4 KiB.
        lines = []
        for i in range(3000):
            hist = dict(("b%d" % j, j * 0.5) for j in range(700))
            lines.append(json.dumps({"step": i, "loss": 1.0 / (i + 1), "hist": hist}) + "\n")
        path = self.write("long.jsonl", "".join(lines) + '{"step": 3000, "lo')
        budget = 65536
        r = metrics_reduce.main([path, "--preview-bytes", str(budget), "--series", "loss"])
        self.assertIsNotNone(r["sample"])
        self.assertEqual(r["xRange"], [0, 2999])  # the first and the last whole line
        self.assertGreaterEqual(r["lines"], 8)
        self.assertLessEqual(r["sample"]["bytes"], 2 * budget + 2 * len(lines[0]) + 64)
        self.assertEqual(r["skipped"]["malformed"], 0)
        loss = series_by_key(r)["loss"]
        for x, v in zip(loss["x"], loss["last"]):
            self.assertEqual(v, 1.0 / (x + 1))

    def test_a_small_file_is_read_whole_and_exact(self):
        path = self.write("small.jsonl", training_log(2000))
        preview = metrics_reduce.main([path, "--preview-bytes", str(os.path.getsize(path))])
        exact = metrics_reduce.main([path])
        self.assertIsNone(preview["sample"])
        self.assertEqual(comparable(preview), comparable(exact))
        self.assertEqual(preview["nextOffset"], os.path.getsize(path))

    def test_bad_budget(self):
        with self.assertRaises(kg_common.ProbeError):
            metrics_reduce.main(["x.jsonl", "--preview-bytes", "0"])


class KeptTest(FilesTest):
    """In the resident helper the module outlives a request: reopen and zoom read only what they need."""

    keep = True

    def test_reopen_reads_only_the_appended_bytes(self):
        path = self.write("run.jsonl", training_log(30000))
        first = metrics_reduce.main([path])
        self.assertEqual((first["source"], first["bytesRead"]), ("read", os.path.getsize(path)))
        again = metrics_reduce.main([path])
        self.assertEqual((again["source"], again["bytesRead"]), ("cache", 0))
        self.assertEqual(without(again, "source", "bytesRead"), without(first, "source", "bytesRead"))
        # A preview of a file read before is the exact result.
        preview = metrics_reduce.main([path, "--preview-bytes", "4096"])
        self.assertIsNone(preview["sample"])
        self.assertEqual(without(preview, "source", "bytesRead"), without(first, "source", "bytesRead"))
        added = training_log(5000, start=30000)
        with open(path, "a") as f:
            f.write(added + '{"step": 35000, "lo')
        grown = metrics_reduce.main([path])
        self.assertEqual((grown["source"], grown["bytesRead"]), ("cache", len(added)))
        fresh = metrics_reduce.main([path, "--fresh"])
        self.assertEqual(fresh["source"], "read")
        self.assertEqual(without(grown, "source", "bytesRead"), without(fresh, "source", "bytesRead"))
        self.assertEqual(series_by_key(grown)["loss"]["lastX"], 34999)
        # Other options (buckets, series) are read again, not answered from another reduction.
        other = metrics_reduce.main([path, "--buckets", "50"])
        self.assertEqual(other["source"], "read")
        self.assertLessEqual(len(series_by_key(other)["loss"]["x"]), 50)

    def test_following_grows_what_was_kept(self):
        path = self.write("live.jsonl", training_log(30000))
        first = metrics_reduce.main([path])
        for start in (30000, 40000):
            added = training_log(10000, start=start)
            with open(path, "a") as f:
                f.write(added)
            tail = metrics_reduce.main([path, "--offset", str(first["nextOffset"])])
            self.assertEqual((tail["source"], tail["bytesRead"], tail["lines"]), ("read", len(added), 10040))
            # The answer is the appended lines alone, as without anything kept (growing the kept reduction
            # must not regrid it).
            alone = metrics_reduce.main([path, "--offset", str(first["nextOffset"]), "--fresh"])
            self.assertEqual(tail["series"], alone["series"])
            first = tail
        # Reopening reads nothing: the follow reads already added the new lines to the kept reduction.
        again = metrics_reduce.main([path])
        self.assertEqual((again["source"], again["bytesRead"]), ("cache", 0))
        fresh = metrics_reduce.main([path, "--fresh"])
        self.assertEqual(without(again, "source", "bytesRead"), without(fresh, "source", "bytesRead"))
        # And the zone map covers the followed part: a zoom there reads a small part of the file.
        zoom = metrics_reduce.main([path, "--from", "45000", "--to", "45100"])
        self.assertEqual(zoom["source"], "cache")
        self.assertLess(zoom["bytesRead"], os.path.getsize(path) / 8)
        self.assertEqual(series_by_key(zoom)["loss"]["x"], list(range(45000, 45101)))

    def test_what_is_kept_stays_within_its_memory(self):
        paths = [self.write("run%d.jsonl" % i, training_log(3000 + i)) for i in range(4)]
        saved = metrics_cache.CACHE_BYTES
        try:
            metrics_reduce.main([paths[0]])
            one = metrics_cache._weight(next(iter(metrics_cache._known.values())))
            # Room for two files: the oldest goes first.
            metrics_cache.CACHE_BYTES = 2 * one + one // 2
            for path in paths[1:]:
                metrics_reduce.main([path])
            self.assertEqual([metrics_reduce.main([p])["source"] for p in paths[2:]], ["cache", "cache"])
            self.assertEqual(metrics_reduce.main([paths[0]])["source"], "read")
            # A reduction bigger than half the room is not kept; its zone map is (zoom still reads little).
            metrics_cache.CACHE_BYTES = one
            metrics_cache.forget()
            metrics_reduce.main([paths[1]])
            self.assertEqual(metrics_reduce.main([paths[1]])["source"], "read")
            self.assertEqual(metrics_reduce.main([paths[1], "--from", "10", "--to", "20"])["source"], "cache")
        finally:
            metrics_cache.CACHE_BYTES = saved

    def in_child(self, argv):
        """main(argv) in a forked child, as the resident helper will serve a request: (its answer, its export)."""
        import marshal

        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(rfd)
                out = marshal.dumps((json.dumps(metrics_reduce.main(argv)), metrics_reduce.KG_STATE_EXPORT()))
                while out:
                    out = out[os.write(wfd, out):]
            finally:
                os._exit(0)
        os.close(wfd)
        chunks = []
        while True:
            c = os.read(rfd, 1 << 20)
            if not c:
                break
            chunks.append(c)
        os.close(rfd)
        os.waitpid(pid, 0)
        answer, state = marshal.loads(b"".join(chunks))
        return json.loads(answer), state

    def test_what_a_forked_child_learnt_is_carried_back_as_plain_data(self):
        path = self.write("run.jsonl", training_log(20000))
        first, state = self.in_child([path])
        self.assertEqual(first["source"], "read")
        self.assertEqual(metrics_cache._known, {})  # the parent learnt nothing by itself
        metrics_reduce.KG_STATE_IMPORT(state)
        again = metrics_reduce.main([path])
        self.assertEqual((again["source"], again["bytesRead"]), ("cache", 0))
        self.assertEqual(without(again, "source", "bytesRead"), without(first, "source", "bytesRead"))
        # Only what changed travels: nothing new was learnt by that reopen... until the file grows.
        self.assertEqual(metrics_reduce.KG_STATE_EXPORT()["put"], [])
        with open(path, "a") as f:
            f.write(training_log(100, start=20000))
        grown, state = self.in_child([path])
        self.assertEqual((grown["source"], grown["lines"]), ("cache", sum(1 for _ in open(path))))
        self.assertEqual(len(state["put"]), 1)
        metrics_reduce.KG_STATE_IMPORT(state)
        self.assertEqual(metrics_reduce.main([path])["bytesRead"], 0)
        # A child that finds the file rewritten reads it again, and what it keeps replaces the old entry.
        with open(path, "w") as f:
            f.write(training_log(10))
        _, state = self.in_child([path, "--from", "1", "--to", "5"])
        key = (os.path.abspath(path), "step")
        self.assertEqual([(k, e["pos"]) for k, e in state["put"]], [(key, os.path.getsize(path))])
        metrics_reduce.KG_STATE_IMPORT(state)
        self.assertEqual(metrics_cache._known[(os.path.abspath(path), "step")]["pos"], os.path.getsize(path))
        # One that forgets (evicts) carries the drop back.
        metrics_reduce.KG_STATE_EXPORT()
        metrics_cache.forget()
        self.assertEqual(metrics_reduce.KG_STATE_EXPORT()["drop"], [(os.path.abspath(path), "step")])

    def test_imported_state_stays_within_its_bounds(self):
        path = self.write("run.jsonl", training_log(3000))
        metrics_reduce.main([path])
        entry = metrics_reduce.KG_STATE_EXPORT(full=True)["put"][0][1]
        many = {"version": 1, "put": [(("/f%d" % i, "step"), entry) for i in range(3 * metrics_cache.CACHE_FILES)]}
        metrics_reduce.KG_STATE_IMPORT(many)
        self.assertEqual(len(metrics_cache._known), metrics_cache.CACHE_FILES)
        self.assertIn(("/f%d" % (3 * metrics_cache.CACHE_FILES - 1), "step"), metrics_cache._known)
        metrics_reduce.KG_STATE_IMPORT({"version": 2, "put": "nonsense"})  # ignored
        metrics_reduce.KG_STATE_IMPORT(None)
        self.assertEqual(len(metrics_cache._known), metrics_cache.CACHE_FILES)

    def test_a_rewritten_file_is_read_again(self):
        path = self.write("run.jsonl", training_log(3000))
        metrics_reduce.main([path])
        # Same size, same first and last bytes, one number changed in the middle: only the mtime tells.
        text = training_log(3000)
        mid = text.index('"loss": ', len(text) // 2) + len('"loss": ')
        changed = text[:mid] + "9" + text[mid + 1:]
        st = os.stat(path)
        with open(path, "w") as f:
            f.write(changed)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        r = metrics_reduce.main([path])
        self.assertEqual(r["source"], "read")
        self.assertGreater(max(series_by_key(r)["loss"]["max"]), 9.0)
        # A new run in the same file, longer than the old one: its first bytes differ.
        with open(path, "w") as f:
            f.write('{"step": 0, "loss": 7.5}\n' + training_log(4000, start=1))
        r2 = metrics_reduce.main([path])
        self.assertEqual(r2["source"], "read")
        self.assertEqual(max(series_by_key(r2)["loss"]["max"]), 7.5)  # the new run's first line
        self.assertEqual(r2["lines"], 1 + 4000 + 4000 // 250)
        # Another file at the same path (a new inode) is another file.
        os.rename(path, path + ".old")
        with open(path + ".old") as f:
            self.write("run.jsonl", f.read())
        self.assertEqual(metrics_reduce.main([path])["source"], "read")

    def test_zoom_reads_only_the_stretches_whose_steps_meet_the_window(self):
        # A resumed run replays steps, so stretches overlap in x: every one that meets the window is read.
        path = self.write("run.jsonl", training_log(60000, replay_every=7000))
        size = os.path.getsize(path)
        metrics_reduce.main([path])
        for lo, hi in ((20000, 20500), (6800, 7100), (0, 10), (59990, 70000), (100000, 200000)):
            args = [path, "--from", str(lo), "--to", str(hi), "--series", "loss,eval.loss"]
            zoom = metrics_reduce.main(args)
            fresh = metrics_reduce.main(args + ["--fresh"])
            self.assertEqual(zoom["source"], "cache")
            self.assertEqual(zoom["series"], fresh["series"], (lo, hi))
            self.assertLess(zoom["bytesRead"], size / 4, (lo, hi))
            self.assertEqual(fresh["bytesRead"], size)
        self.assertTrue(series_by_key(metrics_reduce.main([path, "--from", "6800", "--to", "7100"]))["loss"]["x"])
        # Lines appended after the zone map was made are read too.
        with open(path, "a") as f:
            f.write(training_log(100, start=60000))
        zoom = metrics_reduce.main([path, "--from", "60050", "--to", "60060"])
        self.assertEqual(series_by_key(zoom)["loss"]["x"], list(range(60050, 60061)))

    def test_a_window_read_first_makes_the_zone_map(self):
        path = self.write("run.jsonl", training_log(40000))
        size = os.path.getsize(path)
        first = metrics_reduce.main([path, "--from", "100", "--to", "200"])
        self.assertEqual((first["source"], first["bytesRead"]), ("read", size))
        second = metrics_reduce.main([path, "--from", "30000", "--to", "30100"])
        self.assertEqual(second["source"], "cache")
        self.assertLess(second["bytesRead"], size / 4)
        self.assertEqual(series_by_key(second)["loss"]["x"], list(range(30000, 30101)))
        # The window read kept no whole-file reduction: opening the file reads it.
        self.assertEqual(metrics_reduce.main([path])["source"], "read")


if __name__ == "__main__":
    unittest.main()
