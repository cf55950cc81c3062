#include <ullm/mcp/mcp_client.hpp>

#include <ullm/version.hpp>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <set>
#include <utility>

#include "http_transport.hpp"
#include "stdio_process.hpp"

namespace ullm {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t max_list_pages = 1000;
constexpr std::size_t max_listed_items = 100'000;
constexpr std::size_t max_quoted_bytes = 200;

std::string dump_line(const json& message) {
    return message.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string excerpt(std::string_view text) {
    std::string shown(text.substr(0, max_quoted_bytes));
    if (text.size() > max_quoted_bytes) shown += "...";
    return dump_line(json(std::move(shown)));
}

std::string string_field(const json& object, const char* key) {
    const auto found = object.find(key);
    return found != object.end() && found->is_string() ? found->get<std::string>() : std::string();
}

}  // namespace

const std::vector<std::string>& mcp_supported_protocol_versions() {
    static const std::vector<std::string> versions = {"2025-11-25", "2025-06-18", "2025-03-26"};
    return versions;
}

std::string McpToolResult::text() const {
    std::string out;
    for (const auto& block : content) {
        if (!block.is_object() || block.value("type", "") != "text") continue;
        if (!out.empty()) out += "\n";
        out += string_field(block, "text");
    }
    return out;
}

struct McpClient::State {
    // An error to throw, kept as plain values: an exception object is never shared between
    // threads (its message string may be reference-counted), each throw makes a fresh one.
    struct Failure {
        ErrorCode code;
        std::string message;
        std::int64_t rpc_code = 0;
        explicit Failure(const McpError& error)
            : code(error.error_code()), message(error.message()), rpc_code(error.rpc_code()) {}
        [[noreturn]] void raise() const { throw McpError(code, message, rpc_code); }
    };

    // A request waiting for its answer.
    struct Pending {
        bool done = false;
        json result;
        std::optional<Failure> error;
        std::function<void(const McpProgress&)> on_progress;
    };

    McpStdioOptions options;
    std::unique_ptr<detail::mcp::McpTransport> transport;
    std::string protocol_version;
    json server_info = json::object();
    json server_capabilities = json::object();
    std::string instructions;
    std::string alias;

    std::mutex mutex;  // guards everything below
    std::condition_variable answered;
    std::int64_t next_id = 1;
    std::map<std::int64_t, std::shared_ptr<Pending>> pending;
    std::optional<Failure> failure;  // set once: every later request fails with it
    bool tools_changed = false;
    std::uint64_t session_generation = 0;  // one more for each session started anew
    bool renewing = false;                 // a new session is being started: requests wait

    std::mutex renew_mutex;  // one renewal of the session at a time

    State(McpStdioOptions client_options, std::unique_ptr<detail::mcp::McpTransport> connection)
        : options(std::move(client_options)), transport(std::move(connection)) {}

    ~State() { close(); }
    State(const State&) = delete;
    State& operator=(const State&) = delete;

    void start() {
        transport->start(
            {.on_line = [this](std::string_view line) { on_line(line); },
             .on_request_failed = [this](std::int64_t id,
                                         const McpError& error) { fail_request(id, error); },
             .on_failure = [this](const McpError& error) { fail(error); }});
    }

    void close() noexcept {
        fail(McpError(ErrorCode::mcp_server_exited, "the MCP client was closed"));
        transport->close();
    }

    // Fails every waiting request, and every later one, with `error` (the first failure wins).
    void fail(const McpError& error) {
        std::lock_guard lock(mutex);
        if (!failure) failure.emplace(error);
        for (auto& [id, waiting] : pending) {
            waiting->error = *failure;
            waiting->done = true;
        }
        pending.clear();
        answered.notify_all();
    }

    // Fails one waiting request (its message could not be delivered, or its answer was lost).
    void fail_request(std::int64_t id, const McpError& error) {
        std::lock_guard lock(mutex);
        const auto found = pending.find(id);
        if (found == pending.end()) return;
        found->second->error.emplace(error);
        found->second->done = true;
        pending.erase(found);
        answered.notify_all();
    }

