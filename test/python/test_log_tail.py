import json
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import kg_common  # noqa: E402
import kg_redact  # noqa: E402
import log_tail  # noqa: E402


class LogTailTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kg-tail-")
        self.path = os.path.join(self.dir, "train_log.jsonl")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_concurrent_writer_with_torn_lines(self):
        total = 3000

        def writer():
            with open(self.path, "ab", buffering=0) as f:
                for i in range(total):
                    line = json.dumps({"step": i, "loss": 1.0 / (i + 1), "tok_per_s": 12800.0 + i}).encode() + b"\n"
                    # Every line goes out in two writes, so a reader often sees half of one.
                    half = len(line) // 2
                    f.write(line[:half])
                    if i % 50 == 0:
                        time.sleep(0.001)
                    f.write(line[half:])
            with open(self.path, "ab") as f:
                f.write(b'{"step": 999999, "loss": 0.')  # torn for good: never read

        open(self.path, "wb").close()
        t = threading.Thread(target=writer)
        t.start()
        offset = 0
        inode = None
        steps = []
        polls = 0
        while True:
            alive = t.is_alive()
            args = [self.path, "--offset", str(offset), "--max-bytes", "4096"]
            if inode is not None:
                args += ["--inode", str(inode)]
            r = log_tail.main(args)
            polls += 1
            self.assertFalse(r["reset"])
            self.assertEqual(r["offset"], offset)
            self.assertEqual(r["malformed"], 0)
            for rec in r["lines"]:
                steps.append(rec["step"])
            if r["lines"]:
                self.assertEqual(r["latest"]["step"], r["lines"][-1]["step"])
                self.assertEqual(r["latest"]["tokensPerSec"], 12800.0 + r["lines"][-1]["step"])
                self.assertEqual(r["latest"]["tokensPerSecKey"], "tok_per_s")
            offset = r["nextOffset"]
            inode = r["inode"]
            if not alive and not r["hasMore"] and not r["lines"]:
                break
        t.join()
        self.assertEqual(steps, list(range(total)))  # each line exactly once, in order, never half of one
        self.assertGreater(polls, 2)
        with open(self.path, "rb") as f:
            data = f.read()
        self.assertEqual(offset, data.rfind(b"\n") + 1)
        self.assertLess(offset, len(data))

    def test_truncation_and_rotation_restart_from_zero(self):
        with open(self.path, "w") as f:
            for i in range(100):
                f.write('{"step": %d, "loss": 1.5}\n' % i)
        r = log_tail.main([self.path, "--offset", "0"])
        self.assertEqual(r["count"], 100)
        offset, inode = r["nextOffset"], r["inode"]
        # A new run truncates the log and writes less than was there.
        with open(self.path, "w") as f:
            f.write('{"step": 0, "loss": 9.0}\n{"step": 1, "loss": 8.0}\n')
        r = log_tail.main([self.path, "--offset", str(offset), "--inode", str(inode)])
        self.assertTrue(r["reset"])
        self.assertEqual(r["offset"], 0)
        self.assertEqual([x["loss"] for x in r["lines"]], [9.0, 8.0])
        # Rotation: a new file under the same name, larger than the old offset.
        offset, inode = r["nextOffset"], r["inode"]
        other = self.path + ".new"
        with open(other, "w") as f:
            for i in range(50):
                f.write('{"global_step": %d, "train": {"tokens_per_sec": 5.5}}\n' % i)
        keep = self.path + ".keep"  # hold the old inode so the new file cannot reuse its number
        os.rename(self.path, keep)
        os.rename(other, self.path)
        r = log_tail.main([self.path, "--offset", str(offset), "--inode", str(inode)])
        self.assertTrue(r["reset"])
        self.assertEqual(r["count"], 50)
        self.assertEqual(r["latest"], {"step": 49, "stepKey": "global_step", "tokensPerSec": 5.5,
                                       "tokensPerSecKey": "train.tokens_per_sec"})

    def test_recent_throughput_for_the_level(self):
        # a loop that logs a save stall every 10th line: the recent values carry the stall, their median does not
        with open(self.path, "w") as f:
            for i in range(100):
                f.write('{"step": %d, "tok_s": %d, "loss": 2.0}\n' % (i, 100 if i % 10 == 9 else 500 + i % 3))
        r = log_tail.main([self.path, "--offset", "0", "--latest-only"])
        self.assertEqual(r["latest"]["tokensPerSec"], 100)
        self.assertEqual(len(r["recent"]), log_tail.RECENT)
        self.assertEqual(r["recent"][-1], 100)
        self.assertEqual(sorted(r["recent"])[len(r["recent"]) // 2] // 10, 50)
        with open(self.path, "a") as f:
            f.write('{"step": 100, "loss": 2.0}\n')
        r = log_tail.main([self.path, "--offset", "0", "--latest-only"])
        self.assertEqual(r["recent"][-1], 100)
        self.assertEqual(log_tail.main([self.path + ".none", "--offset", "0"])["recent"], [])

    def test_near_the_end_and_raw_lines(self):
        with open(self.path, "w") as f:
            for i in range(1000):
                f.write('{"step": %d, "tok/s": %d}\n' % (i, i * 10))
            f.write("Traceback (most recent call last):\n")
        r = log_tail.main([self.path, "--offset", "-1", "--max-bytes", "200", "--latest-only"])
        self.assertEqual(r["lines"], [])
        self.assertGreater(r["count"], 0)
        self.assertLess(r["count"], 12)
        self.assertEqual(r["malformed"], 1)
        self.assertEqual(r["latest"]["step"], 999)
        self.assertEqual(r["latest"]["tokensPerSec"], 9990)
        self.assertEqual(r["nextOffset"], os.path.getsize(self.path))
        r = log_tail.main([self.path, "--offset", str(r["nextOffset"] - 36)])
        self.assertEqual(r["lines"], [{"$raw": "Traceback (most recent call last):"}])

    def test_secrets_in_lines_never_leave_the_host(self):
        with open(self.path, "w") as f:
            f.write('{"step": 1, "loss": 2.5, "hub_token": "hf_tok_one", "url": "https://u:p/w@d@h.example/x"}\n')
            f.write("export HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567 && python train.py --wandb_api_key k123\n")
        r = log_tail.main([self.path, "--offset", "0"])
        text = json.dumps(r)
        for clear in ("hf_tok_one", "p/w@d", "hf_AbCd", "k123"):
            self.assertNotIn(clear, text)
        self.assertEqual(r["lines"][0]["hub_token"], kg_redact.redact_secret("hf_tok_one"))
        self.assertEqual(r["lines"][0]["loss"], 2.5)
        self.assertEqual(r["lines"][0]["url"], "https://u:%s@h.example/x" % kg_redact.redact_secret("p/w@d"))
        self.assertTrue(r["lines"][1]["$raw"].startswith("export HF_TOKEN=<redacted sha256:"))

    def test_missing_file_and_bad_args(self):
        r = log_tail.main([os.path.join(self.dir, "nope.jsonl"), "--offset", "0"])
        self.assertFalse(r["exists"])
        self.assertEqual(r["nextOffset"], 0)
        with self.assertRaises(kg_common.ProbeError):
            log_tail.main([self.path])


if __name__ == "__main__":
    unittest.main()
