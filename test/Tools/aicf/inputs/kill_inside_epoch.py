"""Runs a command (after `--`) and kills it with SIGKILL once the checkpoint
FILE holds a save from inside an epoch (its metadata has `epoch_rows_done`),
as a machine lost mid-epoch would. Prints the epoch and step of the
checkpoint it left; exits 1 where the command ended first."""
import json
import os
import signal
import struct
import subprocess
import sys
import time

path = sys.argv[1]
command = sys.argv[sys.argv.index("--") + 1 :]


def metadata():
    try:
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            return json.loads(f.read(n)).get("__metadata__", {})
    except (OSError, ValueError, struct.error):
        return {}


p = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while p.poll() is None:
    m = metadata()
    if "epoch_rows_done" in m:
        p.send_signal(signal.SIGKILL)
        p.wait()
        m = metadata()
        print(f"killed inside epoch {m.get('epoch')} at step {m.get('step')}")
        sys.exit(0)
    time.sleep(0.01)
print("the command ended before a save inside an epoch")
sys.exit(1)
