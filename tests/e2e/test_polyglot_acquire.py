"""One limit, three languages waiting their turn (#57 item 4): a Python, a Node and a Ruby process, each with
four concurrent callers, acquire from one tenant's bucket on one real redis-server, as a fleet calling a
partner's API with a published limit would. Over the whole run: nothing refused within max_wait, the calls
that went in any window fit rate x window + burst, every caller waited its turn in order, and each acquire
cost Redis exactly one script call (INFO commandstats), never a poll."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import time

from test_polyglot_fleet import Redis

HERE = os.path.dirname(os.path.abspath(__file__))
RATE, BURST = 100, 20  # the bucket; max_wait caps at burst / rate = 0.2 s, enough for the 12 callers waiting
CALLERS, EACH = 4, 15  # per process


def commandstats(redis: Redis) -> dict:
    """The calls that ran, by command, from INFO commandstats: calls less failed_calls (an EVALSHA refused
    with NOSCRIPT, sent before another process's SCRIPT LOAD landed and then sent again, ran nothing)."""
    out = {}
    for line in redis.cli("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_"):
            name, _, rest = line[len("cmdstat_"):].partition(":")
            fields = dict(field.split("=") for field in rest.split(","))
            out[name] = int(fields["calls"]) - int(fields.get("failed_calls", 0))
    return out


def run(cmd: list) -> list:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{cmd[0]} failed: {proc.stderr[-2000:]}"
    return [line.split() for line in proc.stdout.splitlines() if line.strip()]


def test_three_languages_share_one_limit_in_turn():
    redis = Redis()
    try:
        policy = json.dumps({
            "store": f"redis://127.0.0.1:{redis.port}/0",
            "prefix": "polyacq",
            # The flags poll is a script call too: once an hour, so that every EVALSHA counted is an acquire's.
            "redis": {"deadline_ms": 3000, "connect_timeout_ms": 3000, "flags_poll_ms": 3600000},
            "request_rate": {"rate": RATE, "burst": BURST},
        })
        before = commandstats(redis)
        start = time.time() + 3.0  # every process loaded and connected by then: they start together
        args = [policy, f"{start:.3f}", str(CALLERS), str(EACH)]
        cmds = [
            [os.environ.get("FW_E2E_PYTHON", sys.executable), os.path.join(HERE, "acquire", "caller.py"), *args],
            ["node", os.path.join(HERE, "acquire", "caller.js"), *args],
            ["ruby", os.path.join(HERE, "acquire", "caller.rb"), *args],
        ]
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            outputs = list(pool.map(run, cmds))
        after = commandstats(redis)
    finally:
        redis.stop()

    rows = [row for out in outputs for row in out]
    total = 3 * CALLERS * EACH
    assert len(rows) == total, f"{len(rows)} acquires reported, {total} made"
    for lang in ("python", "node", "ruby"):
        assert sum(1 for r in rows if r[0] == lang) == CALLERS * EACH, lang
    refused = [r for r in rows if r[2] != "1"]
    assert not refused, f"refused within max_wait: {refused[:5]}"

    # The bound over every window, on the one clock of this machine (each process noted when its call went,
    # a little after its turn: 20 ms of slack for that note on a busy machine).
    went = sorted(int(r[1]) / 1e6 for r in rows)
    worst = 0.0
    for i in range(len(went)):
        for j in range(i, len(went)):
            allowed = BURST + RATE * (went[j] - went[i] + 0.02) + 1
            worst = max(worst, (j - i + 1) / allowed)
            assert j - i + 1 <= allowed, f"{j - i + 1} calls went within {went[j] - went[i]:.4f}s"
    # In turn: beyond the burst, every call waited (no caller went on the others' share), and the whole run
    # took at least the time the rate gives the calls beyond the burst.
    waited = sum(1 for r in rows if float(r[3]) > 0)
    assert waited >= total - BURST - 1, f"only {waited} of {total} waited for a turn"
    assert went[-1] - went[0] >= (total - BURST) / RATE * 0.95
    # One script call per acquire: every EVALSHA is one (the flags poll aside), each one TIME (Redis' clock,
    # read once per admit); no command ran in a loop.
    evalsha = after.get("evalsha", 0) - before.get("evalsha", 0)
    polls = after.get("hgetall", 0) - before.get("hgetall", 0)
    times = after.get("time", 0) - before.get("time", 0)
    print(f"{total} acquires across python, node and ruby in {went[-1] - went[0]:.2f}s "
          f"({total / (went[-1] - went[0]):.0f}/s against {RATE}/s + {BURST}); evalsha {evalsha}, polls {polls}, "
          f"worst window {worst:.2f} of the bound")
    assert evalsha - polls == total, f"{evalsha} EVALSHA ({polls} of them flag polls) for {total} acquires"
    assert times == total, f"{times} TIME for {total} acquires"
