#include "support/test_server.hpp"

#include "support/catch.hpp"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace test_server_test {

namespace {

using namespace std::chrono_literals;
using ullm::test::RecordedRequest;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;
using Clock = std::chrono::steady_clock;

constexpr auto patience = 5s;  // Upper bound for anything that should happen "soon".

/// Throws when a raw exchange goes wrong. Catch2 v2 assertions aren't thread-safe, so the
/// client below reports through exceptions and stays usable on any thread.
void ensure(bool condition, const char* what) {
    if (!condition) throw std::runtime_error(std::string("raw client: ") + what);
}

/// A response as parsed by RawClient.
struct RawResponse {
    int status = 0;
    std::vector<std::pair<std::string, std::string>> headers;  // Names lower-cased.
    std::string body;
    std::vector<std::string> chunks;  // The chunks as framed on the wire, when chunked.
    bool chunked = false;
    bool complete = false;  // Content-Length satisfied, or the terminating chunk seen.

    std::string header(std::string_view name) const {
        for (const auto& [key, value] : headers) {
            if (key == name) return value;
        }
        return {};
    }
};

/// A blocking HTTP client on a raw socket, so these tests depend on nothing but POSIX.
class RawClient {
public:
    explicit RawClient(std::uint16_t port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        ensure(fd_ >= 0, "socket");
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(port);
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ensure(::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0,
               "connect");
    }
    ~RawClient() { close(); }
    RawClient(const RawClient&) = delete;
    RawClient& operator=(const RawClient&) = delete;

    void send(std::string_view data) {
        while (!data.empty()) {
            const ssize_t sent = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
            if (sent < 0 && errno == EINTR) continue;
            ensure(sent > 0, "send");
            data.remove_prefix(static_cast<std::size_t>(sent));
        }
    }

    /// Everything up to and including `delimiter`, or nullopt on EOF or timeout.
    std::optional<std::string> read_until(std::string_view delimiter,
                                          Clock::duration timeout = patience) {
        const auto deadline = Clock::now() + timeout;
        for (;;) {
            const auto at = pending_.find(delimiter);
            if (at != std::string::npos) return take(at + delimiter.size());
            if (!receive(deadline)) return std::nullopt;
        }
    }

    /// Exactly `count` bytes, or nullopt on EOF or timeout.
    std::optional<std::string> read_exact(std::size_t count, Clock::duration timeout = patience) {
        const auto deadline = Clock::now() + timeout;
        while (pending_.size() < count) {
            if (!receive(deadline)) return std::nullopt;
        }
        return take(count);
    }

    /// Whether the server closed the connection within `timeout` (bytes before EOF are kept).
    bool closed_by_server(Clock::duration timeout = patience) {
        const auto deadline = Clock::now() + timeout;
        while (!eof_) {
            if (!receive(deadline)) break;
        }
        return eof_;
    }

    /// Whether no byte and no EOF arrives within `quiet`.
    bool silent_for(Clock::duration quiet) {
        if (!pending_.empty() || eof_) return false;
        return !receive(Clock::now() + quiet) && !eof_ && pending_.empty();
    }

