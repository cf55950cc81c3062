#include <ullm/core/error.hpp>
#include <ullm/http/curl_transport.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/test_server.hpp"

namespace curl_transport_test {

using namespace std::chrono_literals;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;

namespace {

ullm::HttpRequest post(const TestServer& server, std::string path, std::string body = "{}") {
    ullm::HttpRequest request;
    request.url = server.base_url() + path;
    request.headers = {{"Content-Type", "application/json"}};
    request.body = std::move(body);
    return request;
}

std::string read_all(ullm::HttpStream& stream, std::size_t* reads = nullptr) {
    std::string all;
    std::string chunk;
    while (stream.read(chunk)) {
        all += chunk;
        if (reads != nullptr) ++*reads;
    }
    return all;
}

template <class Error, class F>
Error capture(F&& f) {
    try {
        f();
    } catch (const Error& error) {
        return error;
    }
    FAIL("no exception was thrown");
    throw std::logic_error("unreachable");
}

std::string numbered_events(int count) {
    std::string wire;
    for (int i = 0; i < count; ++i) wire += "data: {\"n\":" + std::to_string(i) + "}\n\n";
    return wire;
}

// The two ways a stream is read: waiting for what the I/O loop received (`open_stream`), or
// driving the transfer on the reader's own thread (`open_blocking_stream`). A stream test
// that calls this runs once with each.
enum class Reader { loop, caller };

Reader any_reader() {
    Reader reader = Reader::loop;
    // The test's own assertions follow the section, where Catch does not count them for it.
    SECTION("read from the I/O loop") {
        reader = Reader::loop;
        SUCCEED("open_stream");
    }
    SECTION("driven by the reader") {
        reader = Reader::caller;
        SUCCEED("open_blocking_stream");
    }
    return reader;
}

std::unique_ptr<ullm::HttpStream> open(ullm::CurlTransport& transport,
                                       const ullm::HttpRequest& request, Reader reader,
                                       std::stop_token stop = {}) {
    return reader == Reader::loop ? transport.open_stream(request, std::move(stop))
                                  : transport.open_blocking_stream(request, std::move(stop));
}

// Runs `call` `rounds` times on each of `threads` threads, with a body naming the thread and
// the round, and counts the calls that returned false.
template <class Call>
int failures_on_threads(int threads, int rounds, Call call) {
    std::atomic<int> failures{0};
    std::vector<std::thread> running;
    for (int t = 0; t < threads; ++t) {
        running.emplace_back([&, t] {
            for (int i = 0; i < rounds; ++i) {
                const std::string body =
                    "{\"t\":" + std::to_string(t) + ",\"i\":" + std::to_string(i) + "}";
                if (!call(body)) ++failures;
            }
        });
    }
    for (auto& thread : running) thread.join();
    return failures.load();
}

}  // namespace

TEST_CASE("send returns the status, headers and body, and the server sees the request",
          "[transport]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, R"({"ok":true})", {{"X-Request-Id", "req_42"}}));
    ullm::CurlTransport transport({.user_agent = "ullm-test/1"});
    auto request = post(server, "/v1/chat/completions?x=1", R"({"model":"m"})");
    request.headers.emplace_back("Authorization", "Bearer sk-test");

    const auto response = transport.send(request);

    CHECK(response.status == 200);
    CHECK(response.body == R"({"ok":true})");
    CHECK(response.header("x-request-id") == "req_42");
    CHECK(response.header("Content-Type") == "application/json");
    REQUIRE(server.request_count() == 1);
    const auto seen = server.requests().front();
    CHECK(seen.method == "POST");
    CHECK(seen.target == "/v1/chat/completions?x=1");
    CHECK(seen.body == R"({"model":"m"})");
    CHECK(seen.header("authorization") == "Bearer sk-test");
    CHECK(seen.header("content-type") == "application/json");
    CHECK(seen.header("user-agent") == "ullm-test/1");
    CHECK_FALSE(seen.has_header("expect"));
}

TEST_CASE("a failed response keeps its status, headers and body for the error", "[transport]") {
    TestServer server;
    const std::string body = R"({"error":{"message":"Rate limit reached","type":"requests"}})";
    server.enqueue(ScriptedResponse::json(429, body, {{"Retry-After", "2"}}));
    ullm::CurlTransport transport;

    const auto response = transport.send(post(server, "/v1/x"));

    CHECK(response.status == 429);
    CHECK(response.body == body);
    CHECK(response.header("retry-after") == "2");
}

TEST_CASE("GET and other methods are sent as asked", "[transport]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, "[]"));
    server.enqueue(ScriptedResponse::json(204, ""));
    ullm::CurlTransport transport;
    auto get = post(server, "/v1/models", "");
    get.method = "GET";
    CHECK(transport.send(get).status == 200);
    auto remove = post(server, "/v1/files/1", "");
    remove.method = "DELETE";
    CHECK(transport.send(remove).status == 204);
    const auto seen = server.requests();
    REQUIRE(seen.size() == 2);
    CHECK(seen[0].method == "GET");
    CHECK(seen[0].body.empty());
    CHECK(seen[1].method == "DELETE");
}

TEST_CASE("requests of one transport reuse one connection", "[transport]") {
    TestServer server;
    ullm::CurlTransport transport;
    for (int i = 0; i < 5; ++i) {
        server.enqueue(ScriptedResponse::json(200, "{}"));
        CHECK(transport.send(post(server, "/v1/x")).status == 200);
    }
    CHECK(server.connections_accepted() == 1);
}

TEST_CASE("a large request body is sent whole without waiting for 100-continue", "[transport]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, "{}"));
    ullm::CurlTransport transport;
    const std::string body(3 << 20, 'x');
    CHECK(transport.send(post(server, "/v1/x", body)).status == 200);
    // Without the header curl would wait up to 1 s for a 100 Continue before sending the body.
    CHECK_FALSE(server.requests().front().has_header("expect"));
    CHECK(server.requests().front().body == body);
}

TEST_CASE("a stream delivers its body incrementally and completely", "[transport]") {
    const Reader reader = any_reader();
    TestServer server;
    const std::string wire = numbered_events(20);
    server.enqueue(ScriptedResponse::sse(wire, 17, 5ms));
    ullm::CurlTransport transport;

    auto stream = open(transport, post(server, "/v1/stream"), reader);
    CHECK(stream->head().status == 200);
    CHECK(stream->head().header("content-type") == "text/event-stream");
    std::size_t reads = 0;
    CHECK(read_all(*stream, &reads) == wire);
    CHECK(reads > 1);
}

TEST_CASE("a stream with an error status exposes it before the body", "[transport]") {
    const Reader reader = any_reader();
    TestServer server;
    server.enqueue(ScriptedResponse::json(
        529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"));
    ullm::CurlTransport transport;
    auto stream = open(transport, post(server, "/v1/messages"), reader);
    CHECK(stream->head().status == 529);
    CHECK(read_all(*stream).find("overloaded_error") != std::string::npos);
}

TEST_CASE("cancelling a silent stream aborts it promptly", "[transport]") {
    const Reader reader = any_reader();
    TestServer server;
    server.enqueue(
        {.status = 200, .headers = {{"Content-Type", "text/event-stream"}}, .stall = true});
    ullm::CurlTransport transport;
    std::stop_source stop;
    auto stream = open(transport, post(server, "/v1/stream"), reader, stop.get_token());
    CHECK(stream->head().status == 200);

    std::chrono::steady_clock::time_point stopped_at;
    std::thread canceller([&] {
        std::this_thread::sleep_for(50ms);
        stopped_at = std::chrono::steady_clock::now();
        stop.request_stop();
    });
    std::string chunk;
    const auto error = capture<ullm::CancelledError>([&] { (void)stream->read(chunk); });
    const auto latency = std::chrono::steady_clock::now() - stopped_at;
    canceller.join();

    CHECK(error.code() == "cancelled");
    // The server stays silent, so only the stop token ends this read; the bound is loose
    // enough for a loaded CI machine.
    CHECK(latency < 2s);
    CHECK(server.wait_for_client_aborts(1, 2s));
    CHECK(transport.active_transfers() == 0);
}

TEST_CASE("cancel() from another thread unblocks a waiting reader", "[transport]") {
    const Reader reader = any_reader();
    TestServer server;
    server.enqueue({.status = 200, .delay_before_headers = 10s});
    ullm::CurlTransport transport;
    auto stream = open(transport, post(server, "/v1/stream"), reader);
    auto waiting = std::async(std::launch::async, [&] { return stream->head().status; });
    std::this_thread::sleep_for(30ms);
    stream->cancel();
    CHECK(waiting.wait_for(2s) == std::future_status::ready);
    CHECK_THROWS_AS(waiting.get(), ullm::CancelledError);
    CHECK(server.wait_for_client_aborts(1, 2s));
}

namespace {

// Owns a transport and says when it has destroyed it, on whichever thread drops it last.
struct LastOwner {
    std::shared_ptr<ullm::CurlTransport> transport;
    std::promise<std::thread::id> destroyed_on;
    ~LastOwner() {
        transport.reset();
        destroyed_on.set_value(std::this_thread::get_id());
    }
};

}  // namespace

TEST_CASE("a started request's handler may hold the last reference to its transport",
          "[transport]") {
    // The handler is destroyed on the I/O thread, taking the transport with it: its destructor
    // cannot join the thread it runs on (which ended the process with std::terminate).
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, R"({"ok":true})"));
    auto owner = std::make_shared<LastOwner>();
    owner->transport = std::make_shared<ullm::CurlTransport>();
    auto destroyed = owner->destroyed_on.get_future();
    std::promise<int> answered;
    auto status = answered.get_future();
    {
        const auto transport = owner->transport;
        (void)transport->start(post(server, "/v1/x"),
                               [owner = std::move(owner), &answered](ullm::HttpResponse response,
                                                                     std::exception_ptr error) {
                                   answered.set_value(error ? -1 : response.status);
                               });
    }
    REQUIRE(status.wait_for(5s) == std::future_status::ready);
    CHECK(status.get() == 200);
    REQUIRE(destroyed.wait_for(5s) == std::future_status::ready);
    CHECK(destroyed.get() != std::this_thread::get_id());  // on the I/O thread
}

// The I/O loop may take up a transfer while its cancel is being recorded (a race ThreadSanitizer
// found): whichever comes first, the transfer ends cancelled, and nothing is left running.
TEST_CASE("a started request or stream cancelled as soon as it is made ends cancelled",
          "[transport]") {
    TestServer server;
    server.set_handler([](const ullm::test::RecordedRequest&) {
        return ScriptedResponse{.status = 200, .delay_before_headers = 10s};
    });
    ullm::CurlTransport transport;
    constexpr int rounds = 40;
    int cancelled_requests = 0;
    int cancelled_streams = 0;
    for (int i = 0; i < rounds; ++i) {
        std::promise<std::exception_ptr> ended;
        auto pending = transport.start(post(server, "/v1/x"),
                                       [&ended](ullm::HttpResponse, std::exception_ptr error) {
                                           ended.set_value(std::move(error));
                                       });
        pending->cancel();
        auto outcome = ended.get_future();
        REQUIRE(outcome.wait_for(2s) == std::future_status::ready);
        try {
            std::rethrow_exception(outcome.get());
        } catch (const ullm::CancelledError&) {
            ++cancelled_requests;
        } catch (...) {
        }

        auto stream = transport.open_stream(post(server, "/v1/stream"));
        stream->cancel();
        try {
            (void)stream->head();
        } catch (const ullm::CancelledError&) {
            ++cancelled_streams;
        }
    }
    CHECK(cancelled_requests == rounds);
    CHECK(cancelled_streams == rounds);
    // Every transfer left the I/O loop: none waits on the stalled server.
    for (int i = 0; i < 200 && transport.active_transfers() != 0; ++i)
        std::this_thread::sleep_for(10ms);
    CHECK(transport.active_transfers() == 0);
}

namespace {

// Sends the server's first request, which it answers only after 10 s, cancels it through its
// stop token once the server has it, and checks that the send ends at once with `cancelled`.
void cancel_a_stalled_send(TestServer& server, ullm::CurlTransport& transport) {
    server.enqueue({.status = 200, .body = "{}", .delay_before_headers = 10s});
    std::stop_source stop;
    auto pending = std::async(std::launch::async, [&] {
        return transport.send(post(server, "/v1/x"), stop.get_token());
    });
    REQUIRE(server.wait_for_requests(1, 2s));
    stop.request_stop();
    CHECK(pending.wait_for(2s) == std::future_status::ready);
    CHECK_THROWS_AS(pending.get(), ullm::CancelledError);
}

}  // namespace

TEST_CASE("a blocking send is cancelled through its stop token", "[transport]") {
    TestServer server;
    ullm::CurlTransport transport;
    cancel_a_stalled_send(server, transport);

    std::stop_source already;
    already.request_stop();
    CHECK_THROWS_AS(transport.send(post(server, "/v1/x"), already.get_token()),
                    ullm::CancelledError);
}

TEST_CASE("a blocking send that goes silent fails with an idle timeout", "[transport]") {
    TestServer server;
    server.enqueue({.status = 200, .chunks = {"{\"partial\":"}, .stall = true});
    ullm::CurlTransport transport;
    auto request = post(server, "/v1/x");
    request.idle_timeout = 200ms;
    const auto error = capture<ullm::TransportError>([&] { (void)transport.send(request); });
    CHECK(error.code() == "timeout");
    CHECK(error.retryable());
    CHECK(std::string(error.what()).find("no data received for 200 ms") != std::string::npos);
}

TEST_CASE("a send after a cancelled one works on a fresh connection", "[transport]") {
    TestServer server;
    ullm::CurlTransport transport;
    cancel_a_stalled_send(server, transport);
    server.enqueue(ScriptedResponse::json(200, R"({"second":true})"));
    // The cancelled transfer's connection is closed, its handles serve the next send.
    const auto answer = transport.send(post(server, "/v1/x"));
    CHECK(answer.status == 200);
    CHECK(answer.body == R"({"second":true})");
    CHECK(server.connections_accepted() == 2);
}

TEST_CASE("concurrent blocking sends each get their own answer and keep their connections",
          "[transport]") {
    TestServer server;
    server.set_handler([](const ullm::test::RecordedRequest& request) {
        return ScriptedResponse::json(200, request.body);
    });
    ullm::CurlTransport transport;
    constexpr int kThreads = 6;
    constexpr int kRounds = 40;
    CHECK(failures_on_threads(kThreads, kRounds, [&](const std::string& body) {
              const auto answer = transport.send(post(server, "/v1/echo", body));
              return answer.status == 200 && answer.body == body;
          }) == 0);
    CHECK(server.request_count() == kThreads * kRounds);
    // A send takes an idle handle pair, with its open connection, before making a new one: never
    // more pairs, so connections, than sends at once.
    CHECK(server.connections_accepted() <= kThreads);
}

TEST_CASE("a stream that goes silent fails with an idle timeout", "[transport]") {
    const Reader reader = any_reader();
    TestServer server;
    server.enqueue({.status = 200, .chunks = {"data: first\n\n"}, .stall = true});
    ullm::CurlTransport transport;
    auto request = post(server, "/v1/stream");
    request.idle_timeout = 200ms;
    auto stream = open(transport, request, reader);
    std::string chunk;
    REQUIRE(stream->read(chunk));
    CHECK(chunk == "data: first\n\n");
    const auto error = capture<ullm::TransportError>([&] { (void)stream->read(chunk); });
    CHECK(error.code() == "timeout");
    CHECK(error.retryable());
}

TEST_CASE("slow but steady streams are not idle", "[transport]") {
    const Reader reader = any_reader();
    TestServer server;
    const std::string wire = numbered_events(40);  // 28 pieces 30 ms apart: about 840 ms
    server.enqueue(ScriptedResponse::sse(wire, 25, 30ms));
    ullm::CurlTransport transport;
    auto request = post(server, "/v1/stream");
    request.idle_timeout = 600ms;  // below the whole stream's duration, far above each gap
    auto stream = open(transport, request, reader);
    CHECK(read_all(*stream) == wire);
}

TEST_CASE("a disconnect mid-stream yields the bytes received, then a connection error",
          "[transport]") {
    const Reader reader = any_reader();
    TestServer server;
    server.enqueue({.status = 200, .chunks = {"data: a\n\n", "data: b\n\n"}, .disconnect = true});
    ullm::CurlTransport transport;
    auto stream = open(transport, post(server, "/v1/stream"), reader);
    std::string received;
    std::string chunk;
    const auto error = capture<ullm::TransportError>([&] {
        while (stream->read(chunk)) received += chunk;
    });
    CHECK(received == "data: a\n\ndata: b\n\n");
    CHECK(error.code() == "connection_failed");
    CHECK(error.retryable());
}

TEST_CASE("an unreachable server is a retryable connection failure", "[transport]") {
    std::string url;
    {
        TestServer closed;
        url = closed.base_url() + "/v1/x?key=AIzaSECRETKEY";
    }
    ullm::CurlTransport transport;
    ullm::HttpRequest request;
    request.url = url;
    request.headers = {{"x-goog-api-key", "AIzaSECRETKEY"}};
    const auto error = capture<ullm::TransportError>([&] { (void)transport.send(request); });
    CHECK(error.code() == "connection_failed");
    CHECK(error.retryable());
    CHECK(std::string(error.what()).find("AIzaSECRETKEY") == std::string::npos);
}

TEST_CASE("a malformed URL is rejected as such", "[transport]") {
    ullm::CurlTransport transport;
    ullm::HttpRequest request;
    request.url = "notascheme://x";
    const auto error = capture<ullm::TransportError>([&] { (void)transport.send(request); });
    CHECK(error.code() == "invalid_url");
    CHECK_FALSE(error.retryable());
}

namespace {

// A listener on 127.0.0.1 that serves one connection with `serve` on its own thread: for peers
// that TestServer cannot play (a server that is no TLS server, a proxy).
class OneShotPeer {
public:
    explicit OneShotPeer(std::function<void(int connection)> serve) {
        listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(listener_ >= 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
        REQUIRE(::listen(listener_, 1) == 0);
        socklen_t length = sizeof address;
        REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
        port_ = ntohs(address.sin_port);
        thread_ = std::thread([this, serve = std::move(serve)] {
            const int connection = ::accept(listener_, nullptr, nullptr);
            if (connection < 0) return;
            serve(connection);
            ::shutdown(connection, SHUT_RDWR);
            ::close(connection);
        });
    }
    ~OneShotPeer() {
        ::shutdown(listener_, SHUT_RDWR);  // wakes an accept that is still waiting
        if (thread_.joinable()) thread_.join();
        ::close(listener_);
    }
    OneShotPeer(const OneShotPeer&) = delete;
    OneShotPeer& operator=(const OneShotPeer&) = delete;

    [[nodiscard]] std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

private:
    int listener_ = -1;
    unsigned port_ = 0;
    std::thread thread_;
};

void send_text(int connection, const std::string& text) {
    (void)::send(connection, text.data(), text.size(), MSG_NOSIGNAL);
}

// Reads from `connection` until a blank line ends a request head (or the peer stops), and
// returns what it read.
std::string read_head(int connection) {
    std::string received;
    char buffer[1024];
    while (received.find("\r\n\r\n") == std::string::npos) {
        const auto got = ::recv(connection, buffer, sizeof buffer, 0);
        if (got <= 0) break;
        received.append(buffer, static_cast<std::size_t>(got));
    }
    return received;
}

}  // namespace

TEST_CASE("a TLS handshake with a server that does not speak TLS is a tls_error", "[transport]") {
    // Answers whatever arrives with plain HTTP and hangs up: the client's handshake reads bytes
    // that are no TLS record.
    std::optional<OneShotPeer> server(std::in_place, [](int connection) {
        send_text(connection, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    });
    ullm::CurlTransport transport;
    ullm::HttpRequest request;
    request.url = "https://" + server->address() + "/v1/x";
    const auto error = capture<ullm::TransportError>([&] { (void)transport.send(request); });
    server.reset();
    CHECK(error.code() == "tls_error");
    CHECK_FALSE(error.retryable());
}

TEST_CASE("a proxy's answer to CONNECT is not taken for the response's head", "[transport]") {
    // An HTTPS stream through an HTTP proxy: the proxy opens the tunnel, then the "server"
    // behind it speaks no TLS. libcurl hands the proxy's `200 Connection established` to the
    // header callback unless told not to; taken for the head, it reported a 200 for a request
    // that never reached a server (and was rewritten under the reader when the real head came).
    const Reader reader = any_reader();
    std::promise<std::string> asked;
    OneShotPeer proxy([&asked](int connection) {
        asked.set_value(read_head(connection));
        send_text(connection, "HTTP/1.1 200 Connection established\r\nProxy-Agent: test\r\n\r\n");
        char hello[4096];  // the client's TLS hello, then no answer but a hang-up
        (void)::recv(connection, hello, sizeof hello, 0);
    });
    ullm::CurlTransport transport({.proxy = "http://" + proxy.address()});
    ullm::HttpRequest request;
    request.url = "https://upstream.invalid/v1/stream";  // never resolved here: the proxy's
    request.body = "{}";
    auto stream = open(transport, request, reader);
    const auto error = capture<ullm::TransportError>([&] { (void)stream->head(); });
    INFO(error.code() << ": " << error.what());
    CHECK((error.code() == "tls_error" || error.code() == "connection_failed"));
    auto request_line = asked.get_future();
    REQUIRE(request_line.wait_for(2s) == std::future_status::ready);
    CHECK(request_line.get().rfind("CONNECT upstream.invalid:443 ", 0) == 0);
}

TEST_CASE("a response larger than the limit fails clearly", "[transport]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, std::string(64 * 1024, 'x')));
    ullm::CurlTransport transport({.max_response_bytes = 1024});
    const auto error =
        capture<ullm::TransportError>([&] { (void)transport.send(post(server, "/x")); });
    CHECK(error.code() == "response_too_large");
}

TEST_CASE("a slow consumer applies back-pressure without losing bytes", "[transport]") {
    const Reader reader = any_reader();
    TestServer server;
    std::string wire;
    for (int i = 0; i < 2000; ++i)
        wire += "data: " + std::string(100, static_cast<char>('a' + i % 26)) + "\n\n";
    server.enqueue(ScriptedResponse::sse(wire, 4096));
    ullm::CurlTransport transport({.stream_buffer_bytes = 1024});
    auto stream = open(transport, post(server, "/v1/stream"), reader);
    std::string received;
    std::string chunk;
    while (stream->read(chunk)) {
        received += chunk;
        if (received.size() < 20000) std::this_thread::sleep_for(1ms);
    }
    CHECK(received == wire);
}

TEST_CASE("many concurrent streams share one transport", "[transport]") {
    TestServer server;
    constexpr int stream_count = 64;
    const std::string wire = numbered_events(10);
    server.set_handler(
        [&](const ullm::test::RecordedRequest&) { return ScriptedResponse::sse(wire, 13, 2ms); });
    ullm::CurlTransport transport;
    std::vector<std::unique_ptr<ullm::HttpStream>> streams;
    for (int i = 0; i < stream_count; ++i) {
        streams.push_back(transport.open_stream(post(server, "/v1/stream")));
    }
    // One consumer thread reads all of them in turn: no thread per stream anywhere in ullm.
    int complete = 0;
    for (auto& stream : streams) complete += read_all(*stream) == wire ? 1 : 0;
    CHECK(complete == stream_count);
}

TEST_CASE("a stream that outlives its transport fails instead of hanging", "[transport]") {
    const Reader reader = any_reader();
    TestServer server;
    server.enqueue({.status = 200, .chunks = {"data: a\n\n"}, .stall = true});
    std::unique_ptr<ullm::HttpStream> stream;
    {
        ullm::CurlTransport transport;
        stream = open(transport, post(server, "/v1/stream"), reader);
        std::string chunk;
        REQUIRE(stream->read(chunk));
    }
    std::string chunk;
    const auto error = capture<ullm::TransportError>([&] { (void)stream->read(chunk); });
    CHECK(error.code() == "connection_failed");
}

TEST_CASE("a blocking stream runs on its reader's thread, not on the I/O loop", "[transport]") {
    TestServer server;
    const std::string wire = numbered_events(6);
    server.enqueue(ScriptedResponse::sse(wire, 11, 2ms));
    server.enqueue(ScriptedResponse::sse(wire, 11, 2ms));
    ullm::CurlTransport transport;

    auto on_loop = transport.open_stream(post(server, "/v1/stream"));
    REQUIRE(on_loop->head().status == 200);
    CHECK(transport.active_transfers() == 1);
    CHECK(read_all(*on_loop) == wire);

    auto driven = transport.open_blocking_stream(post(server, "/v1/stream"));
    REQUIRE(driven->head().status == 200);
    CHECK(transport.active_transfers() == 0);
    CHECK(read_all(*driven) == wire);
    // Its handle pair keeps the connection for the next call.
    server.enqueue(ScriptedResponse::json(200, R"({"after":true})"));
    CHECK(transport.send(post(server, "/v1/x")).body == R"({"after":true})");
    CHECK(server.connections_accepted() == 2);
}

TEST_CASE("a blocking stream dropped in the middle leaves its handles fit for the next call",
          "[transport]") {
    TestServer server;
    server.enqueue({.status = 200, .chunks = {"data: a\n\n"}, .stall = true});
    ullm::CurlTransport transport;
    {
        auto stream = transport.open_blocking_stream(post(server, "/v1/stream"));
        std::string chunk;
        REQUIRE(stream->read(chunk));
        CHECK(chunk == "data: a\n\n");
    }
    CHECK(server.wait_for_client_aborts(1, 2s));
    const std::string wire = numbered_events(3);
    server.enqueue(ScriptedResponse::sse(wire, 7));
    auto next = transport.open_blocking_stream(post(server, "/v1/stream"));
    CHECK(read_all(*next) == wire);
}

TEST_CASE("blocking streams on many threads each read their own bytes", "[transport]") {
    TestServer server;
    server.set_handler([](const ullm::test::RecordedRequest& request) {
        std::string wire;
        for (int i = 0; i < 8; ++i) wire += "data: " + request.body + "\n\n";
        return ScriptedResponse::sse(wire, 29, 1ms);
    });
    ullm::CurlTransport transport;
    constexpr int kThreads = 6;
    constexpr int kRounds = 15;
    CHECK(failures_on_threads(kThreads, kRounds, [&](const std::string& body) {
              std::string expected;
              for (int k = 0; k < 8; ++k) expected += "data: " + body + "\n\n";
              auto stream = transport.open_blocking_stream(post(server, "/v1/echo", body));
              return stream->head().status == 200 && read_all(*stream) == expected;
          }) == 0);
    CHECK(server.request_count() == kThreads * kRounds);
    CHECK(server.connections_accepted() <= kThreads);
}

}  // namespace curl_transport_test
