"""Does torch import here, how long does it take, and does it see the GPUs?

    torch_check.py

Imports torch in this interpreter (seconds on a cold cache: that time is part of the answer), then reports its
version, CUDA/HIP build, whether CUDA is available, the devices and triton.  A failing import is a result, not an
error: ``imported`` is false and ``error`` says why.  Progress goes to stderr.
"""
import sys
import time

import kg_common

# torch maps gigabytes of address space and a benchmark runs for minutes: no memory or CPU cap here.
KG_LIMITS = {"memory": None, "cpu": None}


def main(argv):
    sys.stderr.write("importing torch with %s ...\n" % sys.executable)
    sys.stderr.flush()
    t0 = time.time()
    result = {
        "imported": False, "importSeconds": None, "error": None, "version": None, "location": None, "cuda": None,
        "hip": None, "cudaAvailable": None, "deviceCount": 0, "devices": [], "triton": None, "cudnn": None,
    }
    try:
        import torch  # pyright: ignore[reportMissingImports] (on the GPU box only)
    except BaseException as e:  # noqa: BLE001 - ImportError, OSError from a broken .so, anything: report it
        result["importSeconds"] = round(time.time() - t0, 3)
        result["error"] = "%s: %s" % (type(e).__name__, e)
        sys.stderr.write("import torch failed after %.2f s: %s\n" % (result["importSeconds"], result["error"]))
        return result
    result["imported"] = True
    result["importSeconds"] = round(time.time() - t0, 3)
    result["version"] = torch.__version__
    result["location"] = getattr(torch, "__file__", None)
    result["cuda"] = getattr(torch.version, "cuda", None)
    result["hip"] = getattr(torch.version, "hip", None)
    sys.stderr.write("torch %s imported in %.2f s (cuda build: %s)\n" % (
        torch.__version__, result["importSeconds"], result["cuda"] or result["hip"] or "none"))
    try:
        result["cudaAvailable"] = bool(torch.cuda.is_available())
        if result["cudaAvailable"]:
            result["deviceCount"] = torch.cuda.device_count()
            for i in range(result["deviceCount"]):
                cap = torch.cuda.get_device_capability(i)
                name = torch.cuda.get_device_name(i)
                result["devices"].append({"index": i, "name": name, "capability": "%d.%d" % cap})
        result["cudnn"] = torch.backends.cudnn.version() if result["cudaAvailable"] else None
    except Exception as e:  # noqa: BLE001 - a broken driver is an answer too
        result["error"] = "cuda: %s: %s" % (type(e).__name__, e)
    sys.stderr.write("cuda available: %s, %d device(s)\n" % (result["cudaAvailable"], result["deviceCount"]))
    for d in result["devices"]:
        sys.stderr.write("  cuda:%d  %s (sm %s)\n" % (d["index"], d["name"], d["capability"]))
    try:
        import triton  # pyright: ignore[reportMissingImports] (on the GPU box only)

        result["triton"] = getattr(triton, "__version__", None)
    except Exception:  # noqa: BLE001 - optional
        pass
    return result


if __name__ == "__main__":
    kg_common.run(main)
