"""Stand-in for ``python -m llama_cpp.server`` in the signal tests (standard library only).

Takes the options :meth:`LocalLLMServer.command` passes and serves ``GET /v1/models`` with the
alias. Environment:

``STUB_DIR``
    Folder where it writes ``<pid>.pid`` on start and appends to ``<pid>.events`` what it saw
    (``stubborn``, ``hanging``, ``listening``, ``sigterm-ignored``), so a test knows every server that ran and what phase
    it is in.
``STUB_MODE``
    ``ok``: serve. ``hang``: never listen (a model that takes forever to load).
    ``stubborn``: serve, and ignore SIGTERM (noting each one). ``flood``: serve while writing
    about 1 MiB to stdout and to stderr before listening and 64 KiB more on each request --
    far more than a pipe holds, so a server whose output went to an unread pipe would block.
"""

import argparse
import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

p = argparse.ArgumentParser()
for name in ("model", "model_alias", "host", "port", "n_threads", "n_threads_batch", "n_ctx"):
    p.add_argument("--" + name)
a = p.parse_args()
mode = os.environ.get("STUB_MODE", "ok")
stub_dir = os.environ["STUB_DIR"]
me = os.getpid()


def note(event):
    with open(os.path.join(stub_dir, f"{me}.events"), "a") as fh:
        fh.write(event + "\n")


if mode == "stubborn":
    signal.signal(signal.SIGTERM, lambda signum, frame: note("sigterm-ignored"))
    note("stubborn")
with open(os.path.join(stub_dir, f"{me}.pid"), "w") as fh:
    fh.write(str(me))
print("stub llama server loading", a.model, flush=True)
LINE = "llama_model_loader: - tensor 0: blk.0.attn_q.weight q4_K [1536, 1536, 1, 1]\n"


def flood(n_bytes):
    for stream in (sys.stdout, sys.stderr):
        for _ in range(n_bytes // len(LINE) + 1):
            stream.write(LINE)
        stream.flush()


if mode == "hang":
    note("hanging")
    while True:
        time.sleep(1)
if mode == "flood":
    flood(1 << 20)


class H(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if mode == "flood":
            flood(1 << 16)
        data = json.dumps({"object": "list", "data": [{"id": a.model_alias, "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = HTTPServer((a.host, int(a.port)), H)
note("listening")
server.serve_forever()