    /// Reads one response: the head, then a body framed by Content-Length or chunks.
    RawResponse read_response(bool head_request = false) {
        RawResponse response;
        const auto head = read_until("\r\n\r\n");
        ensure(head.has_value(), "no response head");
        std::string_view text(*head);
        const auto line_end = text.find("\r\n");
        const std::string_view status_line = text.substr(0, line_end);
        ensure(status_line.substr(0, 9) == "HTTP/1.1 ", "bad status line");
        const auto status_text = status_line.substr(9, 3);
        std::from_chars(status_text.data(), status_text.data() + 3, response.status);
        text.remove_prefix(line_end + 2);
        while (text.size() > 2) {
            const auto end = text.find("\r\n");
            const auto line = text.substr(0, end);
            const auto colon = line.find(':');
            ensure(colon != std::string_view::npos, "bad header line");
            std::string name(line.substr(0, colon));
            for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            auto value = line.substr(colon + 1);
            while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
            response.headers.emplace_back(std::move(name), std::string(value));
            text.remove_prefix(end + 2);
        }
        if (head_request || response.status == 204 || response.status / 100 == 1) {
            response.complete = true;
            return response;
        }
        if (response.header("transfer-encoding") == "chunked") {
            response.chunked = true;
            for (;;) {
                const auto size_line = read_until("\r\n");
                if (!size_line) return response;
                std::size_t size = 0;
                std::from_chars(size_line->data(), size_line->data() + size_line->size(), size, 16);
                if (size == 0) {
                    response.complete = read_until("\r\n").has_value();
                    return response;
                }
                const auto data = read_exact(size + 2);
                if (!data) return response;
                ensure(data->substr(size) == "\r\n", "bad chunk end");
                response.chunks.push_back(data->substr(0, size));
                response.body += response.chunks.back();
            }
        }
        const auto length_text = response.header("content-length");
        ensure(!length_text.empty(), "no framing");
        std::size_t length = 0;
        std::from_chars(length_text.data(), length_text.data() + length_text.size(), length);
        const auto body = read_exact(length);
        if (body) {
            response.body = *body;
            response.complete = true;
        }
        return response;
    }

    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_ = -1;
    std::string pending_;
    bool eof_ = false;

    std::string take(std::size_t count) {
        std::string out = pending_.substr(0, count);
        pending_.erase(0, count);
        return out;
    }

    /// Receives some bytes before `deadline`; false on EOF, error or timeout.
    bool receive(Clock::time_point deadline) {
        if (eof_) return false;
        for (;;) {
            const auto left =
                std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
            if (left <= 0) return false;
            pollfd fds{fd_, POLLIN, 0};
            const int ready = ::poll(&fds, 1, static_cast<int>(left));
            if (ready < 0 && errno == EINTR) continue;
            if (ready <= 0) return false;
            char block[4096];
            const ssize_t got = ::recv(fd_, block, sizeof block, 0);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                eof_ = true;
                return false;
            }
            pending_.append(block, static_cast<std::size_t>(got));
            return true;
        }
    }
};

std::string post(std::string_view target, std::string_view body,
                 std::string_view extra_headers = "") {
    return std::string("POST ") + std::string(target) +
           " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
           std::string(extra_headers) + "Content-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + std::string(body);
}

std::string get(std::string_view target, std::string_view extra_headers = "") {
    return std::string("GET ") + std::string(target) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
           std::string(extra_headers) + "\r\n";
}

}  // namespace

TEST_CASE("the test server listens on an ephemeral loopback port", "[test_server]") {
    const TestServer server;
    CHECK(server.port() != 0);
    CHECK(server.base_url() == "http://127.0.0.1:" + std::to_string(server.port()));
    CHECK(server.request_count() == 0);
    CHECK(server.connections_accepted() == 0);
    CHECK_FALSE(server.wait_for_requests(1, 20ms));
}

TEST_CASE("a JSON response is sent whole with its content length", "[test_server]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(429, R"({"error":"slow down"})", {{"Retry-After", "1"}}));
    RawClient client(server.port());
    client.send(post("/v1/chat/completions?alt=sse", R"({"model":"m"})"));
    const RawResponse response = client.read_response();
    CHECK(response.status == 429);
    CHECK(response.complete);
    CHECK_FALSE(response.chunked);
    CHECK(response.header("content-type") == "application/json");
    CHECK(response.header("retry-after") == "1");
    CHECK(response.header("content-length") == "21");
    CHECK(response.body == R"({"error":"slow down"})");

    const auto requests = server.requests();
    REQUIRE(requests.size() == 1);
    CHECK(requests[0].method == "POST");
    CHECK(requests[0].target == "/v1/chat/completions?alt=sse");
    CHECK(requests[0].http_version == "HTTP/1.1");
    CHECK(requests[0].body == R"({"model":"m"})");
    CHECK(server.pending_responses() == 0);
}

