"""python/ckpt_args.py against hostile files: each ends in a result or a named limit, small, fast, running nothing.

The cases measured for memory run in a child process (peak RSS from the envelope's footprint, no rlimit applied, so
what is measured is what the reader really takes); the rest run in this process, where a second read after a hostile
one shows that nothing carried over. The fuzz test at the end mutates real torch checkpoints written by Debian's torch.
"""
import json
import os
import pickle
import resource
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import ckpt_fuzz  # noqa: E402
from ckpt_fuzz import P, _global, _str, zip_with_pickle  # noqa: E402

ckpt_args = ckpt_fuzz.ckpt_args
kg_common = ckpt_fuzz.kg_common
import kg_pickle_objects  # noqa: E402 (python/ is on the path through ckpt_fuzz)

RSS_LIMIT_KB = 256 * 1024

# Runs the probe as the extension does (kg_common.call_probe), without rlimits: prints the envelope's size, the
# footprint and the result or error.
DRIVER = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import ckpt_args, kg_common
doc, text, status = kg_common.call_probe(ckpt_args.main, sys.argv[2:])
print(json.dumps({"textBytes": len(text), "footprint": doc["footprint"], "ok": doc["ok"],
                  "error": doc.get("error"), "result": doc.get("result") if len(text) < 1 << 20 else None}))
