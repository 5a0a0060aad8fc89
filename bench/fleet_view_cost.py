#!/usr/bin/env python3
"""bench/fleet_view_cost.py - what the fleet view's summaries cost Redis (docs/operations.md, "Cost").

Starts a throwaway redis-server, makes N idle clients of libfloodwall (ctypes, the C ABI) with the default
summary.period_s, waits, and prints INFO commandstats: the summary's commands (SET, ZADD, ZREMRANGEBYSCORE)
per second per client, and the rest of an idle client's traffic (the flags poll) beside it.

    python3 bench/fleet_view_cost.py [--lib build/libfloodwall.so] [--clients 4] [--seconds 60]
"""
import argparse
import ctypes
import json
import socket
import subprocess
import time

ap = argparse.ArgumentParser()
ap.add_argument("--lib", default="build/libfloodwall.so")
ap.add_argument("--clients", type=int, default=4)
ap.add_argument("--seconds", type=float, default=60)
args = ap.parse_args()

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
redis = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
                         stdout=subprocess.DEVNULL)
try:
    for _ in range(100):
        if subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True, text=True).stdout.strip() == "PONG":
            break
        time.sleep(0.05)
    lib = ctypes.CDLL(args.lib)
    clients = []
    for _ in range(args.clients):
        c = ctypes.c_void_p()
        assert lib.fw_client_new(ctypes.byref(c), json.dumps({"store": f"redis://127.0.0.1:{port}"}).encode()) == 0
        clients.append(c)
    t0 = time.time()
    time.sleep(args.seconds)
    elapsed = time.time() - t0
    info = subprocess.run(["redis-cli", "-p", str(port), "INFO", "commandstats"], capture_output=True, text=True).stdout
    summary = other = 0
    for line in info.splitlines():
        if not line.startswith("cmdstat_"):
            continue
        name, calls = line.split(":")[0][8:], int(line.split("calls=")[1].split(",")[0])
        print(f"{name:20} {calls}")
        if name in ("set", "zadd", "zremrangebyscore"):
            summary += calls
        elif name != "info":
            other += calls
    n = args.clients
    print(f"{n} idle clients, {elapsed:.0f} s: the summaries {summary / elapsed / n:.2f} commands/s per client, "
          f"the rest {other / elapsed / n:.2f}")
    for c in clients:
        lib.fw_client_free(c)
finally:
    redis.terminate()
    redis.wait()
