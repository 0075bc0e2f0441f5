"""bench's HTTP/1.1 client (bench.models._http): every way a server may frame a reply is read whole, a connection is
kept alive only while it is in step, and a reply not read whole (timeout, cancel, drop) closes its connection.

Through the seam against the loopback fake provider (its ``wire`` knob), and byte by byte against loopback
servers scripted here, for what no well-behaved server sends on demand (interim replies, a reply split at every
byte, a close mid-reply, garbage).
"""

import asyncio
import contextlib
import datetime
import gzip
import os
import socket
import struct
import subprocess
import sys
import textwrap
import threading

import pytest

from bench.core.errors import ProviderError
from bench.core.secrets import redact
from bench.models._http import ConnectFailed, Dropped, Endpoint
from bench.models.client import LLM, Limits
from bench.models.routing import ModelSpec

FAST = dict(backoff_s=0.01, backoff_max_s=0.05, timeout_s=10)


@pytest.mark.parametrize("wire", ["plain", "chunked", "gzip", "close"])
def test_every_framing_of_a_reply_is_read_whole_through_the_seam(fake, wire, run):
    """Chunked, compressed (though identity was asked) and closing replies give what a plain one gives."""
    fake.configure(wire=wire, over_limit_tokens=3000)  # 3,000 words: a reply of many TCP segments
    llm = LLM(Limits(max_concurrency=8, retries=0, **FAST))
    spec = ModelSpec("openai/fake-model", api_base=fake.url, params={"max_tokens": 16})

    async def go():
        try:
            return await asyncio.gather(*(llm.complete(spec, [{"role": "user", "content": f"q {i}"}])
                                          for i in range(24)))
        finally:
            await llm.aclose()

    out = run(go())
    assert all(len(c.text.split()) == 3000 for c in out)
    assert all(c.usage.completion_tokens == 3000 and c.usage.attempts == 1 for c in out)
    assert fake.stats()["requests"] == 24


def test_a_429_framed_in_chunks_is_retried_after_its_retry_after(fake, run):
    fake.configure(wire="chunked", fail_first=1, fail_status=429, retry_after_s=0.2)
    llm = LLM(Limits(max_concurrency=2, retries=2, **FAST))
    spec = ModelSpec("openai/fake-model", api_base=fake.url, params={"max_tokens": 16})

    async def go():
        try:
            t0 = asyncio.get_running_loop().time()
            comp = await llm.complete(spec, [{"role": "user", "content": "hello"}])
            return comp, asyncio.get_running_loop().time() - t0
        finally:
            await llm.aclose()

    comp, took = run(go())
    assert comp.text and comp.usage.attempts == 2
    assert took >= 0.2  # the header was read from the chunked error reply


# -- byte by byte, against servers scripted here -------------------------------------------------------------------
BODY = b'{"ok": true}'


def reply(body=BODY, head=b"HTTP/1.1 200 OK", extra=b""):
    return head + b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n" % (len(body), extra) + body


class Script:
    """A loopback server answering each request it reads with the next of ``replies`` (bytes, or a callable
    taking the reader and writer); counts its connections and sees each one's end."""

    def __init__(self, replies, byte_by_byte=False, close_when_done=False):
        self.replies = list(replies)
        self.byte_by_byte = byte_by_byte
        self.close_when_done = close_when_done
        self.connections = 0
        self.heads = []  # every request's head, as read
        self.ended = asyncio.Event()
        self.server = None

    async def __aenter__(self):
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1/chat/completions"

    async def serve(self, reader, writer):
        self.connections += 1
        try:
            while self.replies:
                head = await reader.readuntil(b"\r\n\r\n")
                self.heads.append(head)
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                await reader.readexactly(length)
                answer = self.replies.pop(0)
                if callable(answer):
                    await answer(reader, writer)
                    continue
                for i in range(len(answer)) if self.byte_by_byte else (None,):
                    writer.write(answer if i is None else answer[i:i + 1])
                    await writer.drain()
                    if i is not None:
                        await asyncio.sleep(0)  # a turn of the loop: the client reads this byte alone
            if not self.close_when_done:
                await reader.read()  # until the client closes
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.ended.set()
            writer.close()


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request):
    """Run a coroutine to its end on a new event loop of each kind bench runs on (uvloop: the ``perf`` extra)."""
    factory = asyncio.new_event_loop
    if request.param == "uvloop":
        factory = pytest.importorskip("uvloop").new_event_loop

    def run_on_loop(coro):
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(asyncio.wait_for(coro, 60))
    return run_on_loop


