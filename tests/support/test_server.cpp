#include "support/test_server.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <exception>
#include <list>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

// Writes must never raise SIGPIPE in the test process. Linux has MSG_NOSIGNAL; BSDs and macOS
// use the SO_NOSIGPIPE socket option instead.
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

namespace ullm::test {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t max_header_bytes = std::size_t{64} * 1024;
constexpr std::size_t max_body_bytes = std::size_t{64} * 1024 * 1024;
constexpr std::size_t read_block = std::size_t{16} * 1024;
// How long a graceful close waits for the client's FIN before closing anyway.
constexpr std::chrono::milliseconds linger_timeout{1000};

char to_lower_ascii(char c) noexcept {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string to_lower(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(), to_lower_ascii);
    return out;
}

bool iequals(std::string_view a, std::string_view b) noexcept {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return to_lower_ascii(x) == to_lower_ascii(y);
           });
}

std::string_view trim(std::string_view text) noexcept {
    const auto is_space = [](char c) { return c == ' ' || c == '\t'; };
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    return text;
}

/// Whether the comma-separated header value `list` contains `token` (case-insensitively).
bool has_token(std::string_view list, std::string_view token) noexcept {
    while (!list.empty()) {
        const auto comma = list.find(',');
        if (iequals(trim(list.substr(0, comma)), token)) return true;
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return false;
}

std::string_view reason_phrase(int status) noexcept {
    switch (status) {
        case 100:
            return "Continue";
        case 200:
            return "OK";
        case 201:
            return "Created";
        case 202:
            return "Accepted";
        case 204:
            return "No Content";
        case 301:
            return "Moved Permanently";
        case 302:
            return "Found";
        case 304:
            return "Not Modified";
        case 307:
            return "Temporary Redirect";
        case 308:
            return "Permanent Redirect";
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 409:
            return "Conflict";
        case 413:
            return "Content Too Large";
        case 415:
            return "Unsupported Media Type";
        case 422:
            return "Unprocessable Content";
        case 429:
            return "Too Many Requests";
        case 431:
            return "Request Header Fields Too Large";
        case 500:
            return "Internal Server Error";
        case 501:
            return "Not Implemented";
        case 502:
            return "Bad Gateway";
        case 503:
            return "Service Unavailable";
        case 504:
            return "Gateway Timeout";
        case 529:
            return "Overloaded";
        default:
            return "Status";
    }
}

[[noreturn]] void throw_errno(const char* what) {
    throw std::system_error(errno, std::generic_category(), what);
}

/// Owns a file descriptor; closes it on destruction.
class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) noexcept : fd_(fd) {}
    ~UniqueFd() { reset(); }
    UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept {
        if (this != &other) {
            reset();
            fd_ = std::exchange(other.fd_, -1);
        }
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;

    [[nodiscard]] int get() const noexcept { return fd_; }
    [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
    void reset() noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_ = -1;
};

void set_cloexec_nonblocking(int fd) {
    const int fd_flags = ::fcntl(fd, F_GETFD);
    if (fd_flags < 0 || ::fcntl(fd, F_SETFD, fd_flags | FD_CLOEXEC) < 0) throw_errno("fcntl");
    const int fl_flags = ::fcntl(fd, F_GETFL);
    if (fl_flags < 0 || ::fcntl(fd, F_SETFL, fl_flags | O_NONBLOCK) < 0) throw_errno("fcntl");
}

void set_socket_options(int fd) {
    const int one = 1;
    // Each chunk must leave as soon as it is written.
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
#ifdef SO_NOSIGPIPE
    ::setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
}

/// The outcome of waiting on a socket.
enum class Wake { ready, stopped, timed_out };

/// Waits until `fd` has one of `events`, the stop pipe `stop_fd` is readable, or `deadline`
/// passes (never, if empty). Retries on EINTR.
Wake wait_for(int fd, short events, int stop_fd, std::optional<Clock::time_point> deadline) {
    for (;;) {
        int timeout_ms = -1;
        if (deadline) {
            const auto left =
                std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
            if (left <= 0) return Wake::timed_out;
            timeout_ms = static_cast<int>(std::min<long long>(left, 60'000));
        }
        pollfd fds[2] = {{stop_fd, POLLIN, 0}, {fd, events, 0}};
        const int ready = ::poll(fds, 2, timeout_ms);
        if (ready < 0) {
            if (errno == EINTR) continue;
            return Wake::stopped;  // Unrecoverable; treat like a stop so the caller unwinds.
        }
        if (fds[0].revents != 0) return Wake::stopped;
        if (fds[1].revents != 0) return Wake::ready;
    }
}

/// The outcome of an I/O operation on a connection.
enum class Io {
    ok,       ///< Done.
    closed,   ///< The peer closed its side (EOF) before the operation completed.
    failed,   ///< The peer reset the connection or the socket failed.
    stopped,  ///< The server is stopping.
    invalid,  ///< The peer sent something that is not HTTP/1.1 (or too large).
};

bool client_went_away(Io io) noexcept {
    return io == Io::closed || io == Io::failed;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// RecordedRequest and ScriptedResponse

std::string RecordedRequest::header(std::string_view name) const {
    for (const auto& [key, value] : headers) {
        if (iequals(key, name)) return value;
    }
    return {};
}

bool RecordedRequest::has_header(std::string_view name) const {
    return std::any_of(headers.begin(), headers.end(),
                       [&](const auto& field) { return iequals(field.first, name); });
}

ScriptedResponse ScriptedResponse::json(int status, const std::string& body, HeaderList headers) {
    ScriptedResponse response;
    response.status = status;
    response.body = body;
    const bool has_type = std::any_of(headers.begin(), headers.end(), [](const auto& field) {
        return iequals(field.first, "content-type");
    });
    if (!has_type) response.headers.emplace_back("Content-Type", "application/json");
    for (auto& field : headers) response.headers.push_back(std::move(field));
    return response;
}

ScriptedResponse ScriptedResponse::sse(std::string wire_bytes, std::size_t chunk_size,
                                       std::chrono::milliseconds chunk_delay) {
    ScriptedResponse response;
    response.headers = {{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}};
    response.chunk_delay = chunk_delay;
    if (wire_bytes.empty()) return response;
    if (chunk_size == 0 || chunk_size >= wire_bytes.size()) {
        response.chunks.push_back(std::move(wire_bytes));
        return response;
    }
    for (std::size_t offset = 0; offset < wire_bytes.size(); offset += chunk_size) {
        response.chunks.push_back(wire_bytes.substr(offset, chunk_size));
    }
    return response;
}

std::string gzip_stored(std::string_view data) {
    // CRC-32 as gzip defines it (ISO 3309: reflected polynomial 0xEDB88320).
    std::uint32_t table[256];
    for (std::uint32_t n = 0; n < 256; ++n) {
        std::uint32_t c = n;
        for (int k = 0; k < 8; ++k) c = (c & 1U) != 0 ? 0xEDB88320U ^ (c >> 1) : c >> 1;
        table[n] = c;
    }
    std::uint32_t crc = 0xFFFFFFFFU;
    for (const char byte : data) {
        crc = table[(crc ^ static_cast<unsigned char>(byte)) & 0xFFU] ^ (crc >> 8);
    }
    crc ^= 0xFFFFFFFFU;

    const auto put_le = [](std::string& out, std::uint32_t value, int bytes) {
        for (int i = 0; i < bytes; ++i)
            out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFU));
    };
    // ID1 ID2, CM = deflate, no flags, no mtime, no extra flags, OS unknown.
    std::string out("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10);
    constexpr std::size_t max_stored = 0xFFFF;
    std::size_t offset = 0;
    do {
        const std::size_t length = std::min(max_stored, data.size() - offset);
        const bool last = offset + length == data.size();
        out.push_back(last ? '\x01' : '\x00');  // BFINAL, BTYPE = 00 (stored)
        put_le(out, static_cast<std::uint32_t>(length), 2);
        put_le(out, static_cast<std::uint32_t>(~length & 0xFFFFU), 2);
        out.append(data.substr(offset, length));
        offset += length;
    } while (offset < data.size());
    put_le(out, crc, 4);
    put_le(out, static_cast<std::uint32_t>(data.size() & 0xFFFFFFFFU), 4);
    return out;
}

// ---------------------------------------------------------------------------------------------
// The server's shared state

struct TestServer::Impl {
    /// One connection's thread. `finished` is set as the thread's last action so the accept
    /// loop can join it without blocking.
    struct ConnectionThread {
        std::thread thread;
        std::atomic<bool> finished{false};
    };
    class Connection;

    UniqueFd listener;
    UniqueFd stop_read;   // Readable once the server stops: every poll watches it.
    UniqueFd stop_write;  // Written once by the destructor.
    std::uint16_t port = 0;

    mutable std::mutex mutex;
    mutable std::condition_variable changed;  // Notified whenever a counter or the log grows.
    std::deque<ScriptedResponse> queue;
    RequestHandler handler;
    std::vector<RecordedRequest> requests;
    std::size_t connections_accepted = 0;
    std::size_t open_connections = 0;
    std::size_t client_aborts = 0;

    // Touched only by the accept thread, and by the destructor once that thread is joined.
    std::list<ConnectionThread> connections;
    std::thread acceptor;

    void accept_loop();
    void reap_finished_connections();
    void serve(UniqueFd socket);

    void count_client_abort() {
        {
            const std::lock_guard lock(mutex);
            ++client_aborts;
        }
        changed.notify_all();
    }

    void connection_closed() {
        {
            const std::lock_guard lock(mutex);
            --open_connections;
        }
        changed.notify_all();
    }

    // Records `request` and takes its response: the next queued one, else the handler's.
    // Both happen under one lock, so queued responses go to requests in the order they were
    // recorded (a connection slow to take its response cannot leave it to a later request).
    ScriptedResponse record_and_choose(const RecordedRequest& request) {
        RequestHandler current;
        std::optional<ScriptedResponse> queued;
        {
            const std::lock_guard lock(mutex);
            requests.push_back(request);
            if (!queue.empty()) {
                queued = std::move(queue.front());
                queue.pop_front();
            }
            current = handler;
        }
        changed.notify_all();
        if (queued) return std::move(*queued);
        if (!current) return ScriptedResponse::json(500, R"({"error":"no scripted response"})");
        try {
            return current(request);
        } catch (const std::exception& error) {
            const nlohmann::json body = {{"error", std::string("handler threw: ") + error.what()}};
            return ScriptedResponse::json(500, body.dump());
        } catch (...) {
            return ScriptedResponse::json(500, R"({"error":"handler threw"})");
        }
    }

    template <class Predicate>
    bool wait_until(std::chrono::milliseconds timeout, Predicate predicate) const {
        std::unique_lock lock(mutex);
        return changed.wait_for(lock, timeout, predicate);
    }
};

// ---------------------------------------------------------------------------------------------
// One connection: parse requests, write responses

class TestServer::Impl::Connection {
public:
    Connection(Impl& server, UniqueFd socket) : server_(server), socket_(std::move(socket)) {}

    /// Serves requests until the client closes, a response closes the connection, the client
    /// misbehaves, or the server stops.
    void run() {
        for (;;) {
            RecordedRequest request;
            bool wants_close = false;
            const Io io = read_request(request, wants_close);
            if (io == Io::invalid) {
                send_error(400, "malformed request");
                return;
            }
            if (io != Io::ok) return;
            const bool head = request.method == "HEAD";
            const ScriptedResponse response = server_.record_and_choose(request);
            if (!respond(response, head, wants_close)) return;
        }
    }

private:
    Impl& server_;
    UniqueFd socket_;
    std::string buffer_;            // Bytes received but not yet parsed.
    std::size_t consumed_ = 0;      // How much of buffer_ has been parsed.
    std::size_t last_receive_ = 0;  // Bytes appended by the latest receive_once().

    int fd() const noexcept { return socket_.get(); }
    int stop_fd() const noexcept { return server_.stop_read.get(); }

    // --- Reading ------------------------------------------------------------------------------

    /// Receives whatever is available (waiting until something is), appending to buffer_.
    Io fill() {
        // Drop parsed bytes once they are all parsed or worth moving the rest for.
        if (consumed_ == buffer_.size() || consumed_ >= max_header_bytes) {
            buffer_.erase(0, consumed_);
            consumed_ = 0;
        }
        if (buffer_.size() - consumed_ > max_body_bytes + max_header_bytes) return Io::invalid;
        for (;;) {
            const Wake wake = wait_for(fd(), POLLIN, stop_fd(), std::nullopt);
            if (wake != Wake::ready) return Io::stopped;
            const Io io = receive_once();
            if (io != Io::ok || last_receive_ > 0) return io;
        }
    }

    /// One non-blocking recv into buffer_; last_receive_ tells how many bytes arrived.
    Io receive_once() {
        char block[read_block];
        last_receive_ = 0;
        const ssize_t got = ::recv(fd(), block, sizeof block, 0);
        if (got > 0) {
            buffer_.append(block, static_cast<std::size_t>(got));
            last_receive_ = static_cast<std::size_t>(got);
            return Io::ok;
        }
        if (got == 0) return Io::closed;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Io::ok;
        return Io::failed;
    }

    /// Reads one line (without its CRLF or bare LF), failing if it grows past `limit`.
    Io read_line(std::string& line, std::size_t limit) {
        for (;;) {
            const auto end = buffer_.find('\n', consumed_);
            if (end != std::string::npos) {
                std::size_t length = end - consumed_;
                if (length > 0 && buffer_[end - 1] == '\r') --length;
                if (length > limit) return Io::invalid;
                line.assign(buffer_, consumed_, length);
                consumed_ = end + 1;
                return Io::ok;
            }
            // One more byte may be the CR of a CRLF whose LF hasn't arrived yet.
            if (buffer_.size() - consumed_ > limit + 1) return Io::invalid;
            if (const Io io = fill(); io != Io::ok) return io;
        }
    }

    /// Appends exactly `count` bytes to `out`.
    Io read_exact(std::size_t count, std::string& out) {
        while (buffer_.size() - consumed_ < count) {
            if (const Io io = fill(); io != Io::ok) return io;
        }
        out.append(buffer_, consumed_, count);
        consumed_ += count;
        return Io::ok;
    }

    /// Reads the request line and the header block.
    Io read_head(RecordedRequest& request) {
        std::string line;
        // Robustness (RFC 9112 §2.2): ignore empty lines before the request line.
        do {
            if (const Io io = read_line(line, max_header_bytes); io != Io::ok) return io;
        } while (line.empty());

        const auto first_space = line.find(' ');
        const auto last_space = line.rfind(' ');
        if (first_space == std::string::npos || first_space == last_space) return Io::invalid;
        request.method = line.substr(0, first_space);
        request.target = line.substr(first_space + 1, last_space - first_space - 1);
        request.http_version = line.substr(last_space + 1);
        if (request.method.empty() || request.target.empty() ||
            !request.http_version.starts_with("HTTP/1.")) {
            return Io::invalid;
        }

        std::size_t header_bytes = line.size();
        for (;;) {
            if (const Io io = read_line(line, max_header_bytes); io != Io::ok) return io;
            if (line.empty()) return Io::ok;
            header_bytes += line.size();
            if (header_bytes > max_header_bytes) return Io::invalid;
            const auto colon = line.find(':');
            if (colon == std::string::npos || colon == 0) return Io::invalid;
            const std::string_view name = std::string_view(line).substr(0, colon);
            if (name.find_first_of(" \t") != std::string_view::npos) return Io::invalid;
            request.headers.emplace_back(
                to_lower(name), std::string(trim(std::string_view(line).substr(colon + 1))));
        }
    }

    /// Reads a chunked body, de-chunking it into `body`; trailer fields are discarded.
    Io read_chunked_body(std::string& body) {
        std::string line;
        for (;;) {
            if (const Io io = read_line(line, 1024); io != Io::ok) return io;
            const std::string_view size_text =
                trim(std::string_view(line).substr(0, line.find(';')));
            std::size_t size = 0;
            const auto [end, error] =
                std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
            if (error != std::errc() || end != size_text.data() + size_text.size() ||
                size_text.empty()) {
                return Io::invalid;
            }
            if (size == 0) break;
            if (size > max_body_bytes - body.size()) return Io::invalid;
            if (const Io io = read_exact(size, body); io != Io::ok) return io;
            if (const Io io = read_line(line, 0); io != Io::ok) return io;  // The chunk's CRLF.
        }
        std::size_t trailer_bytes = 0;
        for (;;) {
            if (const Io io = read_line(line, max_header_bytes); io != Io::ok) return io;
            if (line.empty()) return Io::ok;
            trailer_bytes += line.size();
            if (trailer_bytes > max_header_bytes) return Io::invalid;
        }
    }

    /// Reads one complete request; `wants_close` tells whether the client asked to close.
    Io read_request(RecordedRequest& request, bool& wants_close) {
        if (const Io io = read_head(request); io != Io::ok) return io;

        // HTTP/1.0 clients get one response per connection; keep-alive is HTTP/1.1's.
        wants_close =
            request.http_version == "HTTP/1.0" || has_token(request.header("connection"), "close");

        const std::string transfer_encoding = request.header("transfer-encoding");
        const bool chunked = !transfer_encoding.empty();
        std::size_t content_length = 0;
        if (chunked) {
            // Only plain chunked bodies are understood; anything else can't be framed.
            if (!iequals(trim(transfer_encoding), "chunked")) return Io::invalid;
        } else if (request.has_header("content-length")) {
            const std::string text = request.header("content-length");
            const auto [end, error] =
                std::from_chars(text.data(), text.data() + text.size(), content_length);
            if (error != std::errc() || end != text.data() + text.size() || text.empty() ||
                content_length > max_body_bytes) {
                return Io::invalid;
            }
        }

        const bool has_body = chunked || content_length > 0;
        if (has_body && request.http_version != "HTTP/1.0" &&
            iequals(request.header("expect"), "100-continue")) {
            if (const Io io = send_all("HTTP/1.1 100 Continue\r\n\r\n"); io != Io::ok) return io;
        }
        if (chunked) return read_chunked_body(request.body);
        return read_exact(content_length, request.body);
    }

    // --- Writing ------------------------------------------------------------------------------

    /// Sends all of `data`, waiting while the client's window is full.
    Io send_all(std::string_view data) {
        while (!data.empty()) {
            const ssize_t sent = ::send(fd(), data.data(), data.size(), MSG_NOSIGNAL);
            if (sent >= 0) {
                data.remove_prefix(static_cast<std::size_t>(sent));
                continue;
            }
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                return (errno == EPIPE || errno == ECONNRESET) ? Io::closed : Io::failed;
            }
            if (wait_for(fd(), POLLOUT, stop_fd(), std::nullopt) != Wake::ready) {
                return Io::stopped;
            }
        }
        return Io::ok;
    }

    /// Waits until `deadline` (or forever if empty) while watching the client: bytes it sends
    /// are kept for the next request, and its EOF or reset ends the wait early.
    Io pause(std::optional<Clock::time_point> deadline) {
        for (;;) {
            const Wake wake = wait_for(fd(), POLLIN, stop_fd(), deadline);
            if (wake == Wake::stopped) return Io::stopped;
            if (wake == Wake::timed_out) return Io::ok;
            if (buffer_.size() - consumed_ > max_body_bytes + max_header_bytes) {
                return Io::invalid;
            }
            if (const Io io = receive_once(); io != Io::ok) return io;
        }
    }

    Io pause_for(std::chrono::milliseconds delay) {
        if (delay <= std::chrono::milliseconds::zero()) return Io::ok;
        return pause(Clock::now() + delay);
    }

    static std::string chunk_frame(std::string_view data) {
        char size[2 * sizeof(std::size_t)];
        const auto result = std::to_chars(size, size + sizeof size, data.size(), 16);
        std::string frame(size, result.ptr);
        frame += "\r\n";
        frame += data;
        frame += "\r\n";
        return frame;
    }

    /// Writes one response. Returns whether the connection stays open for another request.
    bool respond(const ScriptedResponse& response, bool head, bool client_wants_close) {
        const bool unframed = response.unframed;
        const bool truncates = !unframed && response.truncate_body_at.has_value();
        const bool streams = !unframed && !truncates &&
                             (!response.chunks.empty() || response.stall || response.disconnect);
        // RFC 9110 §6.4.1: these statuses never carry content nor, except 304, framing.
        const bool bodiless_status = (response.status >= 100 && response.status < 200) ||
                                     response.status == 204 || response.status == 304;
        const bool unframed_status = bodiless_status && response.status != 304;
        const bool no_body = head || bodiless_status;
        const bool close_after = response.close_connection || client_wants_close;

        std::string head_bytes = "HTTP/1.1 " + std::to_string(response.status) + " ";
        head_bytes += reason_phrase(response.status);
        head_bytes += "\r\n";
        for (const auto& [name, value] : response.headers) {
            if (iequals(name, "content-length") || iequals(name, "transfer-encoding") ||
                iequals(name, "connection")) {
                continue;
            }
            head_bytes.append(name).append(": ").append(value).append("\r\n");
        }
        if (streams && !bodiless_status) {
            head_bytes += "Transfer-Encoding: chunked\r\n";
        } else if (!streams && !unframed_status && !unframed) {
            head_bytes += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
        }
        if (close_after || unframed) head_bytes += "Connection: close\r\n";
        head_bytes += "\r\n";

        const auto gone = [this](Io io) {
            if (client_went_away(io)) server_.count_client_abort();
            return false;
        };
        // After the last byte: hold the connection silent until the client leaves, if asked.
        const auto stall_if_asked = [&] {
            if (!response.stall) return false;
            const Io io = pause(std::nullopt);
            if (client_went_away(io)) server_.count_client_abort();
            return true;
        };

        if (const Io io = pause_for(response.delay_before_headers); io != Io::ok) return gone(io);

        if (unframed) {
            std::vector<std::string_view> pieces;
            if (!no_body) {
                if (!response.body.empty()) pieces.emplace_back(response.body);
                for (const auto& chunk : response.chunks) {
                    if (!chunk.empty()) pieces.emplace_back(chunk);
                }
            }
            // The head leaves with the first piece; the end of the body is the close.
            std::string out = std::move(head_bytes);
            for (std::size_t i = 0; i < pieces.size(); ++i) {
                if (i > 0) {
                    if (const Io io = pause_for(response.chunk_delay); io != Io::ok)
                        return gone(io);
                }
                out += pieces[i];
                if (const Io io = send_all(out); io != Io::ok) return gone(io);
                out.clear();
            }
            if (!out.empty()) {
                if (const Io io = send_all(out); io != Io::ok) return gone(io);
            }
            if (!stall_if_asked()) close_gracefully();
            return false;
        }

        if (truncates) {
            if (!no_body) {
                head_bytes.append(response.body, 0,
                                  std::min(*response.truncate_body_at, response.body.size()));
            }
            if (const Io io = send_all(head_bytes); io != Io::ok) return gone(io);
            (void)stall_if_asked();
            return false;  // The socket closes with the body short of its Content-Length.
        }

        if (!streams) {
            if (!no_body) head_bytes += response.body;
            if (const Io io = send_all(head_bytes); io != Io::ok) return gone(io);
        } else {
            std::vector<std::string_view> pieces;
            if (!no_body) {
                if (!response.body.empty()) pieces.emplace_back(response.body);
                for (const auto& chunk : response.chunks) {
                    if (!chunk.empty()) pieces.emplace_back(chunk);  // Empty would end the body.
                }
            }
            // The headers leave together with the first chunk, as a real server's first flush.
            std::string out = std::move(head_bytes);
            for (std::size_t i = 0; i < pieces.size(); ++i) {
                if (i > 0) {
                    if (const Io io = pause_for(response.chunk_delay); io != Io::ok)
                        return gone(io);
                }
                out += chunk_frame(pieces[i]);
                if (const Io io = send_all(out); io != Io::ok) return gone(io);
                out.clear();
            }
            if (!out.empty()) {
                if (const Io io = send_all(out); io != Io::ok) return gone(io);
            }
            if (stall_if_asked()) return false;
            if (response.disconnect) return false;  // The socket closes without the last chunk.
            if (!no_body) {
                if (const Io io = send_all("0\r\n\r\n"); io != Io::ok) return gone(io);
            }
        }

        if (close_after) {
            close_gracefully();
            return false;
        }
        return true;
    }

    /// Sends a plain error and closes; used when the request can't be parsed.
    void send_error(int status, std::string_view message) {
        const nlohmann::json body = {{"error", message}};
        const std::string text = body.dump();
        std::string out = "HTTP/1.1 " + std::to_string(status) + " ";
        out += reason_phrase(status);
        out +=
            "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(text.size()) +
            "\r\nConnection: close\r\n\r\n" + text;
        if (send_all(out) == Io::ok) close_gracefully();
    }

    /// Half-closes, then waits briefly for the client's EOF, so that unread bytes from the
    /// client don't turn the close into a reset that could destroy the response in flight.
    void close_gracefully() {
        ::shutdown(fd(), SHUT_WR);
        const auto deadline = Clock::now() + linger_timeout;
        for (;;) {
            if (wait_for(fd(), POLLIN, stop_fd(), deadline) != Wake::ready) return;
            char discard[read_block];
            const ssize_t got = ::recv(fd(), discard, sizeof discard, 0);
            if (got == 0 ||
                (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                return;
            }
        }
    }
};

// ---------------------------------------------------------------------------------------------
// Accepting and lifetime

void TestServer::Impl::serve(UniqueFd socket) {
    try {
        Connection connection(*this, std::move(socket));
        connection.run();
    } catch (...) {
        // A test tool must never take the test run down; the connection just closes.
    }
}

void TestServer::Impl::reap_finished_connections() {
    for (auto it = connections.begin(); it != connections.end();) {
        if (it->finished.load(std::memory_order_acquire)) {
            it->thread.join();
            it = connections.erase(it);
        } else {
            ++it;
        }
    }
}

void TestServer::Impl::accept_loop() {
    for (;;) {
        if (wait_for(listener.get(), POLLIN, stop_read.get(), std::nullopt) != Wake::ready) return;
        UniqueFd socket(::accept(listener.get(), nullptr, nullptr));
        if (!socket.valid()) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                // Out of resources: back off instead of spinning on a readable listener.
                if (wait_for(stop_read.get(), POLLIN, stop_read.get(),
                             Clock::now() + std::chrono::milliseconds(10)) != Wake::timed_out) {
                    return;
                }
            }
            continue;
        }
        reap_finished_connections();
        try {
            set_cloexec_nonblocking(socket.get());
            set_socket_options(socket.get());
            {
                const std::lock_guard lock(mutex);
                ++connections_accepted;
                ++open_connections;
            }
            changed.notify_all();
            auto& slot = connections.emplace_back();
            try {
                slot.thread = std::thread([this, &slot, fd = std::move(socket)]() mutable {
                    serve(std::move(fd));
                    connection_closed();
                    slot.finished.store(true, std::memory_order_release);
                });
            } catch (...) {
                connections.pop_back();
                connection_closed();
                throw;
            }
        } catch (...) {
            // Couldn't configure the socket or start a thread: drop this connection only.
        }
    }
}

TestServer::TestServer() : impl_(std::make_unique<Impl>()) {
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) throw_errno("pipe");
    impl_->stop_read = UniqueFd(pipe_fds[0]);
    impl_->stop_write = UniqueFd(pipe_fds[1]);
    set_cloexec_nonblocking(impl_->stop_read.get());
    set_cloexec_nonblocking(impl_->stop_write.get());

    impl_->listener = UniqueFd(::socket(AF_INET, SOCK_STREAM, 0));
    if (!impl_->listener.valid()) throw_errno("socket");
    set_cloexec_nonblocking(impl_->listener.get());
    const int one = 1;
    ::setsockopt(impl_->listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);

    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = 0;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(impl_->listener.get(), reinterpret_cast<const sockaddr*>(&address),
               sizeof address) != 0) {
        throw_errno("bind");
    }
    if (::listen(impl_->listener.get(), SOMAXCONN) != 0) throw_errno("listen");
    socklen_t length = sizeof address;
    if (::getsockname(impl_->listener.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
        throw_errno("getsockname");
    }
    impl_->port = ntohs(address.sin_port);

    impl_->acceptor = std::thread([impl = impl_.get()] { impl->accept_loop(); });
}

