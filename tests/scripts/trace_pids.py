#!/usr/bin/python3
"""trace_pids.py FILE N: FILE is a Chrome trace (JSON) with events from N
processes (one per rank)."""
import json
import sys

events = json.load(open(sys.argv[1]))["traceEvents"]
pids = {e["pid"] for e in events}
print(f"{sys.argv[1]}: {len(events)} events from {len(pids)} ranks")
sys.exit(0 if len(pids) == int(sys.argv[2]) else 1)
