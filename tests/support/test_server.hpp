#pragma once

/// An in-process HTTP/1.1 server on 127.0.0.1 for the integration tests of ullm's real
/// transport. It plays back scripted responses (whole, chunked, delayed, stalled or cut off)
/// and records every request it receives. POSIX sockets only; nothing leaves the machine.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ullm::test {

/// A list of HTTP header fields: name and value, in order.
using HeaderList = std::vector<std::pair<std::string, std::string>>;

/// One request as the server received it. A plain value; copies are independent.
struct RecordedRequest {
    std::string method;        ///< e.g. "POST".
    std::string target;        ///< Path and query, e.g. "/v1/chat/completions?alt=sse".
    std::string http_version;  ///< e.g. "HTTP/1.1".
    HeaderList headers;        ///< Names lower-cased, values trimmed, in arrival order.
    std::string body;          ///< The body, de-chunked if it was sent chunked.

    /// The first value of the header `name` (compared case-insensitively), or "" if absent.
    [[nodiscard]] std::string header(std::string_view name) const;
    /// Whether a header `name` (compared case-insensitively) was sent, even with an empty value.
    [[nodiscard]] bool has_header(std::string_view name) const;
};

/// What the server sends back for one request. An aggregate: designated initialisers work.
///
/// Framing is the server's job: it writes `Content-Length`, `Transfer-Encoding` and
/// `Connection` itself, and drops those names from `headers`. The body is sent whole with
/// `Content-Length` unless the response streams: it streams (`Transfer-Encoding: chunked`)
/// when `chunks` is non-empty or `stall` or `disconnect` is set; a non-empty `body` is then
/// sent as the first chunk. An `unframed` response has neither framing: its body ends when
/// the connection closes. No body is sent for HEAD requests or 1xx, 204 and 304 statuses.
/// The body and chunks are bytes: anything (NUL, invalid UTF-8, gzip) goes out unchanged.
struct ScriptedResponse {
    int status = 200;    ///< Status code; the reason phrase is chosen by the server.
    HeaderList headers;  ///< Extra headers, e.g. {"Retry-After", "1"}, sent in this order.
    std::string body;    ///< Sent whole with Content-Length when the response doesn't stream.
    std::vector<std::string> chunks;  ///< One HTTP chunk each, sent as soon as it is due.
    std::chrono::milliseconds delay_before_headers{0};  ///< Wait before the status line.
    std::chrono::milliseconds chunk_delay{0};           ///< Wait between two chunks.
    /// After the headers and every chunk, send nothing more and keep the connection open until
    /// the client goes away (counted by `TestServer::client_aborts()`) or the server stops.
    bool stall = false;
    /// After the chunks, close the connection without the terminating zero-length chunk.
    bool disconnect = false;
    /// Send `Connection: close` and close the connection once the response is complete.
    bool close_connection = false;
    /// Announce the `Content-Length` of all of `body` but send only its first
    /// `truncate_body_at` bytes, then close the connection (or, with `stall`, keep it open and
    /// silent until the client goes away): a body cut short, as a crashed upstream leaves it.
    /// The response is then never chunked; `chunks` and `disconnect` are not used.
    std::optional<std::size_t> truncate_body_at;
    /// Send `body` and then `chunks` as raw bytes right after the head, with neither
    /// `Content-Length` nor chunked framing, and `Connection: close`: the body ends when the
    /// server closes the connection (RFC 9112 §6.3), so the client cannot tell a cut from an
    /// end. `chunk_delay` still applies between chunks, and `stall` still holds the
    /// connection open after them; `disconnect` and `truncate_body_at` change nothing more.
    bool unframed = false;

    /// A whole response with `Content-Type: application/json` (unless `headers` names one).
    [[nodiscard]] static ScriptedResponse json(int status, const std::string& body,
                                               HeaderList headers = {});
    /// A `200` event stream (`Content-Type: text/event-stream`, `Cache-Control: no-cache`)
    /// sending `wire_bytes` in chunks of `chunk_size` bytes (all at once if 0), with
    /// `chunk_delay` between chunks.
    [[nodiscard]] static ScriptedResponse sse(std::string wire_bytes, std::size_t chunk_size,
                                              std::chrono::milliseconds chunk_delay = {});
};

