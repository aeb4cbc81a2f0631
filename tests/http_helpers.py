"""A one-page HTTP server for tests that need a site to misbehave: answer with an error
status, or slowly, counting how many requests it is serving at once."""

from __future__ import annotations

import http.server
import threading
import time


class PageServer:
    """Serves `body` with `status` for every GET on 127.0.0.1, after `delay_s` seconds.
    `most` is the largest number of requests it was serving at the same time."""

    def __init__(self, body: bytes = b"<html><body><button>Go</button></body></html>", status: int = 200,
                 delay_s: float = 0.0):
        lock, server = threading.Lock(), self
        self.now = self.most = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - stdlib name
                with lock:
                    server.now += 1
                    server.most = max(server.most, server.now)
                time.sleep(delay_s)
                with lock:
                    server.now -= 1
                self.send_response(status)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
