#pragma once

// The Streamable HTTP transport of MCP (2025-03-26 and later): every message is a POST to one
// endpoint; a request's answer comes back as one JSON body or as an event stream, which a
// thread of its own reads, resuming it with `Last-Event-ID` when it breaks off before the
// answer. Once the session is initialized, a GET stream (a thread of its own, reconnecting)
// carries the server's own notifications and requests. The session id the server gives with the
// initialize answer goes on every later request, and so does the negotiated protocol version;
// close() ends the session with DELETE. Internal to src/mcp.

#include <ullm/http/curl_transport.hpp>
#include <ullm/http/sse_parser.hpp>
#include <ullm/mcp/mcp_client.hpp>

#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "mcp_transport.hpp"

namespace ullm::detail::mcp {

class HttpTransport final : public McpTransport {
public:
    explicit HttpTransport(const McpHttpOptions& options);
    ~HttpTransport() override;
    HttpTransport(const HttpTransport&) = delete;
    HttpTransport& operator=(const HttpTransport&) = delete;

    void start(TransportHandlers handlers) override;
    void write_line(const std::string& line,
                    std::chrono::steady_clock::time_point deadline) override;
    void close() noexcept override;
    void set_protocol_version(const std::string& version) override;
    void session_ready() override;
    void reset_session() override;

private:
    // One POST whose answer is still being read (its stream is replaced when it resumes).
    struct Exchange {
        std::unique_ptr<HttpStream> stream;  // guarded by mutex_ (the reader reads it unlocked)
        std::thread reader;
        std::string session_id;  // the session it was sent in
        bool cancelled = false;  // guarded by mutex_
        bool finished = false;   // guarded by mutex_
        bool awaited = false;    // guarded by mutex_: write_line waits for it to finish
    };

    [[nodiscard]] HttpRequest make_request(const std::string& method, std::string body) const;
    void read_answer(Exchange& exchange, const json& message);
    void read_events(Exchange& exchange, std::optional<std::int64_t> id);
    [[nodiscard]] McpError status_failure(const HttpResponseHead& head, HttpStream& stream,
                                          const std::string& session_id) const;
    // Feeds what `stream` sends to `parser` and each message to the client; `each` sees it
    // first. Throws what the stream throws; an event over the size bound is
    // `mcp_message_too_large`.
    void pump_events(HttpStream& stream, SseParser& parser,
                     const std::function<void(const std::string&)>& each);
    // Opens the GET of `last_event_id`'s stream; null when closing or `stop` says so.
    std::unique_ptr<HttpStream> open_get(const std::string& last_event_id);
    // Waits `delay`, or until closing or `stop()` is true; false when woken that way.
    bool pause(std::chrono::milliseconds delay, const std::function<bool()>& stop);
    void listen(std::uint64_t epoch);
    void stop_listening();
    void reap_finished();

    std::string url_;
    std::map<std::string, std::string> headers_;
    std::size_t max_message_bytes_;
    bool listen_enabled_;
    CurlTransport curl_;
    TransportHandlers handlers_;
    mutable std::mutex mutex_;  // guards everything below
    std::condition_variable wake_;
    std::string session_id_;
    std::string protocol_version_;
    std::list<Exchange> exchanges_;
    std::map<std::int64_t, Exchange*> by_request_;  // open answers, by request id
    std::thread listener_;
    std::unique_ptr<HttpStream> listen_stream_;
    std::uint64_t listen_epoch_ = 0;  // a listener of an older epoch stops
    bool closed_ = false;
};

}  // namespace ullm::detail::mcp
