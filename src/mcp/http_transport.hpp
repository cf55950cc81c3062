#pragma once

// The Streamable HTTP transport of MCP (2025-03-26 and later): every message is a POST to one
// endpoint; a request's answer comes back as one JSON body or as an event stream, which a
// thread of its own reads. The session id the server gives with the initialize answer goes on
// every later request, and so does the negotiated protocol version; close() ends the session
// with DELETE. Internal to src/mcp.

#include <ullm/http/curl_transport.hpp>
#include <ullm/mcp/mcp_client.hpp>

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
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

private:
    // One POST whose answer is still being read.
    struct Exchange {
        std::unique_ptr<HttpStream> stream;
        std::thread reader;
        bool finished = false;  // guarded by mutex_
    };

    [[nodiscard]] HttpRequest make_request(const std::string& method, std::string body) const;
    void read_answer(Exchange& exchange, const json& message);
    void deliver_error(const json& message, const std::string& text);
    void reap_finished();

    std::string url_;
    std::map<std::string, std::string> headers_;
    std::size_t max_message_bytes_;
    CurlTransport curl_;
    TransportHandlers handlers_;
    mutable std::mutex mutex_;  // guards everything below
    std::string session_id_;
    std::string protocol_version_;
    std::list<Exchange> exchanges_;
    std::map<std::int64_t, Exchange*> by_request_;  // open answers, by request id
    bool closed_ = false;
};

}  // namespace ullm::detail::mcp