TEST_CASE("keep-alive serves several requests on one connection", "[test_server]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, R"({"n":1})"));
    server.enqueue(ScriptedResponse::json(200, R"({"n":2})"));
    RawClient client(server.port());
    client.send(post("/first", "a"));
    CHECK(client.read_response().body == R"({"n":1})");
    client.send(post("/second", "bb"));
    const RawResponse second = client.read_response();
    CHECK(second.body == R"({"n":2})");
    CHECK(second.header("connection").empty());
    CHECK(server.request_count() == 2);
    CHECK(server.connections_accepted() == 1);
    CHECK(server.open_connections() == 1);
    const auto requests = server.requests();
    CHECK(requests[0].target == "/first");
    CHECK(requests[1].target == "/second");
    CHECK(requests[1].body == "bb");
}

TEST_CASE("pipelined requests are answered in order", "[test_server]") {
    TestServer server;
    server.set_handler([](const RecordedRequest& request) {
        return ScriptedResponse::json(200, "\"" + request.target + "\"");
    });
    RawClient client(server.port());
    client.send(get("/a") + post("/b", "xyz") + get("/c"));
    CHECK(client.read_response().body == "\"/a\"");
    CHECK(client.read_response().body == "\"/b\"");
    CHECK(client.read_response().body == "\"/c\"");
    CHECK(server.requests()[1].body == "xyz");
    CHECK(server.connections_accepted() == 1);
}

TEST_CASE("an SSE response arrives in the scripted chunks", "[test_server]") {
    TestServer server;
    const std::string wire = "data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n";
    const auto response = ScriptedResponse::sse(wire, 7, 20ms);
    REQUIRE(response.chunks.size() == (wire.size() + 6) / 7);
    server.enqueue(response);
    RawClient client(server.port());
    const auto started = Clock::now();
    client.send(post("/stream", "{}"));
    const RawResponse received = client.read_response();
    const auto elapsed = Clock::now() - started;
    CHECK(received.status == 200);
    CHECK(received.chunked);
    CHECK(received.complete);
    CHECK(received.header("content-type") == "text/event-stream");
    CHECK(received.header("content-length").empty());
    CHECK(received.chunks == response.chunks);
    CHECK(received.body == wire);
    CHECK(elapsed >= 20ms * (response.chunks.size() - 1));
}

TEST_CASE("sse without a chunk size sends the stream as one chunk", "[test_server]") {
    const auto response = ScriptedResponse::sse("data: x\n\n", 0);
    REQUIRE(response.chunks.size() == 1);
    CHECK(response.chunks[0] == "data: x\n\n");
}

TEST_CASE("a chunked request body is recorded de-chunked", "[test_server]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, "{}"));
    RawClient client(server.port());
    client.send(
        "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5\r\nhello\r\n"
        "1;ext=1\r\n \r\n"
        "C\r\nworld, again\r\n"
        "0\r\nX-Trailer: yes\r\n\r\n");
    CHECK(client.read_response().status == 200);
    const auto requests = server.requests();
    REQUIRE(requests.size() == 1);
    CHECK(requests[0].body == "hello world, again");
    CHECK(requests[0].header("transfer-encoding") == "chunked");
}

TEST_CASE("request headers are recorded lower-cased, in order, and looked up case-insensitively",
          "[test_server]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, "{}"));
    RawClient client(server.port());
    client.send(
        "GET /h HTTP/1.1\r\nHost: x\r\nX-API-Key:   secret  \r\nAccept: text/event-stream\r\n"
        "X-Multi: one\r\nx-multi: two\r\nX-Empty:\r\n\r\n");
    CHECK(client.read_response().status == 200);
    const RecordedRequest request = server.requests().at(0);
    const std::vector<std::pair<std::string, std::string>> expected = {
        {"host", "x"},      {"x-api-key", "secret"}, {"accept", "text/event-stream"},
        {"x-multi", "one"}, {"x-multi", "two"},      {"x-empty", ""}};
    CHECK(request.headers == expected);
    CHECK(request.header("X-Api-KEY") == "secret");
    CHECK(request.header("x-multi") == "one");
    CHECK(request.header("missing").empty());
    CHECK(request.has_header("X-EMPTY"));
    CHECK_FALSE(request.has_header("missing"));
    CHECK(request.body.empty());
}

