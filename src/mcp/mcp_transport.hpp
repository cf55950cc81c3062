#pragma once

// The seam between McpClient's JSON-RPC and a transport (stdio, Streamable HTTP). Internal to
// src/mcp.

#include <ullm/mcp/mcp_client.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace ullm::detail::mcp {

// What a transport reports: each message the server sent (one JSON text), a request of ours
// that failed on its own (HTTP: an error status, a broken connection; the connection goes on),
// and at most one failure of the whole connection, after which it reports nothing more.
struct TransportHandlers {
    std::function<void(std::string_view message)> on_line;
    std::function<void(std::int64_t request_id, const McpError& failure)> on_request_failed;
    std::function<void(const McpError& failure)> on_failure;
};

class McpTransport {
public:
    virtual ~McpTransport() = default;
    // Starts delivering messages to `handlers`.
    virtual void start(TransportHandlers handlers) = 0;
    // Sends one message (a JSON text without newlines) before `deadline`. Throws McpError.
    // Thread-safe.
    virtual void write_line(const std::string& line,
                            std::chrono::steady_clock::time_point deadline) = 0;
    // Ends the connection and frees everything; idempotent; not from a handler.
    virtual void close() noexcept = 0;
    // The negotiated protocol version, once known (HTTP sends it on every request).
    virtual void set_protocol_version(const std::string& /*version*/) {}
    // The session is initialized: HTTP opens the stream of the server's own messages.
    virtual void session_ready() {}
    // Forgets the session (HTTP: its id, and stops listening), so that the next message
    // (initialize) starts a new one. Not from a handler.
    virtual void reset_session() {}
    // The server's process id, or -1 when it is not a child.
    [[nodiscard]] virtual int pid() const noexcept { return -1; }
    // The end of the server's stderr, when it is a child.
    [[nodiscard]] virtual std::string stderr_tail() const { return {}; }
};

}  // namespace ullm::detail::mcp
