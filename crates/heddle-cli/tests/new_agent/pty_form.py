"""Drives a program through a pseudo-terminal, as a person at a terminal would.

Usage: pty_form.py SCRIPT.json PROGRAM [ARGS...]
SCRIPT.json is a list of [expected, answer] pairs: wait until the program's
output (since the last answer) contains `expected`, then type `answer` and
Enter. After the last pair, wait for the program to exit. The whole
transcript goes to stdout; the exit status is the program's (3 when an
expected text did not appear within 30 s, 4 when it did not exit within
60 s of the last answer; either way the program is killed and reaped).
"""

import json
import os
import pty
import select
import sys
import time


def main() -> int:
    script = json.load(open(sys.argv[1]))
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(sys.argv[2], sys.argv[2:])
    transcript = b''
    seen = 0

    def read_some(deadline: float) -> bool:
        nonlocal transcript
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.time()))
        if not ready:
            return False
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return False
        if not chunk:
            return False
        transcript += chunk
        return True

    for expected, answer in script:
        deadline = time.time() + 30
        want = expected.encode()
        while want not in transcript[seen:]:
            if time.time() > deadline or not read_some(deadline):
                sys.stdout.write(transcript.decode(errors='replace'))
                sys.stdout.write(f'\n[pty_form: never saw {expected!r}]\n')
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                return 3
        seen = transcript.index(want, seen) + len(want)
        os.write(fd, answer.encode() + b'\n')
    deadline = time.time() + 60
    while time.time() < deadline and read_some(deadline):
        pass
    # Output ended (or the deadline passed): give the program until the
    # deadline to exit, then kill it, so neither this script nor the
    # program outlives the test.
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.time() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            sys.stdout.write(transcript.decode(errors='replace'))
            sys.stdout.write('\n[pty_form: the program did not exit within 60 s]\n')
            return 4
        time.sleep(0.05)
    sys.stdout.write(transcript.decode(errors='replace'))
    return os.waitstatus_to_exitcode(status)


if __name__ == '__main__':
    sys.exit(main())
