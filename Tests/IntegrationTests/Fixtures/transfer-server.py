#!/usr/bin/python3
"""An HTTP/1.1 server for the download/upload integration tests and benchmark.

Listens on 127.0.0.1 on an ephemeral port and writes that port (decimal, then
a newline) to --port-file, atomically, once it is listening. Exits cleanly on
SIGTERM or SIGINT. Standard library only.

Content is virtual and never held whole in memory: the byte at offset i of
every blob is BLOCK[i % 65536], where BLOCK[j] = (j * 131 + 7) & 0xFF.

GET|HEAD /blob/<size>[?query]
    <size> bytes (decimal, optional suffix K, M or G for KiB, MiB, GiB).
    Headers: Content-Length, ETag "blob-<bytes>-v1" (strong), a fixed
    Last-Modified, Accept-Ranges: bytes, Content-Type application/octet-stream.
    Range "bytes=N-", "bytes=N-M" or "bytes=-N" gives 206 with Content-Range;
    a first byte at or past the end gives 416 with "Content-Range: bytes */size";
    a malformed or multi-part Range is ignored (200). If-Range that does not
    match the ETag (strong comparison) or the Last-Modified date makes the
    Range ignored (200, full body). Query parameters, combinable:
      norange=1  ignore Range and If-Range, no Accept-Ranges header
      etag=X     the ETag is "X" instead (simulates the content changing)
      newetag=X  a Range is answered (206) whatever If-Range says, with ETag
                 "X": a file that changed between attempts, on a server that
                 ignores If-Range
      fail=K     the first K requests for this URL (path and query, any method)
                 answer 503 with Retry-After: 1 (or retry_after=S seconds, or
                 retry_at=S: the date S seconds from now) and a short body
      drop=N     the first GET for this URL that sends a body (after any fail=
                 answers) writes only the first N bytes of it, then shuts the
                 socket down; later requests are served in full
      cut=N      every GET for this URL that sends a body writes only the
                 first N bytes of it, then shuts the socket down (a server
                 that sends a part per request)
      rate=R     throttle the body to R bytes a second
      partial=S-E  the first GET for this URL answers 206 with bytes S-E
                 (Content-Range "bytes S-E/<size>"), whatever range it asked
                 for, or none
      span=N     the first 206 answer for this URL holds only N bytes from
                 the start of its range (Content-Range and Content-Length say so)
      total=T    the first 206 answer for this URL claims a total of T bytes
                 (digits, or * for unknown) in its Content-Range
      end=E      the first 206 answer for this URL claims its range ends at
                 byte E (any digits, however large) in its Content-Range
      body=N     the first 206 answer for this URL sends no Content-Length and
                 N bytes of the blob from the start of its range, fewer or more
                 than the range holds, then closes the connection: a body
                 delimited by the close, which looks whole
      bare206=1  206 answers carry neither ETag nor Last-Modified (the
                 validator only on full answers, against RFC 7233)
      status=C   always answer status C (200..599) with a short text body
                 (none for 204 and 304); with claim=N, a 204 or 304 also
                 carries Content-Length: N, which it must not

PUT|POST /upload/<name>[?fail=K&status=C&early=S&rate=R&noread=S]
    Reads the body (Content-Length or chunked; Expect: 100-continue is
    honoured), answers 201 {"bytes": n, "sha256": hex of the body}, and keeps
    that as the last upload of <name>. fail= and status= work as for /blob
    (the body is then discarded, or the connection closed if the client is
    still waiting for 100 Continue). With early=S it answers 201 before
    reading any of the body, waits S seconds, then reads what still comes
    until the client stops: the last upload of <name> is then {"bytes": n,
    "values": the distinct byte values read, sorted}, kept up to date. With
    rate=R it reads the body at R bytes a second. With noread=S it reads
    none of the body and answers nothing for S seconds, then closes.

GET|PUT|POST /redirect[?to=URL][&code=N]
    N (302 by default; 301, 303, 307, 308) to URL (by default to itself: a
    redirect loop); a request body is read and dropped.

GET /uploads/<name>
    The last upload of <name> as that same JSON, or 404.

GET /stats
    {"requests": n, "bytes_sent": b, "bytes_received": r, "per_path":
     {"<path?query>": {"requests": n, "bytes_sent": b, "bytes_received": r,
                       "ranges": [Range header of each request, or null],
                       "authorizations": [Authorization header of each, or null],
                       "api_keys": [X-Api-Key header of each, or null]}}}
    bytes_sent counts blob content bytes the kernel accepted (exact for
    dropped and aborted transfers too); short status/error/JSON bodies are not
    counted. bytes_received counts upload body bytes. /stats and /stats/reset
    themselves are not counted.

GET|POST /stats/reset
    Zeroes the counters AND forgets the per-URL fail=/drop=/partial=/span=/
    total=/body= state and the recorded uploads, so a test starts from a clean
    server.
"""
import argparse
import hashlib
import json
import os
import re
import signal
import socket
import socketserver
import sys
import threading
import time
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