    void protocol_error(const std::string& what, std::string_view line) {
        fail(McpError(ErrorCode::mcp_protocol_error,
                      "the MCP server broke JSON-RPC 2.0: " + what + ": " + excerpt(line)));
    }

    void on_line(std::string_view line) {
        json message;
        try {
            message = json::parse(line);
        } catch (const json::exception&) {
            protocol_error("a line of its stdout is not JSON", line);
            return;
        }
        if (message.is_array()) {  // a batch (2025-03-26)
            for (const auto& each : message) {
                if (!dispatch(each)) return protocol_error("not a JSON-RPC message", line);
            }
        } else if (!dispatch(message)) {
            protocol_error("not a JSON-RPC message", line);
        }
    }

    // Handles one message; false when it is not JSON-RPC.
    bool dispatch(const json& message) {
        if (!message.is_object()) return false;
        const auto method = message.find("method");
        const auto id = message.find("id");
        if (method != message.end()) {
            if (!method->is_string()) return false;
            const json params = message.value("params", json::object());
            if (id == message.end()) {
                on_notification(method->get<std::string>(), params);
            } else {
                answer_server_request(*id, method->get<std::string>());
            }
            return true;
        }
        if (id == message.end()) return false;
        const auto result = message.find("result");
        const auto error = message.find("error");
        if ((result == message.end()) == (error == message.end())) return false;
        if (!id->is_number_integer()) return true;  // not one of ours: ignore
        std::lock_guard lock(mutex);
        const auto found = pending.find(id->get<std::int64_t>());
        if (found == pending.end()) return true;  // late (cancelled or timed out): dropped
        auto& waiting = *found->second;
        if (result != message.end()) {
            waiting.result = *result;
        } else {
            std::int64_t code = 0;
            std::string text;
            if (error->is_object()) {
                if (const auto c = error->find("code"); c != error->end() && c->is_number_integer())
                    code = c->get<std::int64_t>();
                text = string_field(*error, "message");
            }
            waiting.error.emplace(McpError(
                ErrorCode::mcp_server_error,
                "the MCP server answered with error " + std::to_string(code) + ": " + text, code));
        }
        waiting.done = true;
        pending.erase(found);
        answered.notify_all();
        return true;
    }

    void on_notification(const std::string& method, const json& params) {
        if (options.on_notification) options.on_notification(method, params);
        if (method == "notifications/tools/list_changed") {
            {
                std::lock_guard lock(mutex);
                tools_changed = true;
            }
            if (options.on_tools_changed) options.on_tools_changed();
        } else if (method == "notifications/progress" && params.is_object()) {
            const auto token = params.find("progressToken");
            const auto progress = params.find("progress");
            if (token == params.end() || !token->is_number_integer() || progress == params.end() ||
                !progress->is_number())
                return;
            std::function<void(const McpProgress&)> callback;
            {
                std::lock_guard lock(mutex);
                const auto found = pending.find(token->get<std::int64_t>());
                if (found == pending.end()) return;  // finished or unknown: ignored
                callback = found->second->on_progress;
            }
            if (!callback) return;
            McpProgress update{.progress = progress->get<double>(),
                               .total = std::nullopt,
                               .message = string_field(params, "message")};
            if (const auto total = params.find("total");
                total != params.end() && total->is_number())
                update.total = total->get<double>();
            callback(update);
        }
    }

    // ullm declares no client capabilities: it answers `ping` and refuses every other request,
    // so that a server waiting for an answer does not hang.
    void answer_server_request(const json& id, const std::string& method) {
        json reply = {{"jsonrpc", "2.0"}, {"id", id}};
        if (method == "ping") {
            reply["result"] = json::object();
        } else {
            reply["error"] = {{"code", -32601}, {"message", "Method not found: " + method}};
        }
        try {
            transport->write_line(dump_line(reply), Clock::now() + std::chrono::seconds(1));
        } catch (const McpError&) {
            // The connection is failing; the reader reports that on its own.
        }
    }

    void send(const json& message, Clock::time_point deadline) {
        {
            std::lock_guard lock(mutex);
            if (failure) failure->raise();
        }
        transport->write_line(dump_line(message), deadline);
    }

