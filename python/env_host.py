"""env_snapshot: the machine (OS, CPU, memory, disks, container, VM, cgroup limits), and the small readers the
snapshot's parts share (a file's text, a short external command)."""
import os
import socket
import subprocess

import kg_common

TOOL_TIMEOUT_S = 20.0


def _msg(e):
    return "%s: %s" % (type(e).__name__, e)


def _read(path, limit=1 << 20):
    with open(path, "rb") as f:
        return f.read(limit).decode("utf-8", "replace")


def _run_tool(argv, timeout=TOOL_TIMEOUT_S):
    """(exit code, stdout, stderr) of a short external command; LC_ALL=C so its output parses the same everywhere."""
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    r = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, env=env, preexec_fn=kg_common.lift_limits)
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


# ------------------------------------------------------------------------------------------------------ host

def _os_release():
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = _read(path)
        except OSError:
            continue
        info = {}
        for line in text.splitlines():
            if "=" not in line or line.startswith("#"):
                continue
            k, v = line.split("=", 1)
            v = v.strip()
            if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
                v = v[1:-1]
            info[k.strip()] = v
        return {"id": info.get("ID"), "versionId": info.get("VERSION_ID"), "prettyName": info.get("PRETTY_NAME")}
    return None


def _cpuinfo():
    model = None
    hypervisor = False
    try:
        with open("/proc/cpuinfo", "rb") as f:
            for raw in f:
                line = raw.decode("utf-8", "replace")
                if not line.strip():
                    break  # the first processor block says it all
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model", "cpu model") and model is None:
                    model = value.strip()
                elif key in ("flags", "Features"):
                    hypervisor = "hypervisor" in value.split()
    except OSError:
        pass
    if model is None:
        import platform

        model = platform.processor() or None
    return model, hypervisor


def _meminfo():
    total = avail = None
    try:
        for line in _read("/proc/meminfo").splitlines():
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
            elif line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return total, avail


def _statvfs(path):
    st = os.statvfs(path)
    return {"totalBytes": st.f_blocks * st.f_frsize, "freeBytes": st.f_bavail * st.f_frsize}


def _cgroup_limits():
    out = {}
    for key, path in (("cpuMax", "/sys/fs/cgroup/cpu.max"), ("memoryMax", "/sys/fs/cgroup/memory.max"),
                      ("memoryLimitV1", "/sys/fs/cgroup/memory/memory.limit_in_bytes")):
        try:
            out[key] = _read(path, 4096).strip()
        except OSError:
            pass
    return out


def detect_container():
    """What systemd-detect-virt --container looks at, read directly (no tool needed, works as non-root)."""
    evidence = []
    kind = None

    def found(k, why):
        evidence.append(why)
        return kind or k

    try:
        text = _read("/run/systemd/container", 4096).strip()
        if text:
            kind = found(text, "/run/systemd/container: " + text)
    except OSError:
        pass
    if os.path.exists("/.dockerenv"):
        kind = found("docker", "/.dockerenv exists")
    if os.path.exists("/run/.containerenv"):
        kind = found("podman", "/run/.containerenv exists")
    try:
        raw = open("/proc/1/environ", "rb").read(1 << 16)
        for item in raw.split(b"\0"):
            if item.startswith(b"container="):
                v = item[len(b"container="):].decode("utf-8", "replace")
                kind = found(v, "/proc/1/environ container=" + v)
    except OSError:
        pass  # needs root on most systems
    if os.environ.get("container"):
        kind = found(os.environ["container"], "$container=" + os.environ["container"])
    try:
        cg = _read("/proc/1/cgroup", 1 << 16)
        for word, k in (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"), ("lxc", "lxc"),
                        ("containerd", "containerd")):
            if word in cg:
                kind = found(k, "/proc/1/cgroup mentions " + word)
                break
    except OSError:
        pass
    try:
        mi = _read("/proc/self/mountinfo", 1 << 20)
        if "/docker/containers/" in mi:
            kind = found("docker", "/proc/self/mountinfo has /docker/containers/")
        elif "/containers/storage/" in mi:
            kind = found("podman", "/proc/self/mountinfo has /containers/storage/")
    except OSError:
        pass
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        kind = found("kubernetes", "$KUBERNETES_SERVICE_HOST is set")
    if os.path.isdir("/proc/vz") and not os.path.isdir("/proc/bc"):
        kind = found("openvz", "/proc/vz without /proc/bc")
    try:
        if "microsoft" in _read("/proc/sys/kernel/osrelease", 4096).lower():
            kind = found("wsl", "kernel osrelease mentions Microsoft")
    except OSError:
        pass
    return {"detected": kind is not None, "kind": kind, "evidence": evidence}


_DMI_VM = (("kvm", "kvm"), ("qemu", "qemu"), ("vmware", "vmware"), ("virtualbox", "oracle"), ("innotek", "oracle"),
           ("xen", "xen"), ("amazon ec2", "amazon"), ("google", "google"), ("microsoft corporation", "microsoft"),
           ("openstack", "openstack"), ("bochs", "bochs"), ("parallels", "parallels"), ("firecracker", "firecracker"))


def detect_vm(hypervisor_flag):
    evidence = []
    kind = None
    for f in ("sys_vendor", "product_name", "board_vendor", "bios_vendor"):
        try:
            v = _read("/sys/class/dmi/id/" + f, 4096).strip()
        except OSError:
            continue
        low = v.lower()
        for word, k in _DMI_VM:
            if word in low:
                evidence.append("dmi %s: %s" % (f, v))
                kind = kind or k
                break
    if hypervisor_flag:
        evidence.append("cpu flag hypervisor")
        kind = kind or "vm"
    return {"detected": kind is not None, "kind": kind, "evidence": evidence}


def collect_host(roots):
    model, hyper = _cpuinfo()
    total, avail = _meminfo()
    uname = os.uname()
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    try:
        shm = _statvfs("/dev/shm")  # type: dict
        shm["path"] = "/dev/shm"
    except OSError as e:
        shm = {"path": "/dev/shm", "error": _msg(e)}
    disks = []
    for root in roots:
        d = {"path": root, "exists": os.path.isdir(root)}
        try:
            d.update(_statvfs(root))
        except OSError as e:
            d["error"] = _msg(e)
        disks.append(d)
    try:
        load = list(os.getloadavg())
    except (AttributeError, OSError):
        load = None
    try:
        uptime = float(_read("/proc/uptime", 256).split()[0])
    except (OSError, ValueError, IndexError):
        uptime = None
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        libc = None
    return {
        "hostname": socket.gethostname(),
        "os": _os_release(),
        "kernel": uname.release,
        "kernelVersion": uname.version,
        "machine": uname.machine,
        "libc": libc,
        "cpu": {"model": model, "count": os.cpu_count(), "affinity": affinity},
        "memory": {"totalBytes": total, "availableBytes": avail},
        "shm": shm,
        "disks": disks,
        "cgroup": _cgroup_limits(),
        "container": detect_container(),
        "virtualization": detect_vm(hyper),
        "load": load,
        "uptimeS": uptime,
    }