BLOCK_SIZE = 65536
BLOCK = bytes((i * 131 + 7) & 0xFF for i in range(BLOCK_SIZE))
WRITE_SIZE = 1 << 20
# 1 MiB + 64 KiB, so a write of up to 1 MiB can start at any offset within a block.
PATTERN = memoryview(BLOCK * (WRITE_SIZE // BLOCK_SIZE + 1))
LAST_MODIFIED = 'Mon, 01 Jan 2024 00:00:00 GMT'
SUFFIXES = {'': 1, 'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}
UNSATISFIABLE = 'unsatisfiable'
DIGITS = re.compile(r'[0-9]+')


class BadRequest(Exception):
    pass


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.requests = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.per_path = {}
        # (URL, parameter) of the one-shot misbehaviours done already.
        self.done_once = set()
        self.uploads = {}

    def record(self, url, range_value, authorization=None, api_key=None):
        """Counts a request; returns its ordinal for this URL (1 for the first)."""
        with self.lock:
            self.requests += 1
            entry = self.per_path.get(url)
            if entry is None:
                entry = self.per_path[url] = {'requests': 0, 'bytes_sent': 0, 'bytes_received': 0, 'ranges': [],
                                              'authorizations': [], 'api_keys': []}
            entry['requests'] += 1
            entry['ranges'].append(range_value)
            entry['authorizations'].append(authorization)
            entry['api_keys'].append(api_key)
            return entry['requests']

    def take_once(self, url, name):
        """True the first time for this URL and parameter only."""
        with self.lock:
            if (url, name) in self.done_once:
                return False
            self.done_once.add((url, name))
            return True

    def add(self, url, sent=0, received=0):
        with self.lock:
            self.bytes_sent += sent
            self.bytes_received += received
            entry = self.per_path.get(url)
            if entry is not None:
                entry['bytes_sent'] += sent
                entry['bytes_received'] += received

    def snapshot(self):
        with self.lock:
            return {'requests': self.requests, 'bytes_sent': self.bytes_sent, 'bytes_received': self.bytes_received,
                    'per_path': {url: dict(entry, ranges=list(entry['ranges']), authorizations=list(entry['authorizations']),
                                       api_keys=list(entry['api_keys']))
                                 for url, entry in self.per_path.items()}}


STATE = State()


def parse_size(text):
    match = re.fullmatch(r'([0-9]+)([KMG]?)', text)
    if not match:
        return None
    return int(match.group(1)) * SUFFIXES[match.group(2)]


def parse_range(value, size):
    """(first, last) inclusive, UNSATISFIABLE, or None to ignore the header."""
    unit, eq, spec = value.partition('=')
    if not eq or unit.strip().lower() != 'bytes' or ',' in spec:
        return None
    first, dash, last = spec.strip().partition('-')
    first, last = first.strip(), last.strip()
    if not dash:
        return None
    if first == '':
        if not DIGITS.fullmatch(last):
            return None
        suffix = int(last)
        if suffix == 0 or size == 0:
            return UNSATISFIABLE
        return max(0, size - suffix), size - 1
    if not DIGITS.fullmatch(first) or (last and not DIGITS.fullmatch(last)):
        return None
    start = int(first)
    end = int(last) if last else size - 1
    if last and end < start:
        return None
    if start >= size:
        return UNSATISFIABLE
    return start, min(end, size - 1)


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    server_version = 'transfer-server/1'
    verbose = False

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format, *args):
        if self.verbose:
            super().log_message(format, *args)

    def parse_request(self):
        self.expect_pending = False
        return super().parse_request()

    def handle_expect_100(self):
        # Answer 100 Continue only once the body is really wanted.
        self.expect_pending = True
        return True

    def handle_one_request(self):
        try:
            super().handle_one_request()
        except (ConnectionError, TimeoutError, EOFError):
            self.close_connection = True

    def do_GET(self):
        self.route()

    do_HEAD = do_PUT = do_POST = do_GET

    # Helpers

    def query_int(self, query, name, low=0, high=None):
        if name not in query:
            return None
        value = query[name]
        if not DIGITS.fullmatch(value) or int(value) < low or (high is not None and int(value) > high):
            raise BadRequest(f'bad {name}={value}')
        return int(value)

    def query_span(self, query, name, size):
        """(first, last) inclusive from "S-E" within a blob of size bytes, or None."""
        if name not in query:
            return None
        first, dash, last = query[name].partition('-')
        if not dash or not DIGITS.fullmatch(first) or not DIGITS.fullmatch(last) or not int(first) <= int(last) < size:
            raise BadRequest(f'bad {name}={query[name]}')
        return int(first), int(last)

    def body_chunks(self):
        """Yields the request body; raises EOFError if the client goes away, BadRequest if it is malformed."""
        if 'chunked' in self.headers.get('Transfer-Encoding', '').lower():
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise EOFError
                size_text = line.split(b';', 1)[0].strip()
                if not re.fullmatch(rb'[0-9A-Fa-f]+', size_text):
                    raise BadRequest('bad chunk size')
                size = int(size_text, 16)
                if size == 0:
                    break
                yield from self.read_exactly(size)
                if self.rfile.readline(65537) not in (b'\r\n', b'\n'):
                    raise BadRequest('bad chunk end')
            while True:  # trailers
                line = self.rfile.readline(65537)
                if not line:
                    raise EOFError
                if line in (b'\r\n', b'\n'):
                    return
        length = self.headers.get('Content-Length')
        if length is None:
            return
        if not DIGITS.fullmatch(length.strip()):
            raise BadRequest('bad Content-Length')
        yield from self.read_exactly(int(length))

    def read_exactly(self, remaining):
        while remaining:
            data = self.rfile.read(min(remaining, WRITE_SIZE))
            if not data:
                raise EOFError
            remaining -= len(data)
            yield data

    def has_body(self):
        return 'Transfer-Encoding' in self.headers or self.headers.get('Content-Length', '0').strip() != '0'

    def discard_body(self):
        """Gets a body not wanted out of the way, or marks the connection to close if the client awaits 100."""
        if not self.has_body():
            return
        if self.expect_pending:
            self.close_connection = True
            return
        for _ in self.body_chunks():
            pass

    def end_response_headers(self):
        if self.close_connection:
            self.send_header('Connection', 'close')
        self.end_headers()

    def reply(self, code, body, content_type='text/plain; charset=utf-8', headers=()):
        if isinstance(body, str):
            body = body.encode()
        with_body = code >= 200 and code not in (204, 304)
        self.send_response(code)
        if with_body:
            self.send_header('Content-Type', content_type)
            self.send_header('Content-Length', str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_response_headers()
        if with_body and self.command != 'HEAD':
            self.wfile.write(body)

    def reply_json(self, code, obj):
        self.reply(code, json.dumps(obj, indent=1) + '\n', 'application/json')

    # Routes

    def route(self):
        try:
            parts = urlsplit(self.path)
            path, method = parts.path, self.command
            query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
            if path == '/stats' and method in ('GET', 'HEAD'):
                self.discard_body()
                return self.reply_json(200, STATE.snapshot())
            if path == '/stats/reset' and method in ('GET', 'POST'):
                self.discard_body()
                with STATE.lock:
                    STATE.reset()
                return self.reply_json(200, {'reset': True})
            ordinal = STATE.record(self.path, self.headers.get('Range'), self.headers.get('Authorization'),
                                   self.headers.get('X-Api-Key'))
            if path.startswith('/upload/') and method in ('PUT', 'POST'):
                return self.upload(unquote(path[len('/upload/'):]), query, ordinal)
            self.discard_body()
            if path.startswith('/blob/') and method in ('GET', 'HEAD'):
                return self.blob(path[len('/blob/'):], query, ordinal)
            if path == '/redirect':
                code = self.query_int(query, 'code', 301, 308) or 302
                return self.reply(code, 'see elsewhere\n', headers=[('Location', query.get('to', '/redirect'))])
            if path.startswith('/uploads/') and method in ('GET', 'HEAD'):
                with STATE.lock:
                    info = STATE.uploads.get(unquote(path[len('/uploads/'):]))
                if info is None:
                    return self.reply(404, 'no such upload\n')
                return self.reply_json(200, info)
            return self.reply(404, 'not found\n')
        except BadRequest as error:
            self.close_connection = True
            self.reply(400, f'{error}\n')

    def blob(self, size_text, query, ordinal):
        size = parse_size(size_text)
        if size is None:
            return self.reply(404, 'bad blob size\n')
        status = self.query_int(query, 'status', 200, 599)
        fail = self.query_int(query, 'fail')
        drop = self.query_int(query, 'drop')
        cut = self.query_int(query, 'cut', 1)
        rate = self.query_int(query, 'rate', 1)
        norange = query.get('norange', '0') != '0'
        partial = self.query_span(query, 'partial', size)
        span_bytes = self.query_int(query, 'span', 1)
        claimed_total = query.get('total')
        claimed_end = query.get('end')
        if claimed_end is not None and not DIGITS.fullmatch(claimed_end):
            raise BadRequest(f'bad end={claimed_end}')
        if claimed_total is not None and claimed_total != '*' and not DIGITS.fullmatch(claimed_total):
            raise BadRequest(f'bad total={claimed_total}')
        body = self.query_int(query, 'body')
        if status is not None:
            claim = self.query_int(query, 'claim')
            wrong = [('Content-Length', str(claim))] if claim is not None and status in (204, 304) else []
            return self.reply(status, f'status {status}\n', headers=wrong)
        if fail and ordinal <= fail:
            retry_after = str(self.query_int(query, 'retry_after') if 'retry_after' in query else 1)
            if 'retry_at' in query:
                retry_after = formatdate(time.time() + self.query_int(query, 'retry_at'), usegmt=True)
            return self.reply(503, f'failing request {ordinal} of {fail}\n', headers=[('Retry-After', retry_after)])
        etag = '"%s"' % query.get('etag', f'blob-{size}-v1')
        start, length, code = 0, size, 200
        headers = [('ETag', etag), ('Last-Modified', LAST_MODIFIED)]
        if not norange:
            headers.append(('Accept-Ranges', 'bytes'))
            range_value = self.headers.get('Range')
            newetag = query.get('newetag')
            if range_value is not None and newetag is not None:
                headers = [('ETag', '"%s"' % newetag), ('Last-Modified', LAST_MODIFIED), ('Accept-Ranges', 'bytes')]
            if range_value is not None and (newetag is not None or self.if_range_matches(etag)):
                span = parse_range(range_value, size)
                if span == UNSATISFIABLE:
                    return self.reply(416, 'range not satisfiable\n',
                                      headers=headers + [('Content-Range', f'bytes */{size}')])
                if span is not None:
                    start, end = span
                    length, code = end - start + 1, 206
                    headers.append(('Content-Range', f'bytes {start}-{end}/{size}'))
        if partial is not None and self.command == 'GET' and STATE.take_once(self.path, 'partial'):
            # A range nobody asked for.
            headers = [header for header in headers if header[0] != 'Content-Range']
            start, end = partial
            length, code = end - start + 1, 206
            headers.append(('Content-Range', f'bytes {start}-{end}/{size}'))
        if code == 206 and query.get('bare206', '0') != '0':
            headers = [header for header in headers if header[0] not in ('ETag', 'Last-Modified')]
        close_after = False
        if (code == 206 and self.command == 'GET' and (span_bytes or claimed_total or claimed_end or body is not None)
                and STATE.take_once(self.path, 'lie')):
            if span_bytes:
                length = min(length, span_bytes)
            headers = [header for header in headers if header[0] != 'Content-Range']
            headers.append(('Content-Range', f'bytes {start}-{claimed_end or start + length - 1}/{claimed_total or size}'))
            if body is not None:
                length, close_after = body, True
        self.send_response(code)
        self.send_header('Content-Type', 'application/octet-stream')
        if close_after:
            # No length: the body ends where the connection does.
            self.close_connection = True
        else:
            self.send_header('Content-Length', str(length))
        for name, value in headers:
            self.send_header(name, value)
        self.end_response_headers()
        if self.command == 'HEAD' or length == 0:
            return
        if close_after:
            try:
                self.send_pattern(start, length, rate)
            finally:
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            return
        cut_at = drop if drop is not None and STATE.take_once(self.path, 'drop') else cut
        if cut_at is not None:
            try:
                self.send_pattern(start, min(cut_at, length), rate)
            finally:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            return
        self.send_pattern(start, length, rate)

    def if_range_matches(self, etag):
        value = self.headers.get('If-Range')
        if value is None:
            return True
        value = value.strip()
        if value.startswith('"') or value.startswith('W/'):
            return value == etag
        try:
            return parsedate_to_datetime(value) == parsedate_to_datetime(LAST_MODIFIED)
        except (TypeError, ValueError, IndexError):
            return False

    def send_pattern(self, start, length, rate=None):
        sock, url = self.connection, self.path
        chunk = WRITE_SIZE if not rate else max(1, min(BLOCK_SIZE, rate // 10))
        began = time.monotonic()
        sent = 0
        while sent < length:
            offset = (start + sent) % BLOCK_SIZE
            view = PATTERN[offset:offset + min(chunk, length - sent)]
            while view:
                written = sock.send(view)
                view = view[written:]
                sent += written
                STATE.add(url, sent=written)
            if rate:
                delay = began + sent / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        return sent

    def upload(self, name, query, ordinal):
        status = self.query_int(query, 'status', 200, 599)
        fail = self.query_int(query, 'fail')
        if status is not None or (fail and ordinal <= fail):
            self.discard_body()
            if status is not None:
                return self.reply(status, f'status {status}\n')
            return self.reply(503, f'failing request {ordinal} of {fail}\n', headers=[('Retry-After', '1')])
        noread = self.query_int(query, 'noread')
        if noread is not None:
            time.sleep(noread)
            self.close_connection = True
            return
        early = self.query_int(query, 'early')
        if early is not None:
            info = {'bytes': 0, 'values': []}
            with STATE.lock:
                STATE.uploads[name] = info
            self.reply_json(201, {'early': True})
            time.sleep(early)
            seen = set()
            try:
                for data in self.body_chunks():
                    seen.update(data)
                    STATE.add(self.path, received=len(data))
                    with STATE.lock:
                        info['bytes'] += len(data)
                        info['values'] = sorted(seen)
            except (EOFError, ConnectionError, BadRequest):
                pass
            self.close_connection = True
            return
        if self.expect_pending:
            self.expect_pending = False
            self.send_response_only(100)
            self.end_headers()
        rate = self.query_int(query, 'rate', 1)
        digest, count = hashlib.sha256(), 0
        for data in self.body_chunks():
            digest.update(data)
            count += len(data)
            STATE.add(self.path, received=len(data))
            if rate:
                time.sleep(len(data) / rate)
        info = {'bytes': count, 'sha256': digest.hexdigest()}
        with STATE.lock:
            STATE.uploads[name] = info
        self.reply_json(201, info)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def server_bind(self):
        # Skips HTTPServer's getfqdn(), a reverse lookup that can stall.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError, EOFError)):
            return
        super().handle_error(request, client_address)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--port-file', required=True, help='where to write the listening port')
    parser.add_argument('--verbose', action='store_true', help='log each request to stderr')
    args = parser.parse_args()
    Handler.verbose = args.verbose

    server = Server(('127.0.0.1', 0), Handler)
    stopping = threading.Event()

    def stop(signum, frame):
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    temporary = f'{args.port_file}.tmp{os.getpid()}'
    with open(temporary, 'w') as f:
        f.write(f'{server.server_address[1]}\n')
    os.replace(temporary, args.port_file)

    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