def test_a_reply_split_at_every_byte_after_an_interim_reply_and_in_chunks_with_trailers_is_read_whole(run):
    chunked = (b"HTTP/1.1 100 Continue\r\n\r\n"
               b"HTTP/1.1 200 OK\r\nTRANSFER-encoding: Chunked\r\n\r\n"
               b"5;ext=1\r\n" + BODY[:5] + b"\r\n" + b"%x\r\n" % (len(BODY) - 5) + BODY[5:] + b"\r\n"
               b"0\r\nX-Trailer: yes\r\n\r\n")

    async def go():
        async with Script([chunked, reply()], byte_by_byte=True) as srv:
            ep = Endpoint(srv.url, {})
            first = await ep.post(b"{}", 10)
            second = await ep.post(b"{}", 10)  # the same connection: the chunked reply left it in step
            ep.close()
            return first, second, srv.connections

    first, second, connections = run(go())
    assert first == (200, None, BODY) and second == (200, None, BODY)
    assert connections == 1


def test_connections_are_kept_alive_and_reused_one_request_at_a_time(run):
    async def go():
        async with Script([reply()] * 6) as srv:
            ep = Endpoint(srv.url, {"Authorization": "Bearer k"})
            out = [await ep.post(b'{"n": %d}' % i, 10) for i in range(6)]
            ep.close()
            return out, srv.connections

    out, connections = run(go())
    assert out == [(200, None, BODY)] * 6
    assert connections == 1


@pytest.mark.parametrize("head, extra", [
    (b"HTTP/1.1 200 OK", b"Connection: close\r\n"),  # the server says so
    (b"HTTP/1.0 200 OK", b""),                       # an HTTP/1.0 server keeps nothing alive
])
def test_a_connection_the_server_does_not_keep_is_not_reused(head, extra, run):
    async def go():
        async with Script([reply(head=head, extra=extra)]) as srv:
            ep = Endpoint(srv.url, {})
            first = await ep.post(b"{}", 10)
            await asyncio.wait_for(srv.ended.wait(), 10)  # the client closed it
            srv.replies.append(reply())
            second = await ep.post(b"{}", 10)
            ep.close()
            return first, second, srv.connections

    first, second, connections = run(go())
    assert first == second == (200, None, BODY)
    assert connections == 2


def test_a_reply_without_a_length_ends_with_its_connection(run):
    async def close_after(reader, writer):
        writer.write(b"HTTP/1.1 503 Busy\r\nRetry-After: 7\r\n\r\n" + BODY)
        await writer.drain()
        writer.close()

    async def go():
        async with Script([close_after]) as srv:
            ep = Endpoint(srv.url, {})
            out = await ep.post(b"{}", 10)
            ep.close()
            return out

    status, headers, body = run(go())
    assert (status, headers["retry-after"], body) == (503, "7", BODY)


def test_a_reply_without_a_length_cut_by_a_reset_is_dropped_not_returned_cut(run):
    async def reset_mid_body(reader, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + BODY[:5])
        await writer.drain()
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST, not FIN
        writer.transport.abort()

    async def go():
        async with Script([reset_mid_body]) as srv:
            ep = Endpoint(srv.url, {})
            with pytest.raises(Dropped, match="mid-reply"):
                await ep.post(b"{}", 10)
            ep.close()

    run(go())