'''


def probe_child(path, *extra, timeout=60):
    """(summary, CPU seconds) of one read in a child process; a hang is a test failure, not a stuck suite.

    CPU seconds, not wall-clock: a blow-up burns CPU whatever else the machine runs, and a busy machine does not
    stretch them (a blocked read burns none: the timeout catches it).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, "-c", DRIVER, ckpt_fuzz.PYDIR, path] + list(extra), capture_output=True,
                       text=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise AssertionError("the reader's process failed (%d): %s" % (r.returncode, r.stderr[-2000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(r.stdout.strip().splitlines()[-1]), cpu


class Hostile(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kg-ckpt-hostile-")
        self.saved_limits = dict(kg_common.LIMITS)

    def tearDown(self):
        kg_common.LIMITS.clear()
        kg_common.LIMITS.update(self.saved_limits)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def p(self, name):
        return os.path.join(self.tmp, name)

    def zp(self, name, pkl):
        return zip_with_pickle(self.p(name), pkl)

    def assertSmall(self, summary, what, max_text=1 << 20):
        self.assertLess(summary["footprint"]["maxRssKb"], RSS_LIMIT_KB, "%s: peak RSS %s" % (what, summary))
        self.assertLess(summary["textBytes"], max_text, "%s: answer of %d bytes" % (what, summary["textBytes"]))

    # --- the unpickler reads what the stdlib pickler writes -------------------------------------------------------

    def test_every_protocol_of_the_stdlib_pickler(self):
        shared = list(range(10))
        obj = {"args": {"lr": 0.5, "name": "x", "t": (1, 2), "l": [1, [2, 3]], "s": {"a"}, "fs": frozenset({1}),
                        "b": b"ab", "ba": bytearray(b"c"), "big": 2 ** 100, "neg": -5, "none": None, "flag": True,
                        "f": 1e-3, "u": "\u00fc\u20ac\U0001f600", "a_shared": shared, "b_shared": shared,
                        "long": "z" * 70000, "ints": [0, 255, 256, 65535, 65536, -1, 2 ** 31, -2 ** 31 - 1]},
               "big": list(range(300000))}  # more than the first 1 MB read of a plain pickle file: read again
        want = {"lr": 0.5, "name": "x", "t": [1, 2], "l": [1, [2, 3]], "s": ["a"], "fs": [1], "b": "b'ab'",
                "ba": "b'c'", "big": 2 ** 100, "neg": -5, "none": None, "flag": True, "f": 1e-3,
                "u": "\u00fc\u20ac\U0001f600", "a_shared": shared, "b_shared": {"$ref": "$.a_shared"},
                "ints": [0, 255, 256, 65535, 65536, -1, 2 ** 31, -2 ** 31 - 1]}
        for proto in range(0, pickle.HIGHEST_PROTOCOL + 1):
            path = self.p("p%d.pkl" % proto)
            with open(path, "wb") as f:
                pickle.dump(obj, f, protocol=proto)
            doc = ckpt_args.main([path])
            self.assertEqual(doc["format"], "pickle")
            got = dict(doc["args"])
            self.assertTrue(got.pop("long").endswith("[truncated: 70000 characters in all]"), proto)
            self.assertEqual(got, want, "protocol %d" % proto)

    # --- shared references ----------------------------------------------------------------------------------------

    def test_billion_laughs_is_rendered_once(self):
        # a 4 KB file referencing one 1,600-character string 2**18 times (old code: 415 MB of JSON at 1.2 GB RSS)
        path = self.zp("laughs.pt", ckpt_fuzz.billion_laughs(18))
        self.assertLess(os.path.getsize(path), 4096)
        s, t = probe_child(path)
        self.assertTrue(s["ok"], s)
        self.assertSmall(s, "billion laughs", 64 * 1024)
        args = s["result"]["args"]
        self.assertEqual(args[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0], "x" * 1600)
        self.assertEqual(args[1], {"$ref": "$[0]"})
        self.assertTrue(any("$ref" in w for w in s["result"]["warnings"]))

    def test_exponential_graph_of_stand_ins_ends(self):
        # 60 levels of a stand-in whose state holds the level below twice: 2**60 nodes expanded (old code: ran until
        # killed)
        s, t = probe_child(self.zp("graph.pt", ckpt_fuzz.shared_dict_graph(60)), timeout=60)
        self.assertTrue(s["ok"], s)
        self.assertSmall(s, "exponential graph", 64 * 1024)
        self.assertLess(t, 20)
        self.assertEqual(s["result"]["argsType"], "mylib.Node")
        self.assertEqual(s["result"]["args"]["b"], {"$ref": "$.a"})

    def test_a_cycle_is_a_reference_to_its_ancestor(self):
        pkl = (P.PROTO + b"\x02" + P.EMPTY_DICT + _str("args") + P.EMPTY_DICT + P.BINPUT + b"\x01"
               + _str("self") + P.BINGET + b"\x01" + P.SETITEM + _str("lr") + P.BININT1 + b"\x03" + P.SETITEM
               + P.SETITEM + P.STOP)
        doc = ckpt_args.main([self.zp("cycle.pt", pkl)])
        self.assertEqual(doc["args"], {"self": {"$ref": "$"}, "lr": 3})

    # --- the memo ---------------------------------------------------------------------------------------------------

    def test_huge_memo_index_allocates_nothing(self):
        # 24 bytes (old code: the C unpickler's memo array sized to the index, 2-4 GB)
        s, t = probe_child(self.zp("memo.pt", ckpt_fuzz.memo_index_bomb()))
        self.assertTrue(s["ok"], s)
        self.assertSmall(s, "memo index bomb")
        self.assertLess(t, 10)

    def test_memo_size_is_capped_at_the_item_limit(self):
        kg_common.LIMITS["items"] = 1000
        with self.assertRaises(kg_common.LimitError) as cm:
            ckpt_args.main([self.zp("memo.pt", ckpt_fuzz.memo_count(1001))])
        self.assertEqual(cm.exception.code, "limit-items")
        self.assertIn("memo", str(cm.exception))
        self.assertEqual(ckpt_args.main([self.zp("memo2.pt", ckpt_fuzz.memo_count(999))])["args"], None)

    # --- sizes ------------------------------------------------------------------------------------------------------

    def test_zip_member_inflating_past_the_read_limit(self):
        # a small zip whose data.pkl inflates to a 100 MB string (old code: read whole, 1.6 GB RSS, 419 MB output)
        import zipfile
        path = self.p("inflate.pt")
        n = 100 * 1024 * 1024
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            with zf.open("x/data.pkl", "w") as m:
                m.write(P.PROTO + b"\x04" + b"\x8d" + struct.pack("<Q", n))
                chunk = b"a" * (1 << 20)
                for _ in range(n >> 20):
                    m.write(chunk)
                m.write(P.STOP)
        self.assertLess(os.path.getsize(path), 1 << 20)
        s, _t = probe_child(path)
        self.assertFalse(s["ok"])
        self.assertEqual(s["error"]["code"], "limit-read", s)
        self.assertIn("read limit of 64.0 MB", s["error"]["message"])
        self.assertSmall(s, "inflating zip")

    def test_long_strings_are_cut_with_their_length(self):
        text = "y" * 300000
        pkl = P.PROTO + b"\x02" + P.EMPTY_DICT + _str("args") + P.EMPTY_DICT + _str("notes") + _str(text) \
            + P.SETITEM + P.SETITEM + P.STOP
        doc = ckpt_args.main([self.zp("long.pt", pkl)])
        shown = doc["args"]["notes"]
        self.assertLess(len(shown), 20000)
        self.assertTrue(shown.endswith("[truncated: 300000 characters in all]"), shown[-80:])
        self.assertTrue(any("truncated" in w for w in doc["warnings"]))

    def test_opcode_budget_is_a_named_limit(self):
        kg_common.LIMITS["items"] = 1000
        pkl = P.PROTO + b"\x02" + (P.NONE + P.POP) * 1500 + P.NONE + P.STOP
        with self.assertRaises(kg_common.LimitError) as cm:
            ckpt_args.main([self.zp("ops.pt", pkl)])
        self.assertEqual(cm.exception.code, "limit-items")
        self.assertIn("opcodes", str(cm.exception))

    def test_object_bombs_end_at_the_opcode_budget_under_256_mb(self):
        # 2.1 million opcodes that each keep an object: the opcode budget (2 x LIMITS["items"]) ends them
        n = 2100000
        for name, pkl in (("lists", P.PROTO + b"\x02" + P.EMPTY_LIST * n + P.STOP),
                          ("sets", P.PROTO + b"\x04" + b"\x8f" * n + P.STOP),
                          ("stand-ins", P.PROTO + b"\x02" + _global("mylib", "X") + P.BINPUT + b"\x00"
                           + (P.BINGET + b"\x00" + P.EMPTY_TUPLE + P.REDUCE) * (n // 3) + P.STOP)):
            s, t = probe_child(self.zp(name + ".pt", pkl))
            self.assertEqual((s["error"] or {}).get("code"), "limit-items", s)
            self.assertIn("opcodes", s["error"]["message"])
            self.assertSmall(s, name)
            self.assertLess(t, 15, name)

    def test_a_limit_hit_by_a_hostile_file_still_lists_its_dangerous_globals(self):
        kg_common.LIMITS["items"] = 1000
        pkl = P.PROTO + b"\x04" + _global("posix", "system") + P.POP + P.NONE + b"\x94" * 1001 + P.STOP
        doc = ckpt_args.main([self.zp("evil-memo.pt", pkl)])
        self.assertEqual(doc["unsafeGlobals"], ["posix.system"])
        self.assertTrue(any("item-count limit of 1000" in w for w in doc["warnings"]), doc["warnings"])
        self.assertTrue(doc["warnings"][0].startswith("UNSAFE"))

    def test_many_classes_and_repeated_builds_are_bounded(self):
        kg_common.LIMITS["items"] = 10000
        # a distinct global per opcode pair: each would be a class (~1 KB) of its own
        pkl = P.PROTO + b"\x02" + b"".join(_global("m%d" % i, "C") + P.POP for i in range(200)) + P.NONE + P.STOP
        with self.assertRaises(kg_common.LimitError) as cm:
            ckpt_args.main([self.zp("classes.pt", pkl)])
        self.assertIn("classes", str(cm.exception))
        # the same big (state, slotstate) merged by BUILD again and again: the items copied are counted
        big = P.EMPTY_DICT + P.MARK + b"".join(_str("k%d" % i) + P.NONE for i in range(3000)) + P.SETITEMS
        pkl = (P.PROTO + b"\x02" + big + P.BINPUT + b"\x00" + P.POP + _global("mylib", "X") + P.EMPTY_TUPLE
               + P.NEWOBJ + (P.BINGET + b"\x00" + P.BINGET + b"\x00" + P.TUPLE2 + P.BUILD) * 100 + P.STOP)
        with self.assertRaises(kg_common.LimitError) as cm:
            ckpt_args.main([self.zp("builds.pt", pkl)])
        self.assertIn("items copied", str(cm.exception))
        # a thousand dangerous globals are listed up to 100, each check cheap
        pkl = P.PROTO + b"\x02" + b"".join(_global("os", "f%d" % i) + P.POP for i in range(1000)) + P.NONE + P.STOP
        kg_common.LIMITS["items"] = 1000000
        doc = ckpt_args.main([self.zp("unsafe.pt", pkl)])
        self.assertEqual(len(doc["unsafeGlobals"]), 100)
        self.assertTrue(any("more than 100 dangerous globals" in w for w in doc["warnings"]))

    def test_deep_nesting(self):
        with self.assertRaises(kg_common.LimitError) as cm:
            ckpt_args.main([self.zp("marks.pt", ckpt_fuzz.deep_marks(100000))])
        self.assertEqual(cm.exception.code, "limit-depth")
        doc = ckpt_args.main([self.zp("deep.pt", ckpt_fuzz.deep_tuple(200000))])
        self.assertTrue(any("too deep" in w for w in doc["warnings"]), doc["warnings"])
        kg_common.dumps(doc)
        # as a dict key its hash would recurse 200,000 deep (old code: the process crashed)
        s, _t = probe_child(self.zp("deepkey.pt", ckpt_fuzz.deep_tuple(200000, as_key=True)))
        self.assertTrue(s["ok"], s)
        self.assertSmall(s, "deep tuple key")
        s, t = probe_child(self.zp("sharedkey.pt", ckpt_fuzz.shared_tuple_key(80)), timeout=60)
        self.assertTrue(s["ok"], s)
        self.assertLess(t, 20)

    def test_calls_on_shared_structures_stay_bounded(self):
        # numpy.dtype(x), slice(x), torch.device('cuda', x), str(x)... of a tuple that doubles 100 times: the old code
        # turned x into text with str()/repr(), which walks 2**100 leaves
        for name, pkl in ckpt_fuzz.hostile_cases(self.tmp):
            if not name.startswith("repr-") and name != "float-long-text":
                continue
            outcome, cpu = ckpt_fuzz.run_case(self.zp(name + ".pt", pkl), time_limit=10)
            self.assertEqual(outcome, "ok", name)
            self.assertLess(cpu, 5, name)

    # --- integers ---------------------------------------------------------------------------------------------------

    def test_integers_of_more_than_4300_digits_are_described(self):
        doc = ckpt_args.main([self.zp("int.pt", ckpt_fuzz.huge_int_text(5000))])
        self.assertEqual(doc["args"]["n"]["$bigint"]["digits"], 5000)
        doc = ckpt_args.main([self.zp("intkey.pt", ckpt_fuzz.huge_int_text(5000, key=True))])
        self.assertEqual(list(doc["args"].values()), [None])
        doc = ckpt_args.main([self.zp("long4.pt", ckpt_fuzz.huge_int_binary(100000))])
        self.assertGreater(doc["args"]["n"]["$bigint"]["digits"], 4300)
        json.loads(kg_common.dumps(doc))
        doc = ckpt_args.main([self.zp("intcall.pt", ckpt_fuzz.huge_int_call(5000))])
        self.assertEqual(doc["args"]["$bigint"]["digits"], 5000)

    # --- nothing carries over, nothing runs -------------------------------------------------------------------------

    def test_a_file_cannot_change_how_the_next_is_read(self):
        # BUILD with slot state on builtins.str (the reader's own function): old code set its __defaults__, and a
        # later harmless str() showed the planted value
        plant = (P.PROTO + b"\x02" + _global("builtins", "str") + P.NONE + P.EMPTY_DICT
                 + _str("__defaults__") + _str("planted") + P.TUPLE1 + P.SETITEM + P.TUPLE2 + P.BUILD + P.STOP)
        harmless = (P.PROTO + b"\x02" + P.EMPTY_DICT + _str("args") + P.EMPTY_DICT + _str("s")
                    + _global("builtins", "str") + P.EMPTY_TUPLE + P.REDUCE + P.SETITEM + P.SETITEM + P.STOP)
        before = ckpt_args.main([self.zp("ok1.pt", harmless)])
        self.assertEqual(before["args"], {"s": ""})
        for mod, name in (("builtins", "str"), ("argparse", "Namespace"), ("collections", "OrderedDict"),
                          ("builtins", "object"), ("builtins", "list"), ("torch._utils", "_rebuild_tensor_v2")):
            hostile = plant.replace(b"builtins\nstr\n", (mod + "\n" + name + "\n").encode())
            doc = ckpt_args.main([self.zp("plant.pt", hostile)])
            self.assertTrue(any("ignored" in w for w in doc["warnings"]), doc["warnings"])
            after = ckpt_args.main([self.zp("ok2.pt", harmless)])
            self.assertEqual(after["args"], {"s": ""}, "after planting on %s.%s" % (mod, name))
        self.assertEqual(kg_pickle_objects._safe_str(), "")

    def test_dangerous_globals_are_listed_never_called(self):
        for i, pkl in enumerate(ckpt_fuzz.dangerous_calls(self.tmp)):
            path = self.zp("evil%d.pt" % i, pkl)
            try:
                doc = ckpt_args.main([path])
            except kg_common.ProbeError:
                continue
            if b"posix\nsystem" in pkl and b"__setstate__" not in pkl:
                self.assertIn("posix.system", doc["unsafeGlobals"])
        self.assertFalse(os.path.exists(self.p(ckpt_fuzz.MARKER)))

    # --- files that are not files ----------------------------------------------------------------------------------

    def test_fifo_and_devices_are_refused_without_blocking(self):
        fifo = self.p("ckpt.fifo")
        os.mkfifo(fifo)
        for path, kind in ((fifo, "FIFO"), ("/dev/zero", "character device")):
            s, t = probe_child(path, timeout=20)  # old code: blocked forever
            self.assertFalse(s["ok"])
            self.assertEqual(s["error"]["code"], "not-regular", s)
            self.assertIn(kind, s["error"]["message"])
            self.assertLess(t, 10)

    def test_sparse_10gb_files(self):
        for name, head in (("zeros.pt", b""), ("zip.pt", b"PK\x03\x04"), ("legacy.pt", P.PROTO + b"\x02" + P.MARK),
                           ("st.safetensors", struct.pack("<Q", 1 << 33) + b"{")):
            path = self.p(name)
            with open(path, "wb") as f:
                f.write(head)
                f.truncate(10 << 30)
            s, t = probe_child(path, timeout=60)
            self.assertSmall(s, name)
            self.assertLess(t, 20, name)
            self.assertFalse(s["ok"], s)
            self.assertIn(s["error"]["code"], ("not-a-checkpoint", "corrupt", "limit-read"), s)

    def test_safetensors_header_with_bad_offsets(self):
        header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": ["a", "b"]}}).encode()
        path = self.p("bad.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header + b"\0" * 8)
        with self.assertRaises(kg_common.ProbeError) as cm:  # old code: TypeError
            ckpt_args.main([path])
        self.assertEqual(cm.exception.code, "corrupt")

    # --- fuzzing ----------------------------------------------------------------------------------------------------

    def test_fuzz_fixed_seed(self):
        # torch must be there: the mutations start from real checkpoints (write_real_checkpoints fails loudly)
        t0 = time.perf_counter()
        res = ckpt_fuzz.fuzz(self.tmp, 1200, seed=20261201, time_limit=5.0)
        print("\n[fuzz] %s in %.1f s" % (json.dumps({k: res[k] for k in ("cases", "outcomes", "maxTimeS",
                                                                           "maxTimeCase", "maxRssMb")}),
                                         time.perf_counter() - t0))
        self.assertEqual(res["crashes"], [])
        self.assertNotIn("timeout", res["outcomes"])
        self.assertFalse(res["marker"], "a case ran code")
        self.assertGreater(res["outcomes"].get("ok", 0), 100)
        self.assertGreater(res["outcomes"].get("error:corrupt", 0), 100)


if __name__ == "__main__":
    unittest.main()


__all__ = ["stat", "pickle"]