TestServer::~TestServer() {
    // One byte makes the stop pipe readable for good; every poll in every thread watches it.
    const char byte = 'x';
    while (::write(impl_->stop_write.get(), &byte, 1) < 0 && errno == EINTR) {
    }
    if (impl_->acceptor.joinable()) impl_->acceptor.join();
    for (auto& connection : impl_->connections) {
        if (connection.thread.joinable()) connection.thread.join();
    }
    impl_->connections.clear();
}

std::uint16_t TestServer::port() const noexcept {
    return impl_->port;
}

std::string TestServer::base_url() const {
    return "http://127.0.0.1:" + std::to_string(impl_->port);
}

void TestServer::enqueue(ScriptedResponse response) {
    const std::lock_guard lock(impl_->mutex);
    impl_->queue.push_back(std::move(response));
}

void TestServer::set_handler(RequestHandler handler) {
    const std::lock_guard lock(impl_->mutex);
    impl_->handler = std::move(handler);
}

std::size_t TestServer::pending_responses() const {
    const std::lock_guard lock(impl_->mutex);
    return impl_->queue.size();
}

std::vector<RecordedRequest> TestServer::requests() const {
    const std::lock_guard lock(impl_->mutex);
    return impl_->requests;
}

std::size_t TestServer::request_count() const {
    const std::lock_guard lock(impl_->mutex);
    return impl_->requests.size();
}

bool TestServer::wait_for_requests(std::size_t count, std::chrono::milliseconds timeout) const {
    return impl_->wait_until(timeout, [&] { return impl_->requests.size() >= count; });
}

std::size_t TestServer::connections_accepted() const {
    const std::lock_guard lock(impl_->mutex);
    return impl_->connections_accepted;
}

std::size_t TestServer::open_connections() const {
    const std::lock_guard lock(impl_->mutex);
    return impl_->open_connections;
}

bool TestServer::wait_for_open_connections(std::size_t count,
                                           std::chrono::milliseconds timeout) const {
    return impl_->wait_until(timeout, [&] { return impl_->open_connections <= count; });
}

std::size_t TestServer::client_aborts() const {
    const std::lock_guard lock(impl_->mutex);
    return impl_->client_aborts;
}

bool TestServer::wait_for_client_aborts(std::size_t count,
                                        std::chrono::milliseconds timeout) const {
    return impl_->wait_until(timeout, [&] { return impl_->client_aborts >= count; });
}

}  // namespace ullm::test