def test_an_idle_connection_the_server_closed_is_replaced_without_an_error(run):
    async def go():
        async with Script([reply()], close_when_done=True) as srv:
            ep = Endpoint(srv.url, {})
            await ep.post(b"{}", 10)  # then the server closes the connection, idle in the client's pool
            await asyncio.wait_for(srv.ended.wait(), 10)
            while ep.idle:  # the close reaches the client (a readiness signal, not a sleep)
                await asyncio.sleep(0.01)
            srv.replies.append(reply())
            out = await ep.post(b"{}", 10)
            ep.close()
            return out, srv.connections

    out, connections = run(go())
    assert out == (200, None, BODY) and connections == 2


@pytest.mark.parametrize("answer, says", [
    (reply()[:-4], "closed the connection mid-reply"),
    (b"", "closed the connection before replying"),
    (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "not HTTP/1.1"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "not HTTP/1.1"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-6\r\nabcdef\r\n0\r\n\r\n", "chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcdef\r\n0\r\n\r\n", "longer than its size"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nabc", "Content-Length"),
    (b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok", "status line"),
])
def test_a_broken_reply_is_a_dropped_connection_never_a_result(answer, says, run):
    """A negative chunk size once looped forever inside the parser: the event loop stalled, no timeout fired."""
    async def broken(reader, writer):
        writer.write(answer)
        await writer.drain()
        writer.close()

    async def go():
        async with Script([broken]) as srv:
            ep = Endpoint(srv.url, {})
            with pytest.raises(Dropped, match=says):
                await ep.post(b"{}", 10)
            assert not ep.idle
            ep.close()

    run(go())


@pytest.mark.parametrize("end", ["timeout", "cancel"])
def test_a_reply_not_waited_for_closes_its_connection(end, run):
    async def silent(reader, writer):
        await reader.read()  # never answers; sees the client's close

    async def go():
        async with Script([silent, reply()]) as srv:
            ep = Endpoint(srv.url, {})
            if end == "timeout":
                with pytest.raises(asyncio.TimeoutError):
                    await ep.post(b"{}", 0.3)
            else:
                task = asyncio.ensure_future(ep.post(b"{}", 30))
                while not srv.heads:  # the request is written
                    await asyncio.sleep(0.01)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            await asyncio.wait_for(srv.ended.wait(), 10)  # the client closed the connection ...
            assert not ep.idle  # ... and keeps none for the next request
            out = await ep.post(b"{}", 10)  # a fresh connection answers
            ep.close()
            return out, srv.connections

    out, connections = run(go())
    assert out == (200, None, BODY) and connections == 2


def test_a_timed_out_request_through_the_seam_is_a_retryable_timeout_and_the_retry_answers(fake, run):
    fake.configure(rate_hang=1.0, hang_s=30)
    llm = LLM(Limits(max_concurrency=2, retries=0, backoff_s=0.01, backoff_max_s=0.05, timeout_s=0.5))
    spec = ModelSpec("openai/fake-model", api_base=fake.url, params={"max_tokens": 16})

    async def go():
        try:
            with pytest.raises(ProviderError) as err:
                await llm.complete(spec, [{"role": "user", "content": "q"}])
            fake.configure(rate_hang=0.0)
            return err.value, await llm.complete(spec, [{"role": "user", "content": "q2"}])
        finally:
            await llm.aclose()

    err, comp = run(go())
    assert err.kind == "timeout" and err.retryable and "no answer within 0.5 s" in str(err)
    assert comp.text


def test_more_bytes_than_the_reply_leave_the_connection_unused(run):
    async def go():
        async with Script([reply() + b"HTTP/1.1 200 OK\r\n"]) as srv:
            ep = Endpoint(srv.url, {})
            out = await ep.post(b"{}", 10)
            assert not ep.idle
            ep.close()
            return out

    assert run(go()) == (200, None, BODY)


def test_a_gzip_reply_is_decompressed_and_a_corrupt_one_is_dropped(run):
    packed = gzip.compress(BODY)
    members = gzip.compress(BODY[:5]) + gzip.compress(BODY[5:])  # a body gzip'd in two members, as some proxies do

    async def go():
        async with Script([reply(packed, extra=b"Content-Encoding: gzip\r\n"),
                           reply(members, extra=b"Content-Encoding: gzip\r\n"),
                           reply(packed[:-4] + b"xxxx", extra=b"Content-Encoding: gzip\r\n")]) as srv:
            ep = Endpoint(srv.url, {})
            good = await ep.post(b"{}", 10)
            both = await ep.post(b"{}", 10)
            with pytest.raises(Dropped, match="does not decompress"):
                await ep.post(b"{}", 10)
            ep.close()
            return good, both

    assert run(go()) == ((200, None, BODY), (200, None, BODY))


def test_an_api_base_that_is_not_http_or_a_header_with_a_line_break_is_refused_by_name(run):
    async def go():
        url = "ftp://127.0.0.1:9/v1/chat/completions"
        with pytest.raises(ValueError, match=f"'{url}' is not an http:// or https:// URL"):
            Endpoint(url, {})
        with pytest.raises(ValueError, match="line break"):
            Endpoint("http://127.0.0.1:9/v1/chat/completions", {"Authorization": "Bearer a\r\nX-Evil: 1"})

    run(go())


def test_a_refused_connection_is_a_connect_failure(run):
    async def go():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        ep = Endpoint(f"http://127.0.0.1:{port}/v1/chat/completions", {})
        with pytest.raises(ConnectFailed) as err:
            await ep.post(b"{}", 10)
        assert isinstance(err.value.os_error, ConnectionRefusedError)

    run(go())


# -- https -------------------------------------------------------------------------------------------------------
def _self_signed(folder):
    """Write a self-signed certificate for 127.0.0.1 and its key; return their paths."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench test CA")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_path, key_path


HTTPS_CHILD = textwrap.dedent("""
    import asyncio, ssl, sys
    from bench.models._http import ConnectFailed, Endpoint

    async def serve(reader, writer):
        while True:
            try:
                await reader.readuntil(b"\\r\\n\\r\\n")
                await reader.readexactly(2)
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok")
        writer.close()

    async def main():
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(sys.argv[1], sys.argv[2])
        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=ctx)
        port = server.sockets[0].getsockname()[1]
        ep = Endpoint(f"https://127.0.0.1:{port}/v1/chat/completions", {})
        try:
            print([await ep.post(b"{}", 10) for _ in range(2)], len(ep.open))
        except ConnectFailed as exc:
            print("ConnectFailed", exc.os_error)
        ep.close()
        server.close()
        await server.wait_closed()

    asyncio.run(main())