    // Sends a request and waits for its answer. A request the server refused because it no
    // longer knows the session (it was not run) is sent again, once, in a new session.
    json request(const std::string& method, const json& params, const McpCallOptions& call,
                 std::chrono::milliseconds timeout) {
        const auto deadline = std::min(call.deadline, Clock::now() + timeout);
        std::uint64_t generation = 0;
        try {
            return request_once(method, params, call, deadline, false, &generation);
        } catch (const McpError& error) {
            if (error.error_code() != ErrorCode::mcp_session_expired) throw;
        }
        renew_session(generation);
        return request_once(method, params, call, deadline, false, nullptr);
    }

    // One request. A `handshake` (initialize) is never cancelled and is sent while the session
    // is being renewed; other requests wait for that. `generation` receives the session's.
    json request_once(const std::string& method, json params, const McpCallOptions& call,
                      Clock::time_point deadline, bool handshake, std::uint64_t* generation) {
        auto waiting = std::make_shared<Pending>();
        waiting->on_progress = call.on_progress;
        std::int64_t id = 0;
        {
            std::unique_lock lock(mutex);
            if (!handshake) {
                answered.wait_until(lock, deadline, [&] { return !renewing || failure; });
                if (renewing && !failure) {
                    throw McpError(ErrorCode::mcp_timeout,
                                   "the MCP session was still being renewed when " + method +
                                       " ran out of time");
                }
            }
            if (failure) failure->raise();
            if (generation != nullptr) *generation = session_generation;
            id = next_id++;
            pending.emplace(id, waiting);
        }
        if (call.on_progress) params["_meta"]["progressToken"] = id;
        const json message = {
            {"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
        try {
            send(message, deadline);
        } catch (...) {
            std::lock_guard lock(mutex);
            pending.erase(id);
            throw;
        }
        std::stop_callback wake(call.stop_token, [this] {
            std::lock_guard lock(mutex);
            answered.notify_all();
        });
        std::unique_lock lock(mutex);
        const auto finished = [&] {
            return waiting->done || call.stop_token.stop_requested() || Clock::now() >= deadline;
        };
        while (!finished()) {
            if (deadline == Clock::time_point::max()) {
                answered.wait(lock);
            } else {
                answered.wait_until(lock, deadline);
            }
        }
        if (waiting->done) {
            if (waiting->error) waiting->error->raise();
            return std::move(waiting->result);
        }
        pending.erase(id);
        lock.unlock();
        const bool stopped = call.stop_token.stop_requested();
        const std::string reason =
            stopped ? "cancelled by the caller" : "timed out waiting for the answer";
        if (!handshake) {
            try {
                send({{"jsonrpc", "2.0"},
                      {"method", "notifications/cancelled"},
                      {"params", {{"requestId", id}, {"reason", reason}}}},
                     Clock::now() + std::chrono::seconds(1));
            } catch (const McpError&) {
                // Nothing to cancel on a connection that is gone.
            }
        }
        if (stopped) throw CancelledError("the MCP request " + method + " was cancelled");
        throw McpError(ErrorCode::mcp_timeout,
                       "the MCP server did not answer " + method + " in time");
    }

    // Sends initialize (offering the negotiated version once there is one) and checks the
    // answer's protocol version.
    json handshake() {
        const json params = {
            {"protocolVersion",
             protocol_version.empty() ? options.protocol_version : protocol_version},
            {"capabilities", json::object()},
            {"clientInfo", {{"name", "ullm"}, {"version", std::string(version())}}}};
        json result;
        try {
            // initialize must not be cancelled: its timeout fails the connection.
            result = request_once("initialize", params, {},
                                  Clock::now() + options.initialize_timeout, true, nullptr);
        } catch (const McpError& error) {
            if (error.error_code() != ErrorCode::mcp_timeout) throw;
            std::string text = "the MCP server did not answer initialize within " +
                               std::to_string(options.initialize_timeout.count()) + " ms";
            if (const auto tail = transport->stderr_tail(); !tail.empty())
                text += "; its stderr ends: " + tail;
            throw McpError(ErrorCode::mcp_timeout, text);
        }
        if (!result.is_object() || !result.contains("protocolVersion") ||
            !result["protocolVersion"].is_string()) {
            throw McpError(ErrorCode::mcp_protocol_error,
                           "the MCP server's initialize result has no protocolVersion");
        }
        const auto answered_version = result["protocolVersion"].get<std::string>();
        const auto& supported = mcp_supported_protocol_versions();
        if (std::find(supported.begin(), supported.end(), answered_version) == supported.end()) {
            throw McpError(ErrorCode::mcp_unsupported_protocol_version,
                           "the MCP server speaks protocol version " + excerpt(answered_version) +
                               "; ullm offered " + options.protocol_version + " and speaks " +
                               "2025-11-25, 2025-06-18 and 2025-03-26");
        }
        return result;
    }

    void initialize() {
        const json result = handshake();
        protocol_version = result["protocolVersion"].get<std::string>();
        transport->set_protocol_version(protocol_version);
        if (result.contains("serverInfo") && result["serverInfo"].is_object())
            server_info = result["serverInfo"];
        if (result.contains("capabilities") && result["capabilities"].is_object())
            server_capabilities = result["capabilities"];
        instructions = string_field(result, "instructions");
        alias = options.alias.empty() ? string_field(server_info, "name") : options.alias;
        send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}},
             Clock::now() + options.initialize_timeout);
        transport->session_ready();
    }

