"""``python -m bench.fanout N -- ARGV...``: run N copies of ARGV as children and wait for them.

SIGTERM or SIGINT is passed on to every child; exits with the worst child's exit code. Lets a
set of worker processes (the raw loop's, Procrastinate's 8 x 1) run as one process tree.
"""

from __future__ import annotations

import signal
import subprocess
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m bench.fanout N -- ARGV...", file=sys.stderr)
        return 2
    n, cmd = int(argv[0]), argv[2:]
    procs = [subprocess.Popen(cmd) for _ in range(n)]

    def forward(signum: int, frame: object) -> None:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    codes = [p.wait() for p in procs]
    return max((abs(c) for c in codes), default=0)


if __name__ == "__main__":
    sys.exit(main())