""")


@pytest.mark.parametrize("trusted", [True, False])
def test_https_verifies_the_server_against_the_systems_cas_or_ssl_cert_file(tmp_path, trusted):
    """A private CA is trusted through SSL_CERT_FILE (as with any OpenSSL client); without it, no connection."""
    cert, key = _self_signed(str(tmp_path))
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    if trusted:
        env["SSL_CERT_FILE"] = cert
    out = subprocess.run([sys.executable, "-c", HTTPS_CHILD, cert, key], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    if trusted:
        assert out.stdout.strip() == "[(200, None, b'ok'), (200, None, b'ok')] 1"  # one kept-alive connection
    else:
        assert out.stdout.startswith("ConnectFailed") and "certificate verify failed" in out.stdout


@pytest.mark.parametrize("key", [None, "sk-also-a-key"])
def test_an_api_bases_credentials_go_as_basic_auth_and_never_beside_a_key(monkeypatch, key, run):
    """As the preflight probes such an api_base; one Authorization header cannot carry a key as well."""
    monkeypatch.delenv("BENCH_T_BASIC_KEY", raising=False)
    if key:
        monkeypatch.setenv("BENCH_T_BASIC_KEY", key)

    async def go():
        async with Script([reply(b'{"choices": [{"message": {"content": "hi"}}]}')]) as srv:
            base = srv.url.replace("http://", "http://ann:p%40ss@").removesuffix("/chat/completions")
            llm = LLM(Limits(max_concurrency=1, retries=0, **FAST))
            try:
                return await llm.complete(ModelSpec("openai/x", api_base=base, api_key_env="BENCH_T_BASIC_KEY"),
                                          [{"role": "user", "content": "q"}]), srv.heads
            finally:
                await llm.aclose()

    if key:
        with pytest.raises(ProviderError, match="carries credentials and the model has a key") as err:
            run(go())
        assert err.value.kind == "auth" and not err.value.retryable and "p%40ss" not in str(err.value)
        return
    comp, heads = run(go())
    assert comp.text == "hi"
    assert "YW5uOnBAc3M=" not in redact("a gateway echoes Basic YW5uOnBAc3M=")  # the token is a secret too
    assert b"Authorization: Basic YW5uOnBAc3M=\r\n" in heads[0]  # ann:p@ss
    assert b"ann" not in heads[0].split(b"\r\n")[1]  # the Host header has no credentials


@contextlib.contextmanager
def greeter(greeting):
    """A loopback server on its own thread that writes ``greeting`` and closes each connection as it accepts it,
    whatever the client's event loop is doing: a port forward with nothing behind it, another protocol's port."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    listener.settimeout(0.05)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(greeting)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(10)
        listener.close()


