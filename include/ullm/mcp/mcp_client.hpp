#pragma once

/// `McpClient`: a Model Context Protocol client (JSON-RPC 2.0 over stdio, with the server as a
/// child process, or over Streamable HTTP) that negotiates a protocol version and calls the
/// server's tools, resources and prompts. `McpError` is what it throws. See docs/mcp.md.

#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace ullm {

/// A failure of an MCP server or of the connection to it: `mcp_spawn_failed` (the server could
/// not be started), `mcp_server_exited` (it exited, closed its output, or the client was
/// closed; the message holds the exit status and the tail of its stderr),
/// `mcp_protocol_error` (a line that is not JSON-RPC 2.0), `mcp_message_too_large` (a message
/// over `McpStdioOptions::max_message_bytes`), `mcp_timeout` (no answer before the call's
/// deadline; `initialize` included), `mcp_unsupported_protocol_version`,
/// `mcp_server_error` (the server answered a request with a JSON-RPC error: `rpc_code()`), and
/// over HTTP `mcp_connection_failed` (the server could not be reached, or an answer was lost)
/// and `mcp_session_expired` (the server forgot the session, and a new one failed too).
/// Status 502 (504 for a timeout), not retryable.
class McpError : public Error {
public:
    McpError(ErrorCode code, const std::string& message, std::int64_t rpc_code = 0)
        : Error(code, message, code == ErrorCode::mcp_timeout ? 504 : 502, false),
          rpc_code_(rpc_code) {}
    /// The JSON-RPC error code of a `mcp_server_error` (e.g. -32602); 0 otherwise.
    [[nodiscard]] std::int64_t rpc_code() const noexcept { return rpc_code_; }

private:
    std::int64_t rpc_code_;
};

/// The protocol versions `McpClient` speaks, newest first: 2025-11-25, 2025-06-18 and
/// 2025-03-26.
[[nodiscard]] const std::vector<std::string>& mcp_supported_protocol_versions();

