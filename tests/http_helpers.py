"""A small HTTP server for tests that need a site to misbehave: answer with an error
status, or slowly, counting how many requests it is serving at once."""

from __future__ import annotations

import http.server
import threading
import time


class PageServer:
    """Serves `body` with `status` for every GET on 127.0.0.1, after `delay_s` seconds, except
    the paths in `pages`: path -> (content type, body, delay in seconds), served with 200.
    `most` is the largest number of requests it was serving at the same time. hold_until: a
    request is also held until that many have been in flight at once (at most `hold_max_s`),
    so that clients that start them at different speeds still overlap."""

    def __init__(self, body: bytes = b"<html><body><button>Go</button></body></html>", status: int = 200,
                 delay_s: float = 0.0, pages: dict[str, tuple[str, bytes, float]] | None = None,
                 hold_until: int = 0, hold_max_s: float = 10.0):
        lock, server = threading.Lock(), self
        arrived = threading.Condition(lock)
        self.now = self.most = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - stdlib name
                with arrived:
                    server.now += 1
                    server.most = max(server.most, server.now)
                    arrived.notify_all()
                kind, data, delay, code = "text/html", body, delay_s, status
                if self.path in (pages or {}):
                    (kind, data, delay), code = pages[self.path], 200
                time.sleep(delay)
                if hold_until:
                    with arrived:
                        arrived.wait_for(lambda: server.most >= hold_until, timeout=hold_max_s)
                with lock:
                    server.now -= 1
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
