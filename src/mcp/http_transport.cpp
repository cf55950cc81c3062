#include "http_transport.hpp"

#include <ullm/core/error.hpp>

#include <algorithm>
#include <cctype>
#include <utility>

namespace ullm::detail::mcp {

namespace {

constexpr std::size_t shown_body_bytes = 300;
constexpr std::size_t read_error_bytes = 4096;
// How often an answer's stream is resumed before the request fails.
constexpr int max_resumes = 5;
// The wait before reconnecting when the server asked for none (`retry:`), and the longest
// wait of the GET stream's back-off.
constexpr std::chrono::milliseconds default_reconnect_delay{1000};
constexpr std::chrono::milliseconds max_reconnect_delay{30'000};

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

bool is_event_stream(const HttpResponseHead& head) {
    return head.header("content-type").value_or("").find("text/event-stream") != std::string::npos;
}

// Whether `data` (one message, or a batch) is the answer to request `id`.
bool answers(const std::string& data, std::int64_t id) {
    const json message = json::parse(std::string_view(data), nullptr, false);
    const auto is_answer = [id](const json& each) {
        return each.is_object() && request_id_of(each) == id &&
               (each.contains("result") || each.contains("error"));
    };
    if (message.is_array()) return std::any_of(message.begin(), message.end(), is_answer);
    return is_answer(message);
}

bool mentions_session(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text.find("session") != std::string::npos;
}

// Runs `step`: the message of a failure of the transport it threw, or nothing when it returned.
// A cancellation and an `McpError` go through.
template <class Step>
std::optional<std::string> transport_failure(Step&& step) {
    try {
        step();
    } catch (const CancelledError&) {
        throw;
    } catch (const McpError&) {
        throw;
    } catch (const Error& error) {
        return error.message();
    }
    return std::nullopt;
}

std::chrono::milliseconds reconnect_delay(const SseParser& parser) {
    if (const auto asked = parser.reconnection_time_ms()) {
        return std::min(std::chrono::milliseconds(*asked), max_reconnect_delay);
    }
    return default_reconnect_delay;
}

}  // namespace

HttpTransport::HttpTransport(const McpHttpOptions& options)
    : url_(options.url),
      headers_(options.headers),
      max_message_bytes_(options.max_message_bytes),
      listen_enabled_(options.server_stream) {
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
    request.headers.emplace_back(
        "accept", method == "GET" ? "text/event-stream" : "application/json, text/event-stream");
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

void HttpTransport::write_line(const std::string& line,
                               std::chrono::steady_clock::time_point deadline) {
    const json message = json::parse(std::string_view(line));
    reap_finished();
    HttpRequest request = make_request("POST", line);
    std::string session;
    for (const auto& [name, value] : request.headers) {
        if (name == "mcp-session-id") session = value;
    }
    std::unique_ptr<HttpStream> stream;
    try {
        stream = curl_.open_stream(request);
    } catch (const Error& error) {
        throw McpError(ErrorCode::mcp_connection_failed,
                       "could not reach the MCP server at " + url_ + ": " + error.message());
    }
    std::unique_lock lock(mutex_);
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
            if (open != by_request_.end()) {
                open->second->cancelled = true;
                open->second->stream->cancel();
                wake_.notify_all();
            }
        }
    }
    Exchange* exchange = &exchanges_.emplace_back();
    exchange->stream = std::move(stream);
    exchange->session_id = std::move(session);
    const bool is_request = message.contains("method") && message.contains("id");
    if (const auto id = request_id_of(message); id && is_request) by_request_[*id] = exchange;
    exchange->reader = std::thread([this, exchange, message] { read_answer(*exchange, message); });
    // A notification or an answer is taken (202) before the next message goes, so that the
    // server sees them in order (initialized before the first request).
    if (!is_request) {
        exchange->awaited = true;  // not reaped meanwhile (close() keeps it until it joins)
        wake_.wait_until(lock, deadline, [&] { return closed_ || exchange->finished; });
        if (!closed_) exchange->awaited = false;
    }
}

void HttpTransport::read_answer(Exchange& exchange, const json& message) {
    // The id of a request of ours; an answer to the server's own request carries the server's.
    const auto id = message.contains("method") ? request_id_of(message) : std::nullopt;
    const auto fail = [&](const McpError& error) {
        if (id && handlers_.on_request_failed) handlers_.on_request_failed(*id, error);
    };
    try {
        const HttpResponseHead& head = exchange.stream->head();
        // The session is the one the initialize answer names (a late answer of an older
        // session never brings that session back).
        const auto session = head.header("mcp-session-id");
        if (session && valid_session_id(*session) && message.value("method", "") == "initialize") {
            std::lock_guard lock(mutex_);
            session_id_ = *session;
        }
        std::string chunk;
        if (head.status >= 400) {
            fail(status_failure(head, *exchange.stream, exchange.session_id));
        } else if (is_event_stream(head)) {
            read_events(exchange, id);
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
    } catch (const McpError& error) {
        fail(error);
    } catch (const Error& error) {
        fail(McpError(ErrorCode::mcp_connection_failed,
                      "the connection to the MCP server at " + url_ +
                          " failed before the answer: " + error.message()));
    }
    std::lock_guard lock(mutex_);
    exchange.finished = true;
    wake_.notify_all();
    if (id) {
        const auto open = by_request_.find(*id);
        if (open != by_request_.end() && open->second == &exchange) by_request_.erase(open);
    }
}

McpError HttpTransport::status_failure(const HttpResponseHead& head, HttpStream& stream,
                                       const std::string& session_id) const {
    std::string body;
    std::string chunk;
    while (body.size() < read_error_bytes && stream.read(chunk)) body += chunk;
    const std::string text = "HTTP " + std::to_string(head.status) + " from " + url_ + ": " +
                             valid_utf8(body.substr(0, shown_body_bytes));
    // 404 is the specification's answer to a session the server no longer knows; servers built
    // on the reference SDK's example answer 400 with a JSON-RPC error naming the session.
    if (!session_id.empty() &&
        (head.status == 404 || (head.status == 400 && mentions_session(body)))) {
        return McpError(ErrorCode::mcp_session_expired,
                        "the MCP server no longer knows the session (" + text + ")");
    }
    std::int64_t rpc_code = 0;
    const json answer = json::parse(std::string_view(body), nullptr, false);
    if (answer.is_object() && answer.contains("error") && answer["error"].is_object()) {
        const json& code = answer["error"].value("code", json());
        if (code.is_number_integer()) rpc_code = code.get<std::int64_t>();
    }
    return McpError(ErrorCode::mcp_server_error, text, rpc_code);
}

void HttpTransport::pump_events(HttpStream& stream, SseParser& parser,
                                const std::function<void(const std::string&)>& each) {
    std::string chunk;
    try {
        while (stream.read(chunk)) {
            parser.feed(chunk, [&](SseEvent&& event) {
                // Priming events (an id and no data) and comments carry no message.
                if (event.data.empty()) return;
                if (each) each(event.data);
                if (handlers_.on_line) handlers_.on_line(event.data);
            });
        }
    } catch (const ProviderError& error) {
        if (error.error_code() != ErrorCode::invalid_provider_response) throw;
        throw McpError(
            ErrorCode::mcp_message_too_large,
            "the MCP server sent an event over " + std::to_string(max_message_bytes_) + " bytes");
    }
}

std::unique_ptr<HttpStream> HttpTransport::open_get(const std::string& last_event_id) {
    HttpRequest request = make_request("GET", {});
    if (!last_event_id.empty()) request.headers.emplace_back("last-event-id", last_event_id);
    return curl_.open_stream(request);
}

bool HttpTransport::pause(std::chrono::milliseconds delay, const std::function<bool()>& stop) {
    std::unique_lock lock(mutex_);
    const auto woken = [&] { return closed_ || stop(); };
    return !wake_.wait_for(lock, delay, woken);
}

void HttpTransport::read_events(Exchange& exchange, std::optional<std::int64_t> id) {
    SseParser parser(max_message_bytes_);
    bool answered = false;
    const auto note = [&](const std::string& data) {
        if (id && answers(data, *id)) answered = true;
    };
    HttpStream* stream = exchange.stream.get();  // replaced only by this thread
    std::string why;
    for (int resumes = 0;; ++resumes) {
        if (stream != nullptr) {
            const auto broke = transport_failure([&] { pump_events(*stream, parser, note); });
            why = broke ? "the answer's event stream broke off before the answer: " + *broke
                        : "the server ended the answer's event stream before the answer";
            (void)parser.finish();
        }
        if (answered || !id) return;
        if (parser.last_event_id().empty()) {
            throw McpError(ErrorCode::mcp_connection_failed,
                           why + " (with no event id to resume it by)");
        }
        if (resumes == max_resumes) {
            throw McpError(ErrorCode::mcp_connection_failed,
                           why + " (resumed " + std::to_string(max_resumes) + " times)");
        }
        if (!pause(reconnect_delay(parser), [&] { return exchange.cancelled; })) {
            throw CancelledError("the MCP request was cancelled");
        }
        // Resume: a GET with the last event id; the server replays what came after it.
        stream = nullptr;
        std::unique_ptr<HttpStream> next;
        try {
            next = open_get(parser.last_event_id());
        } catch (const Error& error) {
            why = "resuming the answer's event stream failed: " + error.message();
            continue;
        }
        HttpStream* opened = next.get();
        std::unique_ptr<HttpStream> old;
        {
            std::lock_guard lock(mutex_);
            if (closed_ || exchange.cancelled) {
                next->cancel();
                throw CancelledError("the MCP request was cancelled");
            }
            old = std::exchange(exchange.stream, std::move(next));
        }
        old.reset();
        const auto refused = transport_failure([&] {
            const HttpResponseHead& head = opened->head();
            if (head.status >= 300 || !is_event_stream(head)) {
                // The answer is lost (a 404 here is not a request to send again: the server
                // may have run it).
                throw McpError(ErrorCode::mcp_connection_failed,
                               why + "; resuming it got HTTP " + std::to_string(head.status));
            }
        });
        if (refused) {
            why = "resuming the answer's event stream failed: " + *refused;
        } else {
            stream = opened;
        }
    }
}

void HttpTransport::session_ready() {
    std::lock_guard lock(mutex_);
    if (!listen_enabled_ || closed_ || listener_.joinable()) return;
    listener_ = std::thread([this, epoch = listen_epoch_] { listen(epoch); });
}

void HttpTransport::listen(std::uint64_t epoch) {
    const auto stopped = [this, epoch] { return listen_epoch_ != epoch; };  // under mutex_
    SseParser parser(max_message_bytes_);
    int failures = 0;
    for (;;) {
        std::unique_ptr<HttpStream> opened;
        try {
            opened = open_get(parser.last_event_id());
        } catch (const Error&) {
            // Counted below as a failed attempt.
        }
        HttpStream* stream = opened.get();
        {
            std::lock_guard lock(mutex_);
            if (closed_ || stopped()) {
                if (opened) opened->cancel();
                return;
            }
            listen_stream_ = std::move(opened);
        }
        bool streamed = false;
        bool give_up = false;
        if (stream != nullptr) {
            try {
                const HttpResponseHead& head = stream->head();
                // 405: the server offers no such stream; 400 or 404: the session is gone (the
                // next request starts another, and a new listener); other 4xx stay so. A 2xx
                // that is not an event stream is no stream either.
                if ((head.status >= 400 && head.status < 500) ||
                    (head.status < 300 && !is_event_stream(head))) {
                    give_up = true;
                } else if (head.status < 300) {
                    streamed = true;
                    failures = 0;
                    pump_events(*stream, parser, {});
                }
            } catch (const Error&) {
                // Broken off (or cancelled: the check above the next attempt ends the loop).
            }
            (void)parser.finish();
        }
        std::unique_ptr<HttpStream> old;
        {
            std::lock_guard lock(mutex_);
            old = std::move(listen_stream_);
        }
        old.reset();
        if (give_up) return;
        if (!streamed) ++failures;
        auto delay = reconnect_delay(parser);
        for (int doubled = 1; doubled < std::min(failures, 6); ++doubled) delay *= 2;
        if (!pause(std::min(delay, max_reconnect_delay), stopped)) return;
    }
}

void HttpTransport::stop_listening() {
    std::thread listener;
    {
        std::lock_guard lock(mutex_);
        ++listen_epoch_;
        if (listen_stream_) listen_stream_->cancel();
        listener = std::move(listener_);
        wake_.notify_all();
    }
    if (listener.joinable()) listener.join();
}

void HttpTransport::reset_session() {
    stop_listening();
    std::lock_guard lock(mutex_);
    session_id_.clear();
}

void HttpTransport::reap_finished() {
    std::list<Exchange> done;
    {
        std::lock_guard lock(mutex_);
        for (auto it = exchanges_.begin(); it != exchanges_.end();) {
            const auto next = std::next(it);
            if (it->finished && !it->awaited) done.splice(done.end(), exchanges_, it);
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
        wake_.notify_all();
    }
    stop_listening();
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
