"""Hostile files given to the probes that read logs and files: each is refused or read within kg_common.LIMITS.

Every probe runs in a child process under the limits a real run applies (kg_common.apply_process_limits), and its
peak RSS (VmHWM) is checked against the 256 MiB memory limit.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import shutil
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PY_DIR = os.path.abspath(os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, PY_DIR)

import kg_common  # noqa: E402

MiB = 1 << 20
RSS_CAP_KB = 256 * 1024

_RUNNER = """
import sys
sys.path.insert(0, %r)
import kg_common
import %s as probe
kg_common.apply_process_limits(kg_common.probe_limits(probe.main))
doc, text, status = kg_common.call_probe(probe.main, %r)
# Peak RSS of this process image: the footprint's ru_maxrss carries the test process's own peak across exec.
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
sys.stdout.write(text[:-1] + ', "vmHwmKb": %%d}' %% int(hwm[0].split()[1]))
"""


def envelope(probe, *args, timeout=60):
    """The probe's envelope (with its footprint), run in its own process as the extension runs it."""
    r = subprocess.run([sys.executable, "-c", _RUNNER % (PY_DIR, probe, list(args))], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    doc = json.loads(r.stdout.decode())
    doc["rssKb"] = doc["vmHwmKb"]
    return doc


def good_lines(first, n):
    return "".join(json.dumps({"step": i, "loss": 1.0 / (i + 1)}) + "\n" for i in range(first, first + n)).encode()


def loss_xs(result):
    return [s for s in result["series"] if s["key"] == "loss"][0]["x"]


class Hostile(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kg-hostile-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def fifo(self):
        p = self.path("pipe.jsonl")
        os.mkfifo(p)
        return p

    def with_middle(self, name, middle, before=50, after=50):
        """good lines, then middle (bytes, or an int: that many zero bytes left as a sparse hole), then good lines."""
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(good_lines(0, before))
            if isinstance(middle, int):
                f.seek(middle, os.SEEK_CUR)
            else:
                f.write(middle)
            f.write(b"\n" + good_lines(before, after))
        return p


class MetricsReduceHostile(Hostile):
    def test_a_character_device_is_refused_unread(self):
        doc = envelope("metrics_reduce", "/dev/zero")
        self.assertFalse(doc["ok"])
        self.assertEqual(doc["error"]["code"], "not-regular")
        self.assertIn("character device", doc["error"]["message"])
        self.assertLess(doc["rssKb"], RSS_CAP_KB)

    def test_a_fifo_is_refused_without_blocking(self):
        doc = envelope("metrics_reduce", self.fifo(), timeout=20)
        self.assertEqual(doc["error"]["code"], "not-regular")
        self.assertIn("FIFO", doc["error"]["message"])

    def test_a_unix_socket_is_refused_as_not_regular(self):
        # open() of a socket fails with ENXIO: it was reported "unreadable: No such device or address"
        p = self.path("train.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(s.close)
        s.bind(p)
        doc = envelope("metrics_reduce", p, timeout=20)
        self.assertEqual(doc["error"]["code"], "not-regular")
        self.assertIn("is a socket, not a regular file", doc["error"]["message"])

    def test_hundreds_of_megabytes_without_a_newline_are_skipped_and_the_rest_plots(self):
        p = self.with_middle("hole.jsonl", 300 * MiB)
        doc = envelope("metrics_reduce", p, "--jobs", "2")
        self.assertTrue(doc["ok"], doc.get("error"))
        r = doc["result"]
        self.assertEqual(r["skipped"]["tooLong"], 1)
        self.assertEqual(loss_xs(r), list(range(100)))
        self.assertEqual(r["nextOffset"], r["size"])
        self.assertLess(doc["rssKb"], RSS_CAP_KB)

    def test_a_huge_unterminated_tail_is_passed_over_once(self):
        p = self.path("tail.jsonl")
        with open(p, "wb") as f:
            f.write(good_lines(0, 10))
            f.write(b'{"step": 10, "note": "' + b"x" * (3 * MiB))
        doc = envelope("metrics_reduce", p)
        r = doc["result"]
        self.assertEqual(r["skipped"]["tooLong"], 1)
        self.assertEqual(r["nextOffset"], os.path.getsize(p))  # not its start: the next read does not redo it
        with open(p, "ab") as f:
            f.write(b'"}\n' + good_lines(11, 5))
        more = envelope("metrics_reduce", p, "--offset", str(r["nextOffset"]))["result"]
        self.assertEqual(more["skipped"]["tooLong"], 0)  # counted once, by the read that found it
        self.assertEqual(loss_xs(more), list(range(11, 16)))
        # The preview of a file that is mostly such a line still answers, bounded.
        big = self.path("mostly.jsonl")
        with open(big, "wb") as f:
            f.write(good_lines(0, 10) + b'{"x": "')
            f.seek(200 * MiB, os.SEEK_CUR)
            f.write(b'"}\n' + good_lines(10, 10))
        prev = envelope("metrics_reduce", big, "--preview")
        self.assertTrue(prev["ok"], prev.get("error"))
        self.assertLess(prev["rssKb"], RSS_CAP_KB)

    def test_a_30_mb_string_value_is_skipped_as_too_long(self):
        p = self.with_middle("str.jsonl", b'{"step": 7, "loss": 3.0, "note": "' + b"a" * (30 * MiB) + b'"}')
        doc = envelope("metrics_reduce", p)
        r = doc["result"]
        self.assertEqual(r["skipped"]["tooLong"], 1)
        self.assertEqual(loss_xs(r), list(range(100)))
        self.assertLess(doc["rssKb"], 64 * 1024)

    def test_a_long_string_within_the_line_limit_costs_a_small_multiple_of_it(self):
        # 900 KB of a string, plain or all escapes: the regex engine must not stack one frame per character.
        for body in (b"a" * 900000, b"\\n" * 450000):
            p = self.with_middle("long.jsonl", b'{"step": 50, "loss": 3.0, "note": "' + body + b'"}', after=200)
            doc = envelope("metrics_reduce", p)
            self.assertLess(doc["rssKb"], 48 * 1024, body[:4])
            r = doc["result"]
            self.assertEqual(r["skipped"]["tooLong"], 0)
            self.assertEqual(r["lines"], 251)

    def test_a_line_of_too_many_keys_is_skipped_and_counted(self):
        many = json.dumps(dict([("step", 5)] + [("k%d" % i, i) for i in range(kg_common.LIMITS["keys"] + 10)]))
        p = self.with_middle("keys.jsonl", many.encode())
        doc = envelope("metrics_reduce", p, timeout=30)
        r = doc["result"]
        self.assertEqual(r["skipped"]["tooManyKeys"], 1)
        self.assertEqual(r["keys"], ["loss", "step"])
        self.assertEqual(loss_xs(r), list(range(100)))
        self.assertLess(doc["rssKb"], RSS_CAP_KB)

    def test_lines_nested_too_deep_are_skipped_not_fatal(self):
        deep = b'{"a":' * 100000 + b"1" + b"}" * 100000
        deeper = b'{"step": 3, "loss": 2.0, "n": ' + b'{"a": ' * 300 + b"1" + b"}" * 301
        p = self.with_middle("deep.jsonl", deep + b"\n" + deeper)
        doc = envelope("metrics_reduce", p)
        self.assertTrue(doc["ok"], doc.get("error"))
        r = doc["result"]
        self.assertEqual(r["skipped"]["tooDeep"], 2)
        self.assertEqual(loss_xs(r), list(range(100)))

    def test_a_log_inventing_keys_keeps_a_bounded_number_of_series(self):
        saved = dict(kg_common.LIMITS)
        import metrics_reduce

        kg_common.LIMITS["keys"] = 40
        try:
            p = self.path("wide.jsonl")
            with open(p, "w") as f:
                for i in range(20):
                    f.write(json.dumps(dict([("step", i)] + [("k%d_%d" % (i, j), j) for j in range(30)])) + "\n")
            r = metrics_reduce.main([p, "--jobs", "1"])
        finally:
            kg_common.LIMITS.clear()
            kg_common.LIMITS.update(saved)
        self.assertLessEqual(len(r["series"]), 40)
        self.assertTrue(r["seriesTruncated"])
        self.assertEqual(r["seriesDropped"], 20 * 30 - 40)
        self.assertEqual(r["limits"]["keys"], 40)
        self.assertLessEqual(len(r["keys"]), 40 + 31)


class LogTailHostile(Hostile):
    def test_devices_and_fifos_are_refused(self):
        doc = envelope("log_tail", "/dev/zero", "--offset", "0")
        self.assertEqual(doc["error"]["code"], "not-regular")
        self.assertIn("character device", doc["error"]["message"])
        doc = envelope("log_tail", self.fifo(), "--offset", "0", timeout=20)
        self.assertEqual(doc["error"]["code"], "not-regular")
        self.assertIn("FIFO", doc["error"]["message"])

    def test_a_file_without_newlines_is_passed_over_in_bounded_steps(self):
        p = self.path("xs.jsonl")
        size = 2 * kg_common.LIMITS["read"] + MiB
        with open(p, "wb") as f:
            f.write(b"x" * size)
        doc = envelope("log_tail", p, "--offset", "0")
        r = doc["result"]
        self.assertEqual((r["tooLong"], r["count"], r["hasMore"]), (1, 0, True))
        self.assertEqual(r["nextOffset"], kg_common.LIMITS["read"])
        self.assertLess(doc["rssKb"], RSS_CAP_KB)
        again = envelope("log_tail", p, "--offset", str(r["nextOffset"]))["result"]
        self.assertEqual(again["tooLong"], 0)  # the same line, counted once
        self.assertEqual(again["nextOffset"], 2 * kg_common.LIMITS["read"])
        end = envelope("log_tail", p, "--offset", "-1")["result"]
        self.assertEqual((end["count"], end["nextOffset"], end["hasMore"]), (0, size, False))

    def test_a_sparse_file_of_10_gb_is_passed_over_without_reading_its_hole(self):
        p = self.path("zeros.jsonl")
        with open(p, "wb") as f:
            f.write(good_lines(0, 3))
            f.truncate(10 << 30)
        doc = envelope("log_tail", p, "--offset", "0", timeout=30)
        r = doc["result"]
        self.assertEqual((r["tooLong"], r["count"], r["nextOffset"]), (1, 3, 10 << 30))
        self.assertLess(doc["rssKb"], 64 * 1024)
        self.assertLess(doc["footprint"]["cpuS"], 5)
        doc = envelope("metrics_reduce", p, timeout=30)
        self.assertEqual((doc["result"]["skipped"]["tooLong"], doc["result"]["nextOffset"]), (1, 10 << 30))
        self.assertEqual(loss_xs(doc["result"]), [0, 1, 2])
        self.assertLess(doc["rssKb"], 64 * 1024)
        self.assertLess(doc["footprint"]["cpuS"], 5)

    def test_a_30_mb_line_is_skipped_and_the_lines_around_it_come(self):
        p = self.with_middle("str.jsonl", b'{"step": 7, "note": "' + b"a" * (30 * MiB) + b'"}', before=3, after=3)
        doc = envelope("log_tail", p, "--offset", "0")
        r = doc["result"]
        self.assertEqual(r["tooLong"], 1)
        self.assertEqual([x["step"] for x in r["lines"]], [0, 1, 2, 3, 4, 5])
        self.assertEqual(r["limits"]["line"], kg_common.LIMITS["line"])
        self.assertEqual(r["nextOffset"], os.path.getsize(p))
        self.assertLess(doc["rssKb"], 64 * 1024)

    def test_too_deep_and_too_many_keys_come_raw_and_counted(self):
        deep = b'{"a":' * 100000 + b"1" + b"}" * 100000
        many = json.dumps(dict(("k%d" % i, i) for i in range(kg_common.LIMITS["keys"] + 1))).encode()
        p = self.with_middle("odd.jsonl", deep + b"\n" + many, before=2, after=2)
        doc = envelope("log_tail", p, "--offset", "0")
        self.assertTrue(doc["ok"], doc.get("error"))
        r = doc["result"]
        self.assertEqual((r["tooDeep"], r["tooManyKeys"], r["count"]), (1, 1, 6))
        self.assertTrue(r["lines"][2]["$raw"].startswith('{"a":{"a":'))
        self.assertEqual(r["latest"]["step"], 3)

    def test_max_bytes_above_the_read_limit_is_refused(self):
        p = self.with_middle("ok.jsonl", b"")
        doc = envelope("log_tail", p, "--offset", "0", "--max-bytes", str(kg_common.LIMITS["read"] + 1))
        self.assertEqual(doc["error"]["code"], "limit-read")


class ReadFileHostile(Hostile):
    def test_devices_and_fifos_are_refused(self):
        doc = envelope("read_file", "/dev/zero")
        self.assertEqual(doc["error"]["code"], "not-regular")
        self.assertIn("character device", doc["error"]["message"])
        doc = envelope("read_file", self.fifo(), timeout=20)
        self.assertEqual(doc["error"]["code"], "not-regular")
        self.assertIn("FIFO", doc["error"]["message"])

    def test_a_64_mib_read_in_one_go_ends_as_limit_memory_with_its_footprint(self):
        # The answer (64 MiB, escaped into JSON) passes the memory limit while it is written: that error envelope
        # had no footprint, the one thing that shows how far past the limit it went
        p = self.path("big.log")
        with open(p, "wb") as f:
            f.write(b"x" * (64 * MiB))
        doc = envelope("read_file", p, "--max-bytes", str(64 * MiB))
        self.assertEqual(doc["error"]["code"], "limit-memory")
        self.assertIn("the answer", doc["error"]["message"])
        self.assertGreater(doc["footprint"]["maxRssKb"], 64 * 1024)

    def test_max_bytes_is_bounded_and_words_are_checked(self):
        p = self.with_middle("ok.jsonl", b"")
        self.assertEqual(envelope("read_file", p, "--max-bytes", str(1 << 40))["error"]["code"], "limit-read")
        self.assertEqual(envelope("read_file", p, "--max-bytes", "lots")["error"]["code"], "bad-args")
        ok = envelope("read_file", p, "--max-bytes", "100")
        self.assertEqual(ok["result"]["end"] - ok["result"]["start"], 100)


class ListRunsHostile(Hostile):
    def test_fifos_and_sockets_inside_a_run_show_their_kind_and_are_never_a_log(self):
        # They were listed as kind "file" (a FIFO named metrics.jsonl even with role "metrics")
        run = self.path("run")
        os.mkdir(run)
        os.mkfifo(os.path.join(run, "metrics.jsonl"))
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(s.close)
        s.bind(os.path.join(run, "ctl.sock"))
        doc = envelope("list_runs", self.dir, timeout=20)
        kids = {e["name"]: e for e in doc["result"]["roots"][0]["entry"]["children"][0]["children"]}
        self.assertEqual({n: (e["kind"], e.get("special"), e["role"]) for n, e in kids.items()},
                         {"metrics.jsonl": ("special", "fifo", "other"), "ctl.sock": ("special", "socket", "other")})

    def test_a_root_that_is_a_fifo_or_socket_is_named_so(self):
        fifo = self.fifo()
        sock_path = self.path("s.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(sock_path)
            doc = envelope("list_runs", fifo, sock_path, "/dev/null", timeout=20)
        finally:
            s.close()
        roots = doc["result"]["roots"]
        self.assertEqual([r["status"] for r in roots], ["not-a-directory"] * 3)
        self.assertIn("is a FIFO (named pipe), not a folder", roots[0]["message"])
        self.assertIn("is a socket, not a folder", roots[1]["message"])
        self.assertIn("is a character device, not a folder", roots[2]["message"])

    def test_a_huge_folder_is_read_within_bounds(self):
        run = self.path("run")
        os.mkdir(run)
        for i in range(3000):
            open(os.path.join(run, "step_%d.pt" % i), "wb").close()
        for name in ("train_log.jsonl", "config.yaml"):
            open(os.path.join(run, name), "wb").close()
        import list_runs

        r = list_runs.main([self.dir, "--max-entries", "10"])["roots"][0]
        kids = r["entry"]["children"][0]["children"]
        self.assertEqual(len(kids), 10)
        self.assertIn("train_log.jsonl", [k["name"] for k in kids])
        self.assertEqual(max(k.get("step") or 0 for k in kids), 2999)
        self.assertEqual(r["entry"]["children"][0]["omitted"], 2992)
        saved = kg_common.LIMITS["items"]
        kg_common.LIMITS["items"] = 500
        try:
            r = list_runs.main([self.dir, "--max-entries", "10"])["roots"][0]
        finally:
            kg_common.LIMITS["items"] = saved
        folder = r["entry"]["children"][0]
        self.assertTrue(folder["scanStopped"])
        self.assertEqual(len(folder["children"]), 10)

    def test_names_with_control_characters_come_out_as_ascii_json(self):
        run = self.path("run")
        os.mkdir(run)
        for raw in (b"new\nline.pt", b"esc\x1b[31mred.pt", b"bad\xff.pt", b"rtl\xe2\x80\xaeexe.pt"):
            open(os.path.join(os.fsencode(run), raw), "wb").close()
        out = subprocess.run([sys.executable, os.path.join(PY_DIR, "list_runs.py"), self.dir],
                             stdout=subprocess.PIPE, timeout=30).stdout
        self.assertTrue(all(0x20 <= b < 0x7f or b == 0x0a for b in out))
        kids = json.loads(out)["roots"][0]["entry"]["children"][0]["children"]
        self.assertIn("esc\x1b[31mred.pt", [k["name"] for k in kids])


if __name__ == "__main__":
    unittest.main()
