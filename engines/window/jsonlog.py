"""JSON-lines logging to stderr: one object per line, e.g.
{"time":"2025-03-03T09:00:00.123Z","level":"info","engine":"window","msg":"registered","endpoint":"127.0.0.1:40123"}

Level from WINDOW_LOG_LEVEL or CONTEXTD_LOG_LEVEL (debug | info | warn | error; default info).
"""

import json
import os
import sys
import threading
import time

LEVELS = {"debug": 10, "info": 20, "warn": 30, "warning": 30, "error": 40, "fatal": 50}


class JsonLogger:
    def __init__(self, engine="window", level=None, stream=None, **fields):
        name = (level or os.environ.get("WINDOW_LOG_LEVEL") or os.environ.get("CONTEXTD_LOG_LEVEL") or "info").strip().lower()
        self.threshold = LEVELS.get(name, LEVELS["info"])
        self.stream = stream or sys.stderr
        self.fields = dict(fields, engine=engine)
        self._lock = threading.Lock()

    def child(self, **fields):
        c = JsonLogger.__new__(JsonLogger)
        c.threshold = self.threshold
        c.stream = self.stream
        c.fields = dict(self.fields, **fields)
        c._lock = self._lock
        return c

    def enabled(self, level):
        return LEVELS[level] >= self.threshold

    def log(self, level, msg, **fields):
        if not self.enabled(level):
            return
        now = time.time()
        record = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + ".%03dZ" % int((now % 1) * 1000),
            "level": level,
        }
        record.update(self.fields)
        record["msg"] = msg
        record.update(fields)
        line = json.dumps(record, separators=(",", ":"), default=str)
        with self._lock:
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass  # stderr closed: nothing sensible left to do

    def debug(self, msg, **fields):
        self.log("debug", msg, **fields)

    def info(self, msg, **fields):
        self.log("info", msg, **fields)

    def warn(self, msg, **fields):
        self.log("warn", msg, **fields)

    def error(self, msg, **fields):
        self.log("error", msg, **fields)