/// The bytes of one gzip member (RFC 1952) holding `data` in stored (uncompressed) deflate
/// blocks (RFC 1951 §3.2.4), with its CRC-32 and length: valid gzip that any decoder accepts,
/// made without zlib. Never throws except `std::bad_alloc`.
[[nodiscard]] std::string gzip_stored(std::string_view data);

/// Decides the response to a request when no scripted response is queued. Called on the
/// connection's thread, without the server's lock held; it may call back into the server.
/// If it throws, the client gets a 500 whose JSON body names the exception.
using RequestHandler = std::function<ScriptedResponse(const RecordedRequest&)>;

/// An HTTP/1.1 server on 127.0.0.1 with an ephemeral port, serving each connection on its own
/// thread (keep-alive, pipelining, Content-Length and chunked request bodies,
/// `Expect: 100-continue`).
///
/// Each request is recorded, then answered by the next queued response (FIFO), else by the
/// handler, else with `500 {"error":"no scripted response"}`. Every member function is
/// thread-safe. The destructor stops promptly: it wakes and closes every connection, stalled
/// or blocked in a write, and joins every thread. Not copyable or movable.
class TestServer {
public:
    /// Binds 127.0.0.1:0, listens, and starts accepting on a background thread.
    /// Throws std::system_error if a socket, pipe or thread cannot be created.
    TestServer();
    /// Stops accepting, closes every connection and joins every thread. Never blocks on a
    /// client; only a handler that never returns can delay it.
    ~TestServer();
    TestServer(const TestServer&) = delete;
    TestServer& operator=(const TestServer&) = delete;
    TestServer(TestServer&&) = delete;
    TestServer& operator=(TestServer&&) = delete;

    /// The port the server listens on.
    [[nodiscard]] std::uint16_t port() const noexcept;
    /// "http://127.0.0.1:<port>", without a trailing slash.
    [[nodiscard]] std::string base_url() const;

    /// Appends a response to the queue; each request consumes the oldest one.
    void enqueue(ScriptedResponse response);
    /// Sets the handler used when the queue is empty; an empty function removes it.
    void set_handler(RequestHandler handler);
    /// How many queued responses no request has consumed yet.
    [[nodiscard]] std::size_t pending_responses() const;

    /// Copies of every complete request received so far, in arrival order. A request is
    /// recorded before its response is chosen, so it is visible once the client sees a reply.
    [[nodiscard]] std::vector<RecordedRequest> requests() const;
    /// How many complete requests were received.
    [[nodiscard]] std::size_t request_count() const;
    /// Waits until at least `count` requests were received; false on timeout.
    [[nodiscard]] bool wait_for_requests(std::size_t count,
                                         std::chrono::milliseconds timeout) const;

    /// How many TCP connections were accepted (to assert keep-alive reuse).
    [[nodiscard]] std::size_t connections_accepted() const;
    /// How many accepted connections are still open on the server side.
    [[nodiscard]] std::size_t open_connections() const;
    /// Waits until at most `count` connections are open; false on timeout.
    [[nodiscard]] bool wait_for_open_connections(std::size_t count,
                                                 std::chrono::milliseconds timeout) const;

    /// How many responses the client abandoned: it closed or reset the connection, or a write
    /// failed, before the response was complete (during `delay_before_headers`, between
    /// chunks, or while stalled). Responses cut short by the server stopping don't count.
    /// A departure is noticed while the server waits or when a write fails; a response that
    /// fits in the socket buffers with no delay may complete before the client leaves.
    [[nodiscard]] std::size_t client_aborts() const;
    /// Waits until at least `count` responses were abandoned by the client; false on timeout.
    [[nodiscard]] bool wait_for_client_aborts(std::size_t count,
                                              std::chrono::milliseconds timeout) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ullm::test