@pytest.mark.parametrize("greeting", [b"", b"SSH-2.0-OpenSSH_9.2\r\n"])
def test_a_server_that_closes_or_speaks_as_it_accepts_fails_the_request_at_once_as_dropped(greeting, run):
    """Closed (or spoken on) before the request was written, a connection once made the request wait its whole
    timeout (asyncio's loop) or raise a bare RuntimeError (uvloop's)."""
    async def go(port):
        ep = Endpoint(f"http://127.0.0.1:{port}/v1/chat/completions", {})
        out = await asyncio.gather(*(ep.post(b"{}", 600) for _ in range(20)), return_exceptions=True)
        ep.close()
        return out

    with greeter(greeting) as port:
        out = run(go(port))  # the run's own bound is 60 s: a request waiting out its 600 s fails the test
    assert all(isinstance(o, Dropped) for o in out), out


def test_closing_the_endpoint_during_a_reply_without_a_length_fails_it_never_returns_it_cut(run):
    async def half(reader, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + BODY[:5])
        await writer.drain()
        await reader.read()

    async def go():
        async with Script([half]) as srv:
            ep = Endpoint(srv.url, {})
            task = asyncio.ensure_future(ep.post(b"{}", 30))
            while not ep.open or next(iter(ep.open)).status == 0:  # the head is in, the body under way
                await asyncio.sleep(0.01)
            ep.close()
            with pytest.raises(Dropped, match="closed by LLM.aclose"):
                await task

    run(go())


def test_a_request_cancelled_once_its_reply_is_read_leaves_its_connection_kept_alive(run):
    """The connection may already carry another request by the time the cancelled one resumes."""
    async def go():
        async with Script([reply(), reply()]) as srv:
            ep = Endpoint(srv.url, {})
            await ep.post(b"{}", 10)
            conn = ep.idle[-1]
            task = asyncio.ensure_future(ep.post(b"{}", 10))
            while conn.waiter is None:  # sent
                await asyncio.sleep(0)
            while conn.waiter is not None:  # its reply read: the task is woken after this coroutine, this turn
                await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            assert task.cancelled()  # the cancel landed after the reply was read
            assert ep.idle == [conn] and not conn.aborted
            ep.close()

    run(go())


def test_an_idle_connection_older_than_the_keepalive_is_closed_not_reused(run):
    """A NAT or a load balancer forgets an idle connection silently: reusing it would cost a whole timeout."""
    async def go():
        async with Script([reply(), reply()]) as srv:
            ep = Endpoint(srv.url, {}, idle_s=0.05)
            await ep.post(b"{}", 10)
            conn = ep.idle[-1]
            while ep.loop.time() - conn.idle_since <= 0.05:  # the time under test, not a readiness wait
                await asyncio.sleep(0.02)
            out = await ep.post(b"{}", 10)
            await asyncio.wait_for(srv.ended.wait(), 10)  # the stale one was closed
            ep.close()
            return out, srv.connections

    assert run(go()) == ((200, None, BODY), 2)