TEST_CASE("responses come from the FIFO queue, then the handler, then a 500", "[test_server]") {
    TestServer server;
    RawClient client(server.port());

    client.send(get("/nothing"));
    const RawResponse unscripted = client.read_response();
    CHECK(unscripted.status == 500);
    CHECK(unscripted.body == R"({"error":"no scripted response"})");

    server.enqueue(ScriptedResponse::json(201, R"("first")"));
    server.enqueue(ScriptedResponse::json(202, R"("second")"));
    server.set_handler([](const RecordedRequest& request) {
        return ScriptedResponse::json(200, "\"handled " + request.target + "\"");
    });
    CHECK(server.pending_responses() == 2);
    client.send(get("/1"));
    CHECK(client.read_response().status == 201);
    client.send(get("/2"));
    CHECK(client.read_response().status == 202);
    client.send(get("/3"));
    const RawResponse handled = client.read_response();
    CHECK(handled.status == 200);
    CHECK(handled.body == R"("handled /3")");

    server.enqueue(ScriptedResponse::json(203, "{}"));
    client.send(get("/4"));
    CHECK(client.read_response().status == 203);

    server.set_handler(nullptr);
    client.send(get("/5"));
    CHECK(client.read_response().status == 500);
    CHECK(server.request_count() == 6);
}

TEST_CASE("a handler that throws produces a 500 naming the exception", "[test_server]") {
    TestServer server;
    server.set_handler(
        [](const RecordedRequest&) -> ScriptedResponse { throw std::runtime_error("boom"); });
    RawClient client(server.port());
    client.send(get("/"));
    const RawResponse response = client.read_response();
    CHECK(response.status == 500);
    CHECK(response.body == R"({"error":"handler threw: boom"})");
}

TEST_CASE("a disconnect closes the stream without the terminating chunk", "[test_server]") {
    TestServer server;
    ScriptedResponse response = ScriptedResponse::sse("data: 1\n\ndata: 2\n\n", 9);
    response.disconnect = true;
    server.enqueue(response);
    RawClient client(server.port());
    client.send(post("/stream", "{}"));
    const RawResponse received = client.read_response();
    CHECK(received.chunked);
    CHECK_FALSE(received.complete);
    CHECK(received.chunks == response.chunks);
    CHECK(client.closed_by_server());
    CHECK(server.wait_for_open_connections(0, patience));
    CHECK(server.client_aborts() == 0);
}

TEST_CASE("a stall holds the connection until the client goes away", "[test_server]") {
    TestServer server;
    ScriptedResponse response = ScriptedResponse::sse("data: 1\n\n", 0);
    response.stall = true;
    server.enqueue(response);
    RawClient client(server.port());
    client.send(post("/stream", "{}"));
    const auto head = client.read_until("\r\n\r\n");
    REQUIRE(head.has_value());
    CHECK(head->find("Transfer-Encoding: chunked") != std::string::npos);
    CHECK(client.read_until("data: 1\n\n\r\n").has_value());
    CHECK(client.silent_for(200ms));
    CHECK(server.open_connections() == 1);
    CHECK(server.client_aborts() == 0);

    client.close();
    CHECK(server.wait_for_client_aborts(1, patience));
    CHECK(server.wait_for_open_connections(0, patience));
    CHECK(server.client_aborts() == 1);
}

TEST_CASE("a slow stream notices a client that goes away between chunks", "[test_server]") {
    TestServer server;
    server.enqueue(ScriptedResponse::sse("aaaabbbbccccdddd", 4, 10s));
    RawClient client(server.port());
    client.send(post("/stream", "{}"));
    CHECK(client.read_until("aaaa\r\n").has_value());
    const auto closed_at = Clock::now();
    client.close();
    CHECK(server.wait_for_client_aborts(1, patience));
    CHECK(Clock::now() - closed_at < 2s);
    CHECK(server.wait_for_open_connections(0, patience));
}