/// How to start and talk to an MCP server over stdio.
struct McpStdioOptions {
    /// The program and its arguments; the program is looked up in `PATH` when it has no `/`.
    std::vector<std::string> command;
    /// Variables added to the child's environment. The child inherits only `HOME`, `LOGNAME`,
    /// `PATH`, `SHELL`, `TERM`, `USER` and `LANG` from this process unless
    /// `inherit_environment` is set.
    std::map<std::string, std::string> environment;
    /// Pass this process's whole environment to the child.
    bool inherit_environment = false;
    /// The child's working directory; empty means this process's.
    std::string working_directory;
    /// The name its tools get as a prefix when their names clash (see `mcp_tools`); empty
    /// means the server's `serverInfo.name`.
    std::string alias;
    /// The version offered in `initialize`; the server may answer with another one of
    /// `mcp_supported_protocol_versions()`.
    std::string protocol_version = "2025-06-18";
    /// How long `initialize` may take.
    std::chrono::milliseconds initialize_timeout{10'000};
    /// The longest any request may wait for its answer (a call's own deadline may be sooner).
    std::chrono::milliseconds request_timeout{60'000};
    /// The largest message (one line) accepted from the server, in bytes. A longer one ends
    /// the connection with `mcp_message_too_large`.
    std::size_t max_message_bytes = std::size_t{16} << 20;
    /// How much of the end of the server's stderr is kept for error messages, in bytes.
    std::size_t max_stderr_bytes = std::size_t{64} << 10;
    /// How long `close` waits for the server to exit after closing its stdin, and again after
    /// SIGTERM, before it kills the process group with SIGKILL.
    std::chrono::milliseconds shutdown_grace{1'000};
    /// Called (on the client's reader thread) when the server says its tool list changed.
    /// Must not block or call back into the client.
    std::function<void()> on_tools_changed;
    /// Called (on the client's reader thread) with the method and params of every
    /// notification the server sends (`notifications/message` log lines,
    /// `notifications/resources/updated`, list changes, progress, ...), before ullm acts on
    /// it. Must not block or call back into the client.
    std::function<void(const std::string& method, const json& params)> on_notification;
};

/// How to talk to an MCP server over Streamable HTTP (one endpoint, POST per message, answers
/// as JSON or as an event stream).
struct McpHttpOptions {
    /// The endpoint, e.g. `http://127.0.0.1:3001/mcp`.
    std::string url;
    /// Headers sent with every request (e.g. `Authorization`; their values never appear in
    /// errors).
    std::map<std::string, std::string> headers;
    /// As `McpStdioOptions::alias`.
    std::string alias;
    /// As `McpStdioOptions::protocol_version`.
    std::string protocol_version = "2025-06-18";
    /// As `McpStdioOptions::initialize_timeout`.
    std::chrono::milliseconds initialize_timeout{10'000};
    /// As `McpStdioOptions::request_timeout`.
    std::chrono::milliseconds request_timeout{60'000};
    /// The largest answer (a JSON body, or one event of a stream) accepted, in bytes.
    std::size_t max_message_bytes = std::size_t{16} << 20;
    /// Open the GET stream on which the server sends notifications (`tools/list_changed`,
    /// log lines) and requests of its own, once the session is initialized. It reconnects
    /// (after the server's `retry:`, else 1 s, doubling while it fails, at most 30 s) with
    /// `Last-Event-ID`; a server that answers 405 offers none, and a 4xx ends it.
    bool server_stream = true;
    /// As `McpStdioOptions::on_tools_changed` (sent on the GET stream or an answer's stream).
    std::function<void()> on_tools_changed;
    /// As `McpStdioOptions::on_notification`.
    std::function<void(const std::string& method, const json& params)> on_notification;
};

/// A progress notification of a running request.
struct McpProgress {
    double progress = 0;          ///< Increases with each notification.
    std::optional<double> total;  ///< The total, when the server knows it.
    std::string message;          ///< The server's message, when it sent one.
};

/// Per-request options of `McpClient` calls.
struct McpCallOptions {
    /// Stop waiting for the answer: the server is sent `notifications/cancelled` and the call
    /// throws `CancelledError`.
    std::stop_token stop_token;
    /// When to give up (sending `notifications/cancelled`, then throwing `McpError`
    /// `mcp_timeout`); the sooner of this and `McpStdioOptions::request_timeout` applies.
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    /// Called (on the client's reader thread) for each progress notification of the request;
    /// when set, the request asks for progress. Must not block or call back into the client.
    std::function<void(const McpProgress&)> on_progress;
};

/// A tool as the server lists it.
struct McpToolInfo {
    std::string name;         ///< The server's name of the tool.
    std::string title;        ///< Its `title` (or `annotations.title`), when it has one.
    std::string description;  ///< Its description; may be empty.
    json input_schema;        ///< Its `inputSchema`.
    json output_schema;       ///< Its `outputSchema`, or null.
    json annotations;         ///< Its `annotations` (hints, never to be trusted), or null.
    json raw;                 ///< The whole tool object as listed.
};

/// The result of `tools/call`.
struct McpToolResult {
    /// The content blocks (`text`, `image`, `audio`, `resource_link`, `resource`) as sent.
    json content = json::array();
    /// `structuredContent`, or null.
    json structured_content;
    /// Whether the tool itself failed (`isError`): the content says why.
    bool is_error = false;

    /// The text blocks joined by newlines.
    [[nodiscard]] std::string text() const;
};

/// A connection to one MCP server. A cheap handle: copies share the connection, which closes
/// when the last copy goes (or at `close`). Every member may be called from many threads at
/// once; one reader thread per connection reads the server's output and answers its pings.
class McpClient {
public:
    /// Starts the server (`posix_spawn`, in a process group of its own, with pipes that no
    /// other child inherits), sends `initialize` and `notifications/initialized`. Throws
    /// `McpError` (`mcp_spawn_failed`, `mcp_server_exited`, `mcp_timeout`,
    /// `mcp_protocol_error`, `mcp_message_too_large`, `mcp_unsupported_protocol_version`,
    /// `mcp_server_error`); on failure the child is killed and reaped.
    [[nodiscard]] static McpClient spawn(McpStdioOptions options);

    /// Connects to a server over Streamable HTTP (through libcurl): sends `initialize`, keeps
    /// the `Mcp-Session-Id` it answers with and sends it, with `MCP-Protocol-Version`, on every
    /// later request, and opens the GET stream of the server's own messages
    /// (`McpHttpOptions::server_stream`). Reads each answer as JSON or as an event stream (a
    /// thread per open stream); an answer's stream that ends or breaks off before the answer
    /// is resumed with `Last-Event-ID` (up to 5 times), and the stream of a cancelled request
    /// is closed. A request refused because the server no longer knows the session (404, or
    /// 400 naming the session) starts a new session and is sent once more. `close` ends the
    /// session with DELETE. Failures of one request: an HTTP error status is
    /// `mcp_server_error` (`rpc_code()` from a JSON-RPC error body, else 0);
    /// `mcp_connection_failed` when the server cannot be reached or the answer is lost;
    /// `mcp_session_expired` when the new session is refused too; the client stays usable.
    /// Throws like `spawn`, and `mcp_connection_failed`.
    [[nodiscard]] static McpClient connect(const McpHttpOptions& options);

    /// The negotiated protocol version.
    [[nodiscard]] const std::string& protocol_version() const noexcept;
    /// The server's `serverInfo` (`name`, `version`, ...).
    [[nodiscard]] const json& server_info() const noexcept;
    /// The server's capabilities.
    [[nodiscard]] const json& server_capabilities() const noexcept;
    /// The server's `instructions`, or empty.
    [[nodiscard]] const std::string& instructions() const noexcept;
    /// The alias of `McpStdioOptions`, or else `serverInfo.name`.
    [[nodiscard]] const std::string& alias() const noexcept;
    /// The server's process id.
    [[nodiscard]] int pid() const noexcept;
    /// The last bytes the server wrote to its stderr.
    [[nodiscard]] std::string stderr_tail() const;

    /// Sends a request and waits for its result object. Throws `McpError`, or
    /// `CancelledError` when `options.stop_token` was signalled.
    [[nodiscard]] json request(const std::string& method, const json& params = json::object(),
                               const McpCallOptions& options = {});
    /// Sends a notification. Throws `McpError` when the connection is closed.
    void notify(const std::string& method, json params = json::object());

    /// Every tool of the server (`tools/list`, following `nextCursor` up to 1000 pages and
    /// 100,000 tools; a repeated cursor is an `mcp_protocol_error`). Clears
    /// `tools_changed()`. Throws like `request`.
    [[nodiscard]] std::vector<McpToolInfo> list_tools(const McpCallOptions& options = {});
    /// Whether the server said its tool list changed since the last `list_tools`.
    [[nodiscard]] bool tools_changed() const noexcept;
    /// Calls a tool (`tools/call`). A failure of the tool itself is a result with `is_error`;
    /// throws like `request`.
    [[nodiscard]] McpToolResult call_tool(const std::string& name, json arguments = json::object(),
                                          const McpCallOptions& options = {});

    /// Every resource (`resources/list`, paginated like `list_tools`).
    [[nodiscard]] json list_resources(const McpCallOptions& options = {});
    /// `resources/read` of `uri`: the result object (`contents`).
    [[nodiscard]] json read_resource(const std::string& uri, const McpCallOptions& options = {});
    /// Every prompt (`prompts/list`, paginated like `list_tools`).
    [[nodiscard]] json list_prompts(const McpCallOptions& options = {});
    /// `prompts/get` of `name` with string arguments: the result object (`messages`).
    [[nodiscard]] json get_prompt(const std::string& name,
                                  const std::map<std::string, std::string>& arguments = {},
                                  const McpCallOptions& options = {});

    /// Ends the connection: fails waiting calls with `mcp_server_exited`, closes the server's
    /// stdin, waits `shutdown_grace`, sends SIGTERM to its process group, waits again, sends
    /// SIGKILL, and reaps the child; every descriptor is closed. Idempotent; does not throw.
    void close() noexcept;

private:
    struct State;
    explicit McpClient(std::shared_ptr<State> state) noexcept : state_(std::move(state)) {}
    std::shared_ptr<State> state_;
};

}  // namespace ullm