def test_a_host_whose_first_address_does_not_answer_is_reached_at_the_next(run):
    """As aiohttp's connector (happy eyeballs): a black-holed first address (broken IPv6, say) no longer costs
    every attempt its whole timeout."""
    async def go():
        hole = socket.socket()
        hole.bind(("127.0.0.1", 0))
        hole.listen(0)
        fillers = []
        for _ in range(4):  # fill its accept queue: later connects get no answer at all
            sock = socket.socket()
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                sock.connect(hole.getsockname())
            fillers.append(sock)
        try:
            async with Script([reply()]) as srv:
                ep = Endpoint(f"http://127.0.0.1:{hole.getsockname()[1]}/v1/chat/completions", {})
                ep.addresses = [(socket.AF_INET, hole.getsockname()),
                                (socket.AF_INET, srv.server.sockets[0].getsockname())]
                ep.resolved_at = ep.loop.time()  # as if the resolver had given both
                out = await ep.post(b"{}", 20)
                ep.close()
                return out
        finally:
            for sock in (hole, *fillers):
                sock.close()

    assert run(go()) == (200, None, BODY)


def test_a_redirect_is_a_final_error_that_names_where_it_points_and_is_not_followed(run):
    async def go():
        moved = reply(b"", head=b"HTTP/1.1 308 Permanent Redirect", extra=b"Location: https://example.invalid/v1\r\n")
        async with Script([moved]) as srv:
            llm = LLM(Limits(max_concurrency=1, retries=2, **FAST))
            try:
                with pytest.raises(ProviderError) as err:
                    await llm.complete(ModelSpec("openai/x", api_base=srv.url.removesuffix("/chat/completions")),
                                       [{"role": "user", "content": "q"}])
                return err.value, len(srv.heads)
            finally:
                await llm.aclose()

    err, sent = run(go())
    assert "redirected to https://example.invalid/v1" in str(err) and not err.retryable and sent == 1


def test_the_request_line_and_host_are_written_as_http_wants_them(run):
    """A path or query with a space is percent-encoded (the request line stays one line); Host names the port."""
    async def go():
        async with Script([reply()]) as srv:
            port = srv.server.sockets[0].getsockname()[1]
            ep = Endpoint(f"http://127.0.0.1:{port}/my proxy/v1/chat/completions?team=a b", {})
            out = await ep.post(b"{}", 10)
            ep.close()
            return out, srv.heads[0], port

    out, head, port = run(go())
    assert out == (200, None, BODY)
    assert head.startswith(b"POST /my%20proxy/v1/chat/completions?team=a%20b HTTP/1.1\r\n"
                           + f"Host: 127.0.0.1:{port}\r\n".encode())


def test_a_host_name_the_resolver_cannot_take_is_a_final_error_that_names_it(run):
    async def go():
        with pytest.raises(ValueError, match="the host 'gpu..lab' is not a valid host name"):
            Endpoint("http://gpu..lab:8000/v1/chat/completions", {})
        llm = LLM(Limits(max_concurrency=1, retries=3, **FAST))
        try:
            with pytest.raises(ProviderError, match="not a valid host name") as err:
                await llm.complete(ModelSpec("openai/x", api_base="http://gpu..lab:8000/v1"),
                                   [{"role": "user", "content": "q"}])
        finally:
            await llm.aclose()
        assert not err.value.retryable

    run(go())


def test_a_request_connecting_while_the_endpoint_closes_is_dropped_not_sent(run):
    async def go():
        async with Script([reply()]) as srv:
            ep = Endpoint(srv.url, {})
            task = asyncio.ensure_future(ep.post(b"{}", 10))
            await asyncio.sleep(0)  # one turn: the request is past its first check, connecting
            ep.close()
            with pytest.raises(Dropped, match="closed"):
                await task
            return srv.heads

    assert run(go()) == []