TEST_CASE("a stall without chunks still sends the head", "[test_server]") {
    TestServer server;
    ScriptedResponse response;
    response.stall = true;
    server.enqueue(response);
    RawClient client(server.port());
    client.send(get("/"));
    const auto head = client.read_until("\r\n\r\n");
    REQUIRE(head.has_value());
    CHECK(head->rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    CHECK(client.silent_for(100ms));
}

TEST_CASE("truncate_body_at announces the whole body, sends its start and closes",
          "[test_server]") {
    TestServer server;
    ScriptedResponse response = ScriptedResponse::json(200, R"({"id":"one","text":"two"})");
    response.truncate_body_at = 9;
    server.enqueue(response);
    RawClient client(server.port());
    client.send(post("/v1/x", "{}"));
    const auto head = client.read_until("\r\n\r\n");
    REQUIRE(head.has_value());
    CHECK(head->find("Content-Length: 25\r\n") != std::string::npos);
    CHECK(head->find("Transfer-Encoding") == std::string::npos);
    CHECK(client.read_exact(9) == std::optional<std::string>(R"({"id":"on)"));
    CHECK(client.closed_by_server());
    CHECK(server.wait_for_open_connections(0, patience));
    CHECK(server.client_aborts() == 0);
}

TEST_CASE("truncate_body_at with stall holds the cut body open until the client leaves",
          "[test_server]") {
    TestServer server;
    ScriptedResponse response = ScriptedResponse::json(200, R"({"id":"one"})");
    response.truncate_body_at = 4;
    response.stall = true;
    response.chunks = {"ignored"};
    server.enqueue(response);
    RawClient client(server.port());
    client.send(post("/v1/x", "{}"));
    const auto head = client.read_until("\r\n\r\n");
    REQUIRE(head.has_value());
    CHECK(head->find("Content-Length: 12\r\n") != std::string::npos);
    CHECK(client.read_exact(4) == std::optional<std::string>(R"({"id)"));
    CHECK(client.silent_for(100ms));
    client.close();
    CHECK(server.wait_for_client_aborts(1, patience));
    CHECK(server.wait_for_open_connections(0, patience));
}

TEST_CASE("an unframed response sends raw bytes after the head and ends with the close",
          "[test_server]") {
    TestServer server;
    const std::string raw("data: {\"a\":1}\0junk\xff\r\n", 21);
    server.enqueue({.status = 200,
                    .headers = {{"Content-Type", "text/event-stream"}},
                    .body = raw,
                    .chunks = {"data: 2"},
                    .chunk_delay = 20ms,
                    .unframed = true});
    RawClient client(server.port());
    client.send(post("/stream", "{}"));
    const auto head = client.read_until("\r\n\r\n");
    REQUIRE(head.has_value());
    CHECK(head->find("Content-Length") == std::string::npos);
    CHECK(head->find("Transfer-Encoding") == std::string::npos);
    CHECK(head->find("Connection: close\r\n") != std::string::npos);
    CHECK(client.read_exact(raw.size() + 7) == std::optional<std::string>(raw + "data: 2"));
    CHECK(client.closed_by_server());
    CHECK(server.wait_for_open_connections(0, patience));
    CHECK(server.client_aborts() == 0);
}

TEST_CASE("an unframed stall keeps the raw body open until the client leaves", "[test_server]") {
    TestServer server;
    server.enqueue({.status = 200, .body = "data: 1\n\n", .stall = true, .unframed = true});
    RawClient client(server.port());
    client.send(post("/stream", "{}"));
    REQUIRE(client.read_until("\r\n\r\n").has_value());
    CHECK(client.read_exact(9) == std::optional<std::string>("data: 1\n\n"));
    CHECK(client.silent_for(100ms));
    client.close();
    CHECK(server.wait_for_client_aborts(1, patience));
}

TEST_CASE("gzip_stored makes a gzip member of stored deflate blocks", "[test_server]") {
    using ullm::test::gzip_stored;
    // Header, one final stored block (LEN, NLEN), the data, CRC-32 and ISIZE, little-endian.
    CHECK(gzip_stored("hello") == std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
                                              "\x01\x05\x00\xfa\xff"
                                              "hello"
                                              "\x86\xa6\x10\x36"
                                              "\x05\x00\x00\x00",
                                              28));
    // The check value of this CRC-32 (ISO-HDLC, as gzip uses): "123456789" -> 0xCBF43926.
    const std::string check = gzip_stored("123456789");
    CHECK(check.substr(check.size() - 8, 4) == "\x26\x39\xf4\xcb");
    // Empty input: one final empty block.
    CHECK(gzip_stored("").substr(10) ==
          std::string("\x01\x00\x00\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00", 13));
    // More than 65,535 bytes take several blocks, each at most 65,535 long.
    const std::string big(70000, 'z');
    const std::string member = gzip_stored(big);
    REQUIRE(member.size() == 10 + 5 + 65535 + 5 + (70000 - 65535) + 8);
    CHECK(member.substr(10, 5) == std::string("\x00\xff\xff\x00\x00", 5));
    CHECK(member.substr(10 + 5 + 65535, 5) == std::string("\x01\x71\x11\x8e\xee", 5));
    CHECK(member.substr(member.size() - 4) == std::string("\x70\x11\x01\x00", 4));
}

TEST_CASE("the destructor returns promptly with a stalled connection open", "[test_server]") {
    auto server = std::make_unique<TestServer>();
    ScriptedResponse response = ScriptedResponse::sse("data: 1\n\n", 0);
    response.stall = true;
    server->enqueue(response);
    RawClient stalled(server->port());
    stalled.send(post("/stream", "{}"));
    REQUIRE(stalled.read_until("data: 1\n\n\r\n").has_value());
    RawClient idle(server->port());  // A keep-alive connection waiting for its first request.
    REQUIRE(server->wait_for_requests(1, patience));

    const auto started = Clock::now();
    server.reset();
    CHECK(Clock::now() - started < 1s);
    CHECK(stalled.closed_by_server(1s));
    CHECK(idle.closed_by_server(1s));
}

TEST_CASE("the destructor returns promptly while a write is blocked on a client that doesn't read",
          "[test_server]") {
    auto server = std::make_unique<TestServer>();
    server->enqueue(ScriptedResponse::json(200, std::string(std::size_t{32} * 1024 * 1024, 'x')));
    RawClient client(server->port());
    client.send(get("/big"));
    REQUIRE(server->wait_for_requests(1, patience));
    REQUIRE(client.read_until("\r\n\r\n").has_value());
    std::this_thread::sleep_for(50ms);  // Let the server fill the socket buffers.

    const auto started = Clock::now();
    server.reset();
    CHECK(Clock::now() - started < 1s);
}

TEST_CASE("Expect: 100-continue is answered before the body is sent", "[test_server]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, R"({"ok":true})"));
    RawClient client(server.port());
    const std::string body(2048, 'b');
    client.send("POST /big HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n");
    const auto interim = client.read_until("\r\n\r\n");
    REQUIRE(interim.has_value());
    CHECK(*interim == "HTTP/1.1 100 Continue\r\n\r\n");
    client.send(body);
    const RawResponse response = client.read_response();
    CHECK(response.status == 200);
    CHECK(response.body == R"({"ok":true})");
    CHECK(server.requests().at(0).body == body);
    CHECK(server.requests().at(0).header("expect") == "100-continue");
}

TEST_CASE("close_connection sends Connection: close and closes", "[test_server]") {
    TestServer server;
    ScriptedResponse response = ScriptedResponse::json(503, "{}");
    response.close_connection = true;
    server.enqueue(response);
    server.enqueue(ScriptedResponse::json(200, "{}"));
    {
        RawClient client(server.port());
        client.send(get("/"));
        const RawResponse received = client.read_response();
        CHECK(received.status == 503);
        CHECK(received.header("connection") == "close");
        CHECK(client.closed_by_server());
    }
    RawClient again(server.port());
    again.send(get("/"));
    CHECK(again.read_response().status == 200);
    CHECK(server.connections_accepted() == 2);
}

TEST_CASE("a client's Connection: close is honoured", "[test_server]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, "{}"));
    RawClient client(server.port());
    client.send(get("/", "Connection: close\r\n"));
    const RawResponse received = client.read_response();
    CHECK(received.header("connection") == "close");
    CHECK(client.closed_by_server());
}

TEST_CASE("delay_before_headers holds the response back", "[test_server]") {
    TestServer server;
    ScriptedResponse response = ScriptedResponse::json(200, "{}");
    response.delay_before_headers = 150ms;
    server.enqueue(response);
    RawClient client(server.port());
    const auto started = Clock::now();
    client.send(get("/"));
    CHECK(client.read_response().status == 200);
    CHECK(Clock::now() - started >= 150ms);
}

TEST_CASE("framing headers in a script are replaced by the server's own", "[test_server]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, "{}", {{"Content-Length", "999"}, {"X-Id", "7"}}));
    RawClient client(server.port());
    client.send(get("/"));
    const RawResponse received = client.read_response();
    CHECK(received.header("content-length") == "2");
    CHECK(received.header("x-id") == "7");
    CHECK(received.body == "{}");
}

TEST_CASE("HEAD and 204 responses carry no body", "[test_server]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, "abc"));
    server.enqueue(ScriptedResponse::json(204, ""));
    server.enqueue(ScriptedResponse::json(200, "after"));
    RawClient client(server.port());
    client.send("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
    const RawResponse head = client.read_response(true);
    CHECK(head.header("content-length") == "3");
    client.send(get("/"));
    const RawResponse empty = client.read_response();
    CHECK(empty.status == 204);
    CHECK(empty.header("content-length").empty());
    client.send(get("/"));
    CHECK(client.read_response().body == "after");  // Nothing stray was left on the wire.
}

TEST_CASE("a malformed request gets a 400 and the connection closes", "[test_server]") {
    TestServer server;
    RawClient client(server.port());
    client.send("this is not http\r\n\r\n");
    CHECK(client.read_response().status == 400);
    CHECK(client.closed_by_server());
    CHECK(server.request_count() == 0);

    RawClient bad_length(server.port());
    bad_length.send("POST / HTTP/1.1\r\nContent-Length: 12x\r\n\r\n");
    CHECK(bad_length.read_response().status == 400);
}

TEST_CASE("a client that leaves mid-request is forgotten quietly", "[test_server]") {
    TestServer server;
    {
        RawClient client(server.port());
        client.send("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\npartial");
    }
    CHECK(server.wait_for_open_connections(0, patience));
    CHECK(server.request_count() == 0);
    CHECK(server.client_aborts() == 0);
}

TEST_CASE("concurrent clients are served in parallel", "[test_server]") {
    TestServer server;
    std::atomic<int> handled{0};
    server.set_handler([&](const RecordedRequest& request) {
        ++handled;
        ScriptedResponse response = ScriptedResponse::sse(request.body, 2, 1ms);
        return response;
    });
    constexpr int clients = 8;
    constexpr int requests_each = 5;
    std::vector<std::thread> threads;
    threads.reserve(clients);
    std::atomic<int> matched{0};
    for (int c = 0; c < clients; ++c) {
        threads.emplace_back([&, c] {
            try {
                RawClient client(server.port());
                for (int r = 0; r < requests_each; ++r) {
                    const std::string body =
                        "client " + std::to_string(c) + " request " + std::to_string(r);
                    client.send(post("/p", body));
                    if (client.read_response().body == body) ++matched;
                }
            } catch (const std::exception&) {
                // Counted as a mismatch below.
            }
        });
    }
    for (auto& thread : threads) thread.join();
    CHECK(matched == clients * requests_each);
    CHECK(handled == clients * requests_each);
    CHECK(server.request_count() == static_cast<std::size_t>(clients * requests_each));
    CHECK(server.connections_accepted() == static_cast<std::size_t>(clients));
}

}  // namespace test_server_test
