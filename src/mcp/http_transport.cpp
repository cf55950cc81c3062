#include "http_transport.hpp"

#include <ullm/core/error.hpp>
#include <ullm/http/sse_parser.hpp>

#include <algorithm>
#include <utility>

namespace ullm::detail::mcp {

namespace {

constexpr std::size_t shown_body_bytes = 300;

// The request id a message carries, when it is an integer (ours always are).
std::optional<std::int64_t> request_id_of(const json& message) {
    const auto id = message.find("id");
    if (id == message.end() || !id->is_number_integer()) return std::nullopt;
    return id->get<std::int64_t>();
}

bool valid_session_id(const std::string& id) {
    return !id.empty() && id.size() <= 1024 &&
           std::all_of(id.begin(), id.end(), [](char c) { return c >= 0x21 && c <= 0x7E; });
}

}  // namespace

HttpTransport::HttpTransport(const McpHttpOptions& options)
    : url_(options.url), headers_(options.headers), max_message_bytes_(options.max_message_bytes) {
    if (url_.empty()) throw McpError(ErrorCode::mcp_spawn_failed, "the MCP server URL is empty");
}

HttpTransport::~HttpTransport() {
    close();
}

void HttpTransport::start(TransportHandlers handlers) {
    handlers_ = std::move(handlers);
}

void HttpTransport::set_protocol_version(const std::string& version) {
    std::lock_guard lock(mutex_);
    protocol_version_ = version;
}

HttpRequest HttpTransport::make_request(const std::string& method, std::string body) const {
    HttpRequest request;
    request.method = method;
    request.url = url_;
    request.body = std::move(body);
    request.idle_timeout = std::chrono::milliseconds(0);  // a call's own deadline bounds it
    if (method == "POST") request.headers.emplace_back("content-type", "application/json");
    request.headers.emplace_back("accept", "application/json, text/event-stream");
    for (const auto& [name, value] : headers_) {
        request.headers.emplace_back(name, value);
        request.secrets.push_back(value);
    }
    std::lock_guard lock(mutex_);
    if (!session_id_.empty()) request.headers.emplace_back("mcp-session-id", session_id_);
    if (!protocol_version_.empty()) {
        request.headers.emplace_back("mcp-protocol-version", protocol_version_);
    }
    return request;
}

void HttpTransport::write_line(const std::string& line, std::chrono::steady_clock::time_point) {
    const json message = json::parse(line);
    reap_finished();
    HttpRequest request = make_request("POST", line);
    std::unique_ptr<HttpStream> stream;
    try {
        stream = curl_.open_stream(request);
    } catch (const Error& error) {
        throw McpError(ErrorCode::mcp_server_exited,
                       "could not reach the MCP server at " + url_ + ": " + error.message());
    }
    std::lock_guard lock(mutex_);
    if (closed_) {
        stream->cancel();
        throw McpError(ErrorCode::mcp_server_exited, "the connection to the MCP server is closed");
    }
    // A cancelled request's answer may never come (the server drops it): close its stream.
    if (message.value("method", "") == "notifications/cancelled") {
        const json params = message.value("params", json());
        if (params.is_object() && params.contains("requestId") &&
            params["requestId"].is_number_integer()) {
            const auto open = by_request_.find(params["requestId"].get<std::int64_t>());
            if (open != by_request_.end()) open->second->stream->cancel();
        }
    }
    Exchange* exchange = &exchanges_.emplace_back();
    exchange->stream = std::move(stream);
    if (const auto id = request_id_of(message)) by_request_[*id] = exchange;
    exchange->reader = std::thread([this, exchange, message] { read_answer(*exchange, message); });
}

void HttpTransport::read_answer(Exchange& exchange, const json& message) {
    try {
        const HttpResponseHead& head = exchange.stream->head();
        if (const auto session = head.header("mcp-session-id"); session) {
            if (valid_session_id(*session)) {
                std::lock_guard lock(mutex_);
                session_id_ = *session;
            }
        }
        const std::string type = head.header("content-type").value_or("");
        std::string chunk;
        if (head.status >= 400) {
            std::string body;
            while (exchange.stream->read(chunk) && body.size() < shown_body_bytes) body += chunk;
            deliver_error(message, "HTTP " + std::to_string(head.status) + " from " + url_ + ": " +
                                       valid_utf8(body.substr(0, shown_body_bytes)));
        } else if (type.find("text/event-stream") != std::string::npos) {
            SseParser parser(max_message_bytes_);
            while (exchange.stream->read(chunk)) {
                parser.feed(chunk, [&](SseEvent&& event) {
                    // Priming events (an id and no data) and comments carry no message.
                    if (!event.data.empty() && handlers_.on_line) handlers_.on_line(event.data);
                });
            }
        } else {
            std::string body;
            while (exchange.stream->read(chunk)) {
                body += chunk;
                if (body.size() > max_message_bytes_) {
                    throw McpError(ErrorCode::mcp_message_too_large,
                                   "the MCP server sent an answer over " +
                                       std::to_string(max_message_bytes_) + " bytes");
                }
            }
            if (!body.empty() && handlers_.on_line) handlers_.on_line(body);
        }
    } catch (const CancelledError&) {
        // Closed here: the request was cancelled, or the connection is closing.
    } catch (const Error& error) {
        deliver_error(message, error.message());
    }
    std::lock_guard lock(mutex_);
    exchange.finished = true;
    if (const auto id = request_id_of(message)) {
        const auto open = by_request_.find(*id);
        if (open != by_request_.end() && open->second == &exchange) by_request_.erase(open);
    }
}

void HttpTransport::deliver_error(const json& message, const std::string& text) {
    const auto id = request_id_of(message);
    if (!id || !handlers_.on_line) return;  // a notification: nobody waits for it
    const json answer = {
        {"jsonrpc", "2.0"}, {"id", *id}, {"error", {{"code", 0}, {"message", text}}}};
    handlers_.on_line(answer.dump(-1, ' ', false, json::error_handler_t::replace));
}

void HttpTransport::reap_finished() {
    std::list<Exchange> done;
    {
        std::lock_guard lock(mutex_);
        for (auto it = exchanges_.begin(); it != exchanges_.end();) {
            const auto next = std::next(it);
            if (it->finished) done.splice(done.end(), exchanges_, it);
            it = next;
        }
    }
    for (auto& exchange : done) {
        if (exchange.reader.joinable()) exchange.reader.join();
    }
}

void HttpTransport::close() noexcept {
    std::string session;
    std::list<Exchange> open;
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        closed_ = true;
        session = session_id_;
        for (auto& exchange : exchanges_) {
            if (exchange.stream) exchange.stream->cancel();
        }
        open.splice(open.end(), exchanges_);
        by_request_.clear();
    }
    for (auto& exchange : open) {
        if (exchange.reader.joinable()) exchange.reader.join();
    }
    if (!session.empty()) {
        try {
            HttpRequest request = make_request("DELETE", {});
            request.connect_timeout = std::chrono::seconds(2);
            request.idle_timeout = std::chrono::seconds(2);
            (void)curl_.send(request);
        } catch (...) {
            // Ending the session is a courtesy; the server expires it anyway.
        }
    }
}

}  // namespace ullm::detail::mcp
