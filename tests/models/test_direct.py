"""The direct transport (bench.models._direct, on aiohttp) through the seam: what a proxy, a hostile or a broken
server can do to a request, against the loopback fake provider and tiny loopback servers scripted here.

Every server binds 127.0.0.1; a proxy maps ``provider.invalid`` (a name no resolver answers) onto the fake
provider, so an api_base there is reached through ``HTTP_PROXY`` or not at all.
"""

import asyncio
import datetime
import gzip
import os
import subprocess
import sys
import textwrap
import tracemalloc
import zlib

import pytest

from bench.core.errors import PreflightError, ProviderError
from bench.core.secrets import redact
from bench.models.client import LLM, Limits
from bench.models.preflight import preflight
from bench.models.routing import ModelSpec
from bench.testing.proxy import forwarding_proxy

FAST = dict(backoff_s=0.01, backoff_max_s=0.05, timeout_s=10)
PROXY_VARS = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY",
              "all_proxy")
CHAT = b'{"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}'


def ask(base: str, limits: Limits | None = None, key_env: str | None = None):
    """Return (the Completion or the ProviderError, the client) of one call to ``openai/x`` at ``base``."""
    llm = LLM(limits or Limits(max_concurrency=2, retries=2, **FAST))

    async def go():
        try:
            return await llm.complete(ModelSpec("openai/x", api_base=base, api_key_env=key_env),
                                      [{"role": "user", "content": "q"}])
        except ProviderError as err:
            return err
        finally:
            await llm.aclose()

    return asyncio.run(asyncio.wait_for(go(), 120)), llm


class Hostile:
    """A loopback server that answers request number n (from 1) with ``await answer(writer, n)``, then closes."""

    def __init__(self, answer):
        self.answer, self.heads, self.server = answer, [], None

    async def __aenter__(self):
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def serve(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            self.heads.append(head)
            length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
            await reader.readexactly(length)
            await self.answer(writer, len(self.heads))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def against(answer, limits: Limits | None = None, key_env: str | None = None):
    """Return (the result of one call against a Hostile server answering with ``answer``, the heads it read)."""
    async def go():
        async with Hostile(answer) as srv:
            return await asyncio.to_thread(ask, srv.url, limits, key_env), srv.heads

    (out, _llm), heads = asyncio.run(go())
    return out, heads


def head(extra: bytes = b"", status: bytes = b"200 OK") -> bytes:
    return b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\nConnection: close\r\n" + extra + b"\r\n"


def sent(data: bytes, extra: bytes = b""):
    """An answer writing ``data`` with its Content-Length after the head (``extra``: more header lines)."""
    async def answer(writer, n):
        writer.write(head(extra + b"Content-Length: %d\r\n" % len(data)) + data)
    return answer


def final(out, *says):
    assert isinstance(out, ProviderError) and not out.retryable and out.attempts == 1, out
    assert all(s in str(out) for s in says), str(out)


@pytest.fixture
def no_proxy_env(monkeypatch):
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)


# -- proxies -------------------------------------------------------------------------------------------------------
def test_an_api_base_only_a_proxy_reaches_is_called_and_preflighted_through_http_proxy(fake, no_proxy_env,
                                                                                        monkeypatch):
    port = int(fake.url.rsplit(":", 1)[1].split("/")[0])
    base = f"http://provider.invalid:{port}/v1"
    spec = ModelSpec("openai/fake-model", api_base=base)
    out, _ = ask(base, Limits(max_concurrency=2, retries=0, **FAST))
    final(out, "cannot connect")  # no proxy: the name does not resolve
    with pytest.raises(PreflightError, match="host not found"):
        preflight([spec], probe_timeout_s=5)
    with forwarding_proxy({f"provider.invalid:{port}": ("127.0.0.1", port)}) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        preflight([spec], probe_timeout_s=5)  # the preflight goes where the transport goes
        out, _ = ask(base)
        assert out.text and out.usage.attempts == 1, out
        assert f"{base}/chat/completions" in proxy.asked and f"{base}/models" in proxy.asked
        asked = len(proxy.asked)
        out, _ = ask(fake.url)  # a loopback api_base is never proxied
        assert out.text and len(proxy.asked) == asked
        monkeypatch.setenv("NO_PROXY", "provider.invalid")  # not proxied: the name does not resolve again
        out, _ = ask(base, Limits(max_concurrency=2, retries=0, **FAST))
        final(out, "cannot connect")
        with pytest.raises(PreflightError, match="host not found"):
            preflight([spec], probe_timeout_s=5)
        assert len(proxy.asked) == asked


