"""One Python process of the polyglot acquire test: THREADS threads, each acquiring EACH times from one
limit on Redis, from START (epoch seconds) on; one line per acquire: "python <went_us> <allowed> <waited_s>"."""

import json
import sys
import threading
import time

import floodwall

policy, start, threads, each = json.loads(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
fw = floodwall.Floodwall(policy)
lines = []
lock = threading.Lock()


def caller() -> None:
    for _ in range(each):
        d = fw.acquire("partner-api", max_wait=5.0)
        went = time.time_ns() // 1000
        with lock:
            lines.append(f"python {went} {int(d.allowed)} {d.waited:.6f}")
        d.release()


while time.time() < start:
    time.sleep(0.001)
ts = [threading.Thread(target=caller) for _ in range(threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
fw.close()
print("\n".join(lines))
