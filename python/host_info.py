"""Who and where: host name, user, home, working folder, the interpreter and the OS.

Usage: python3 host_info.py

stdlib only; cheap enough to be the connection check of a host.
"""
import os
import platform
import socket

import kg_common


def main(argv):
    try:
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_name
    except Exception:
        user = os.environ.get("USER") or os.environ.get("USERNAME") or "?"
    return {
        "hostname": socket.gethostname(),
        "user": user,
        "home": os.path.expanduser("~"),
        "cwd": os.getcwd(),
        "platform": platform.platform(),
        "python": kg_common.interpreter(),
        "pid": os.getpid(),
    }


if __name__ == "__main__":
    kg_common.run(main)