    // Starts a new session after the server forgot the one of `generation` (HTTP 404), unless
    // another request has done so meanwhile. The server's info from the first session stays.
    void renew_session(std::uint64_t generation) {
        const std::lock_guard renewal(renew_mutex);
        {
            std::lock_guard lock(mutex);
            if (failure) failure->raise();
            if (session_generation != generation) return;
            renewing = true;
        }
        const auto done = [this](bool renewed) {
            std::lock_guard lock(mutex);
            renewing = false;
            if (renewed) ++session_generation;
            answered.notify_all();
        };
        try {
            transport->reset_session();
            const json result = handshake();
            if (result["protocolVersion"] != protocol_version) {
                throw McpError(ErrorCode::mcp_session_expired,
                               "the MCP server's new session speaks protocol version " +
                                   excerpt(result["protocolVersion"].get<std::string>()) +
                                   ", its first one " + protocol_version);
            }
            send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}},
                 Clock::now() + options.initialize_timeout);
            transport->session_ready();
        } catch (...) {
            done(false);
            throw;
        }
        done(true);
    }

    // Every item of a paginated list method, under `key`.
    json list_all(const std::string& method, const char* key, const McpCallOptions& call) {
        json items = json::array();
        std::set<std::string> cursors;
        std::optional<std::string> cursor;
        for (std::size_t page = 0;; ++page) {
            if (page == max_list_pages) {
                throw McpError(
                    ErrorCode::mcp_protocol_error,
                    method + " has more than " + std::to_string(max_list_pages) + " pages");
            }
            json params = json::object();
            if (cursor) params["cursor"] = *cursor;
            const json result = request(method, params, call, options.request_timeout);
            const auto found = result.find(key);
            if (found == result.end() || !found->is_array()) {
                throw McpError(ErrorCode::mcp_protocol_error,
                               "the result of " + method + " has no array " + key);
            }
            for (const auto& item : *found) items.push_back(item);
            if (items.size() > max_listed_items) {
                throw McpError(
                    ErrorCode::mcp_protocol_error,
                    method + " lists more than " + std::to_string(max_listed_items) + " items");
            }
            const std::string next = string_field(result, "nextCursor");
            if (next.empty()) return items;
            if (!cursors.insert(next).second) {
                throw McpError(ErrorCode::mcp_protocol_error,
                               method + " repeated the cursor " + excerpt(next));
            }
            cursor = next;
        }
    }
};

McpClient McpClient::spawn(McpStdioOptions options) {
    auto transport = std::make_unique<detail::mcp::StdioProcess>(options);
    auto state = std::make_shared<State>(std::move(options), std::move(transport));
    state->start();
    state->initialize();  // on a throw, the state's destructor kills and reaps the child
    return McpClient(std::move(state));
}

