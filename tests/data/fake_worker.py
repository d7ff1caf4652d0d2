"""A stand-in for a vLLM server's HTTP surface (no model): /health, /v1/models, /metrics.

Used by tests/lab/fleet/test_fleet.py to check the router's process mechanics (readiness, a dead
worker taken out, stop) without starting vLLM. Usage: python fake_worker.py PORT
"""

import http.server
import json
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path == "/metrics":
            body = b"vllm:request_success_total 0\n"
        elif self.path == "/v1/models":
            body = json.dumps({"data": [{"id": "fake"}]}).encode()
        elif self.path == "/health":
            body = b""
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