def test_a_netrc_entry_never_replaces_the_key_of_a_proxied_route(fake, no_proxy_env, monkeypatch, tmp_path):
    """aiohttp's trust_env would take ~/.netrc's password for the host instead of the route's key."""
    netrc = tmp_path / "netrc"
    netrc.write_text("machine provider.invalid login ann password netrc-password\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    monkeypatch.setenv("BENCH_T_PROXIED_KEY", "sk-proxied-key")
    fake.configure(require_key="sk-proxied-key")
    port = fake.port
    with forwarding_proxy({f"provider.invalid:{port}": ("127.0.0.1", port)}) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        out, _ = ask(f"http://provider.invalid:{port}/v1", key_env="BENCH_T_PROXIED_KEY")
    assert not isinstance(out, ProviderError) and out.text, out


# -- replies bench will not read: final, never retried ---------------------------------------------------------------
def bomb() -> bytes:
    """About 1 MB of gzip that inflates to 1 GiB of zeros (its trailer left out: nobody should read that far)."""
    c, zeros = zlib.compressobj(9, zlib.DEFLATED, 31), bytes(2**20)
    first = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)  # a full flush forgets the history: each MiB alike
    return first + again * 1023


def test_a_gzip_bomb_fails_at_the_bound_final_with_bounded_memory(no_proxy_env):
    data = bomb()
    assert len(data) < 2**21
    tracemalloc.start()
    try:
        out, heads = against(sent(data, b"Content-Encoding: gzip\r\n"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    final(out, "more than 33554432 bytes once decompressed", "limits.max_reply_mb")
    assert len(heads) == 1 and peak < 200 * 2**20  # 32 MiB kept at most, far from the bomb's 1 GiB


def test_an_endless_chunked_body_fails_at_the_bound(no_proxy_env):
    async def endless(writer, n):
        writer.write(head(b"Transfer-Encoding: chunked\r\n"))
        while True:
            writer.write(b"10000\r\n" + bytes(65536) + b"\r\n")
            await writer.drain()

    out, heads = against(endless, Limits(max_concurrency=2, retries=2, max_reply_mb=2, **FAST))
    final(out, f"more than {2 * 2**20} bytes")
    assert len(heads) == 1


def test_a_huge_content_length_is_refused_before_its_body(no_proxy_env):
    async def huge(writer, n):
        writer.write(head(b"Content-Length: 1000000000000000\r\n") + b"{")
        await asyncio.sleep(3600)

    out, heads = against(huge)
    final(out, "Content-Length of 1000000000000000 bytes is over the bound")
    assert len(heads) == 1


def test_conflicting_content_lengths_are_refused(no_proxy_env):
    out, heads = against(sent(CHAT, b"Content-Length: 7\r\n"))
    final(out)
    assert "Content-Length" in str(out) and len(heads) == 1


@pytest.mark.parametrize("extra, encode", [
    (b"Transfer-Encoding: gzip, chunked\r\n", lambda b: gzip.compress(b)),
    (b"Content-Encoding: gzip\r\n", lambda b: gzip.compress(b[:20]) + gzip.compress(b[20:])),  # two members
    (b"Content-Encoding: deflate\r\n", zlib.compress),
    (b"Content-Encoding: deflate\r\n", lambda b: zlib.compress(b)[2:-4]),  # raw, as some servers send it
])
def test_a_compressed_reply_is_read_whole_though_identity_was_asked(extra, encode, no_proxy_env):
    async def answer(writer, n):
        data = encode(CHAT)
        if b"chunked" in extra:
            writer.write(head(extra) + b"%x\r\n" % len(data) + data + b"\r\n0\r\n\r\n")
        else:
            writer.write(head(extra + b"Content-Length: %d\r\n" % len(data)) + data)

    out, heads = against(answer)
    assert out.text == "hi" and b"accept-encoding: identity" in heads[0].lower()


@pytest.mark.parametrize("extra, says", [(b"Content-Encoding: br\r\n", "encoded as br"),
                                         (b"Content-Encoding: gzip\r\n", "does not decompress")])
def test_a_reply_in_a_coding_bench_cannot_read_fails_once(extra, says, no_proxy_env):
    out, heads = against(sent(b"not compressed at all", extra))
    final(out, says)
    assert len(heads) == 1


def test_a_redirect_is_a_final_error_naming_it_and_nothing_goes_where_it_points(no_proxy_env, monkeypatch):
    monkeypatch.setenv("BENCH_T_REDIRECT_KEY", "sk-redirect-secret")

    async def go():
        async with Hostile(sent(CHAT)) as elsewhere:
            async with Hostile(lambda w, n: _status(w, b"307 Temporary Redirect", elsewhere.url)) as srv:
                out, _ = await asyncio.to_thread(ask, srv.url, None, "BENCH_T_REDIRECT_KEY")
                return out, srv.heads, elsewhere.heads

    out, heads, elsewhere = asyncio.run(go())
    final(out, "redirected to http://127.0.0.1:", "set the api_base to where it points")
    assert len(heads) == 1 and elsewhere == []


async def _status(writer, status, where):
    writer.write(head(b"Location: %s/chat/completions\r\nContent-Length: 0\r\n" % where.encode(), status))


# -- what is retried ---------------------------------------------------------------------------------------------------
def test_a_dropped_connection_is_retried_and_the_retry_answers(no_proxy_env):
    async def drop_first(writer, n):
        if n == 1:
            writer.write(head(b"Content-Length: 100\r\n") + b'{"cho')  # then the close, mid-reply
        else:
            await sent(CHAT)(writer, n)

    out, heads = against(drop_first)
    assert out.text == "hi" and out.usage.attempts == 2 and len(heads) == 2


def test_a_timed_out_request_is_a_retryable_timeout_and_the_retry_answers(fake, no_proxy_env):
    fake.configure(rate_hang=1.0, hang_s=30)
    out, _ = ask(fake.url, Limits(max_concurrency=2, retries=0, backoff_s=0.01, timeout_s=0.5))
    assert out.kind == "timeout" and out.retryable and "no answer within 0.5 s" in str(out)
    fake.configure(rate_hang=0.0)
    out, _ = ask(fake.url)
    assert out.text


def test_a_refused_connection_to_a_server_never_reached_fails_at_once(no_proxy_env):
    async def closed_port():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        return port

    out, _ = ask(f"http://127.0.0.1:{asyncio.run(closed_port())}/v1")
    final(out, "cannot connect to http://127.0.0.1:")
    assert out.kind == "connection"


def test_a_refused_connection_to_a_server_that_answered_before_is_retried(no_proxy_env):
    """A restart of a server this process reached: worth retrying (never reached: a wrong address, final)."""
    async def go():
        llm = LLM(Limits(max_concurrency=2, retries=2, **FAST))
        try:
            async with Hostile(sent(CHAT)) as srv:
                spec = ModelSpec("openai/x", api_base=srv.url)
                first = await llm.complete(spec, [{"role": "user", "content": "q1"}])
            try:
                await llm.complete(spec, [{"role": "user", "content": "q2"}])
            except ProviderError as err:
                return first, err
        finally:
            await llm.aclose()

    first, err = asyncio.run(asyncio.wait_for(go(), 120))
    assert first.text == "hi"
    assert err.kind == "connection" and err.retryable and err.attempts == 3, err


# -- credentials, TLS --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", [None, "sk-also-a-key"])
def test_an_api_bases_credentials_go_as_basic_auth_and_never_beside_a_key(monkeypatch, key, no_proxy_env):
    monkeypatch.delenv("BENCH_T_BASIC_KEY", raising=False)
    if key:
        monkeypatch.setenv("BENCH_T_BASIC_KEY", key)

    async def go():
        async with Hostile(sent(CHAT)) as srv:
            base = srv.url.replace("http://", "http://ann:p%40ss@")
            return await asyncio.to_thread(ask, base, None, "BENCH_T_BASIC_KEY"), srv.heads

    (out, _), heads = asyncio.run(go())
    if key:
        final(out, "carries credentials and the model has a key")
        assert out.kind == "auth" and "p%40ss" not in str(out) and heads == []
        return
    assert out.text == "hi"
    assert "YW5uOnBAc3M=" not in redact("a gateway echoes Basic YW5uOnBAc3M=")  # the token is a secret too
    assert b"Authorization: Basic YW5uOnBAc3M=\r\n" in heads[0]  # ann:p@ss
    assert b"ann" not in heads[0].split(b"\r\n")[0] and b"Host: 127.0.0.1:" in heads[0]


HTTPS_CHILD = textwrap.dedent("""
    import asyncio, ssl, sys
    import aiohttp
    from bench.models._direct import Endpoint

    async def serve(reader, writer):
        await reader.readuntil(b"\\r\\n\\r\\n")
        await reader.readexactly(2)
        writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\nok")
        await writer.drain()
        writer.close()

    async def main():
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(sys.argv[1], sys.argv[2])
        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=ctx)
        ep = Endpoint(f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions", {}, 2**20)
        try:
            status, _, body = await ep.post(b"{}", 10)
            print(status, body)
        except aiohttp.ClientConnectorCertificateError as exc:
            print("certificate", exc)
        await ep.close()
        server.close()

    asyncio.run(main())
""")


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


@pytest.mark.parametrize("trusted", [True, False])
def test_https_verifies_the_server_against_the_systems_cas_or_ssl_cert_file(tmp_path, trusted):
    cert, key = _self_signed(str(tmp_path))
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR", *PROXY_VARS)}
    if trusted:
        env["SSL_CERT_FILE"] = cert
    out = subprocess.run([sys.executable, "-c", HTTPS_CHILD, cert, key], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    if trusted:
        assert out.stdout.strip() == "200 b'ok'"
    else:
        assert out.stdout.startswith("certificate") and "certificate verify failed" in out.stdout