McpClient McpClient::connect(const McpHttpOptions& options) {
    McpStdioOptions session;
    session.alias = options.alias;
    session.protocol_version = options.protocol_version;
    session.initialize_timeout = options.initialize_timeout;
    session.request_timeout = options.request_timeout;
    session.on_tools_changed = options.on_tools_changed;
    session.on_notification = options.on_notification;
    auto state = std::make_shared<State>(std::move(session),
                                         std::make_unique<detail::mcp::HttpTransport>(options));
    state->start();
    state->initialize();
    return McpClient(std::move(state));
}

const std::string& McpClient::protocol_version() const noexcept {
    return state_->protocol_version;
}
const json& McpClient::server_info() const noexcept {
    return state_->server_info;
}
const json& McpClient::server_capabilities() const noexcept {
    return state_->server_capabilities;
}
const std::string& McpClient::instructions() const noexcept {
    return state_->instructions;
}
const std::string& McpClient::alias() const noexcept {
    return state_->alias;
}
int McpClient::pid() const noexcept {
    return state_->transport->pid();
}
std::string McpClient::stderr_tail() const {
    return state_->transport->stderr_tail();
}

json McpClient::request(const std::string& method, const json& params,
                        const McpCallOptions& options) {
    return state_->request(method, params, options, state_->options.request_timeout);
}

void McpClient::notify(const std::string& method, json params) {
    state_->send({{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}},
                 Clock::now() + state_->options.request_timeout);
}

std::vector<McpToolInfo> McpClient::list_tools(const McpCallOptions& options) {
    {
        std::lock_guard lock(state_->mutex);
        state_->tools_changed = false;
    }
    const json listed = state_->list_all("tools/list", "tools", options);
    std::vector<McpToolInfo> tools;
    tools.reserve(listed.size());
    for (const auto& tool : listed) {
        if (!tool.is_object() || string_field(tool, "name").empty()) {
            throw McpError(
                ErrorCode::mcp_protocol_error,
                "tools/list returned a tool without a name: " + excerpt(dump_line(tool)));
        }
        McpToolInfo info;
        info.name = string_field(tool, "name");
        info.title = string_field(tool, "title");
        info.description = string_field(tool, "description");
        info.input_schema = tool.value("inputSchema", json());
        info.output_schema = tool.value("outputSchema", json());
        info.annotations = tool.value("annotations", json());
        if (info.title.empty() && info.annotations.is_object())
            info.title = string_field(info.annotations, "title");
        info.raw = tool;
        tools.push_back(std::move(info));
    }
    return tools;
}

bool McpClient::tools_changed() const noexcept {
    std::lock_guard lock(state_->mutex);
    return state_->tools_changed;
}

McpToolResult McpClient::call_tool(const std::string& name, json arguments,
                                   const McpCallOptions& options) {
    const json result =
        request("tools/call", {{"name", name}, {"arguments", std::move(arguments)}}, options);
    McpToolResult out;
    if (const auto content = result.find("content"); content != result.end()) {
        if (!content->is_array()) {
            throw McpError(ErrorCode::mcp_protocol_error,
                           "the content of a tools/call result is not an array");
        }
        out.content = *content;
    }
    out.structured_content = result.value("structuredContent", json());
    const auto is_error = result.find("isError");
    out.is_error = is_error != result.end() && is_error->is_boolean() && is_error->get<bool>();
    return out;
}

json McpClient::list_resources(const McpCallOptions& options) {
    return state_->list_all("resources/list", "resources", options);
}

json McpClient::read_resource(const std::string& uri, const McpCallOptions& options) {
    return request("resources/read", {{"uri", uri}}, options);
}

json McpClient::list_prompts(const McpCallOptions& options) {
    return state_->list_all("prompts/list", "prompts", options);
}

json McpClient::get_prompt(const std::string& name,
                           const std::map<std::string, std::string>& arguments,
                           const McpCallOptions& options) {
    json params = {{"name", name}};
    if (!arguments.empty()) params["arguments"] = arguments;
    return request("prompts/get", params, options);
}

void McpClient::close() noexcept {
    state_->close();
}

}  // namespace ullm
