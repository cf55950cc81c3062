#include <ullm/http/curl_transport.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/redact.hpp>

#include "../core/buffer_pool.hpp"
#include "../core/text.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace ullm {

namespace {

using Clock = std::chrono::steady_clock;

void initialise_curl_once() {
    static const CURLcode result = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (result != CURLE_OK) {
        throw TransportError(
            ErrorCode::transport_error,
            std::string("libcurl could not be initialised: ") + curl_easy_strerror(result), false);
    }
}

// What the consumer sees of a transfer once it ends in failure.
struct Failure {
    ErrorCode code = ErrorCode::transport_error;
    std::string message;
    bool retryable = false;
};

Failure classify(CURLcode result, const char* detail) {
    std::string message = curl_easy_strerror(result);
    if (detail != nullptr && *detail != '\0') message += std::string(": ") + detail;
    while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) {
        message.pop_back();
    }
    switch (result) {
        case CURLE_OPERATION_TIMEDOUT:
            return {ErrorCode::timeout, message, true};
        case CURLE_URL_MALFORMAT:
        case CURLE_UNSUPPORTED_PROTOCOL:
            return {ErrorCode::invalid_url, message, false};
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        case CURLE_SSL_INVALIDCERTSTATUS:
            return {ErrorCode::tls_error, message, false};
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
        case CURLE_COULDNT_CONNECT:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_HTTP3:
            return {ErrorCode::connection_failed, message, true};
        default:
            return {ErrorCode::connection_failed, message, false};
    }
}

}  // namespace

/// One request on the I/O thread. Fields marked (io) are touched only by the I/O thread;
/// the rest are guarded by `mutex`.
struct Transfer {
    CURL* easy = nullptr;               // (io)
    curl_slist* header_list = nullptr;  // (io)
    std::string request_body;           // (io) must outlive the transfer
    char error_buffer[CURL_ERROR_SIZE] = {};
    bool streaming = false;
    std::size_t buffer_limit = 0;  // stream: pause above this; send: fail above this
    std::chrono::milliseconds idle_timeout{0};
    std::vector<std::string> secrets;
    Clock::time_point last_activity = Clock::now();  // (io)
    // (io) The engine's list of transfers with news for their reader, and whether this one is
    // on it: a reader is woken once per loop pass, not once per callback.
    std::vector<Transfer*>* news = nullptr;
    bool has_news = false;

    std::mutex mutex;
    std::condition_variable changed;
    HttpResponseHead head;
    bool head_ready = false;
    std::string body;
    bool paused = false;
    bool done = false;
    bool cancelled = false;
    bool too_large = false;
    std::optional<Failure> failure;
    // Started with `CurlTransport::start`: told of the end instead of a waiting reader.
    ResponseHandler on_done;
    // A stream's reader that does not wait: told when there is something to read.
    std::shared_ptr<const std::function<void()>> on_news;

    // Records that the transfer ended, with `ending` (its message redacted) if it failed.
    // False when it had ended already. Under `mutex` when another thread may look.
    bool mark_ended(std::optional<Failure> ending) {
        if (done) return false;
        done = true;
        head_ready = true;
        if (ending) {
            ending->message = detail::redact(ending->message, secrets);
            failure = std::move(ending);
        }
        return true;
    }

    ~Transfer() {
        if (header_list != nullptr) curl_slist_free_all(header_list);
        if (easy != nullptr) curl_easy_cleanup(easy);
    }
};

/// What a blocking `send` drives its transfer with, on its own thread: a multi handle of its
/// own (with the connections it keeps open for the next send) and an easy handle that is reset,
/// not rebuilt, for each request. Kept by the engine between sends.
struct Lane {
    CURLM* multi = nullptr;
    CURL* easy = nullptr;

    Lane() : multi(curl_multi_init()), easy(curl_easy_init()) {
        if (multi == nullptr || easy == nullptr) {
            throw TransportError(ErrorCode::transport_error, "libcurl could not create a handle",
                                 false);
        }
    }
    ~Lane() {
        if (easy != nullptr) curl_easy_cleanup(easy);
        if (multi != nullptr) curl_multi_cleanup(multi);
    }
    Lane(const Lane&) = delete;
    Lane& operator=(const Lane&) = delete;
};

// What driving a transfer on a lane came to (`Engine::pump`): whether it ended, and how.
struct Pumped {
    bool ended = false;
    std::optional<Failure> failure;
};

namespace {

TransportError failure_error(const Failure& failure) {
    return TransportError(failure.code, failure.message, failure.retryable);
}

// The end of a finished transfer: its response moved into `response`, or the error. Called
// with the transfer's mutex held.
std::exception_ptr outcome(Transfer& transfer, HttpResponse& response) {
    if (transfer.cancelled) {
        return std::make_exception_ptr(CancelledError("the request was cancelled"));
    }
    if (transfer.failure) return std::make_exception_ptr(failure_error(*transfer.failure));
    static_cast<HttpResponseHead&>(response) = std::move(transfer.head);
    response.body = std::move(transfer.body);
    return nullptr;
}

}  // namespace

namespace {
class LaneStream;
}  // namespace

class CurlTransport::Engine : public std::enable_shared_from_this<CurlTransport::Engine> {
    friend class ullm::LaneStream;  // qualified: the one of this file's unnamed namespace

public:
    explicit Engine(CurlTransportOptions options) : options_(std::move(options)) {
        initialise_curl_once();
        if (options_.ca_bundle.empty()) {
            for (const char* variable : {"CURL_CA_BUNDLE", "SSL_CERT_FILE"}) {
                if (const char* value = std::getenv(variable); value != nullptr && *value != '\0') {
                    options_.ca_bundle = value;
                    break;
                }
            }
        }
        multi_ = curl_multi_init();
        if (multi_ == nullptr) {
            throw TransportError(ErrorCode::transport_error, "curl_multi_init failed", false);
        }
        curl_multi_setopt(multi_, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    }

    // Starts the I/O thread, which holds the engine until it ends: a handler run there may
    // drop the last reference to the transport, and the loop must outlive that.
    void launch() {
        thread_ = std::thread([self = shared_from_this()] { self->run(); });
    }

    ~Engine() {
        stop();
        curl_multi_cleanup(multi_);
    }

    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Stops the I/O thread, failing every transfer still running, blocking sends included.
    // Idempotent.
    void stop() {
        {
            std::lock_guard lock(commands_mutex_);
            if (stopping_) return;
            stopping_ = true;
        }
        {
            std::lock_guard lock(lanes_mutex_);
            lanes_closed_.store(true);
            for (Lane* lane : busy_lanes_) curl_multi_wakeup(lane->multi);
            idle_lanes_.clear();
        }
        curl_multi_wakeup(multi_);
        if (!thread_.joinable()) return;
        if (thread_.get_id() == std::this_thread::get_id()) {
            // Called by a handler on the I/O thread itself: the loop ends when it returns.
            thread_.detach();
        } else {
            thread_.join();
        }
    }

    // Sends `request` on the calling thread, on a lane: no hop to the I/O thread and back (two
    // wake-ups of two threads per request, about a fifth of a small call's CPU), and the caller
    // is blocked in any case. The same transfer settings, limits and errors as the I/O loop's.
    HttpResponse send_on_lane(const HttpRequest& request, const std::stop_token& stop) {
        std::unique_ptr<Lane> lane = take_lane();
        Transfer transfer;
        curl_easy_reset(lane->easy);
        configure(transfer, request, false, lane->easy);
        transfer.mark_ended(drive(*lane, transfer, stop));
        transfer.easy = nullptr;  // the lane's, kept for the next send
        give_lane(std::move(lane));
        HttpResponse response;
        if (const std::exception_ptr error = outcome(transfer, response))
            std::rethrow_exception(error);
        return response;
    }

    std::shared_ptr<Transfer> start(const HttpRequest& request, bool streaming,
                                    ResponseHandler on_done = {}) {
        auto transfer = std::make_shared<Transfer>();
        transfer->on_done = std::move(on_done);
        if (streaming) transfer->body = buffers_.take();
        transfer->news = &news_;
        configure(*transfer, request, streaming, curl_easy_init());
        post({Command::Kind::add, transfer});
        return transfer;
    }

    /// Receive buffers of streams that ended, kept for the next streams.
    detail::BufferPool& buffers() noexcept { return buffers_; }

    void cancel(const std::shared_ptr<Transfer>& transfer) {
        {
            std::lock_guard lock(transfer->mutex);
            if (transfer->cancelled) return;
            transfer->cancelled = true;
            // A finished transfer has left the loop already: waking it would be a wasted pass.
            if (transfer->done) return;
        }
        transfer->changed.notify_all();
        post({Command::Kind::remove, transfer});
    }

    void resume(const std::shared_ptr<Transfer>& transfer) {
        post({Command::Kind::resume, transfer});
    }

    std::size_t active() const {
        std::lock_guard lock(commands_mutex_);
        return active_count_;
    }

private:
    struct Command {
        enum class Kind { add, remove, resume } kind;
        std::shared_ptr<Transfer> transfer;
    };

    void post(Command command) {
        bool queued = false;
        std::shared_ptr<Transfer> refused;
        {
            std::lock_guard lock(commands_mutex_);
            if (!stopping_) {
                commands_.push_back(std::move(command));
                queued = true;
            } else if (command.kind == Command::Kind::add) {
                refused = std::move(command.transfer);
            }
        }
        if (queued) curl_multi_wakeup(multi_);
        // Unlocked: the handler it runs may start another request.
        if (refused) {
            finish(*refused, Failure{ErrorCode::connection_failed,
                                     "the transport has been shut down", false});
        }
    }

    // Sets `transfer` up for `request` (a stream's or a whole response's limits, its idle
    // timeout, its secrets, its body) and `easy` (fresh or reset) with it, which it is given.
    void configure(Transfer& transfer, const HttpRequest& request, bool streaming, CURL* easy) {
        if (easy == nullptr)
            throw TransportError(ErrorCode::transport_error, "curl_easy_init failed", false);
        transfer.streaming = streaming;
        transfer.buffer_limit =
            streaming ? options_.stream_buffer_bytes : options_.max_response_bytes;
        transfer.idle_timeout = request.idle_timeout;
        transfer.secrets = detail::request_secrets(request);
        transfer.request_body = request.body;
        transfer.easy = easy;
        curl_easy_setopt(easy, CURLOPT_URL, request.url.c_str());
        curl_easy_setopt(easy, CURLOPT_PRIVATE, &transfer);
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, transfer.error_buffer);
        curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
        curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                         static_cast<long>(request.connect_timeout.count()));
        curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(easy, CURLOPT_USERAGENT, options_.user_agent.c_str());
        if (!transfer.streaming) curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, options_.insecure_skip_tls_verify ? 0L : 1L);
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, options_.insecure_skip_tls_verify ? 0L : 2L);
        if (!options_.ca_bundle.empty()) {
            curl_easy_setopt(easy, CURLOPT_CAINFO, options_.ca_bundle.c_str());
        }
        if (!options_.proxy.empty()) curl_easy_setopt(easy, CURLOPT_PROXY, options_.proxy.c_str());
        // A proxy's answer to CONNECT (an HTTPS tunnel, from the option or the environment) is
        // not the response: without this, libcurl passes its status line and headers on.
        curl_easy_setopt(easy, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);

        const std::string method = request.method.empty() ? "POST" : request.method;
        if (method == "GET") {
            curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
        } else {
            if (method != "POST") curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method.c_str());
            if (method == "POST" || !transfer.request_body.empty()) {
                curl_easy_setopt(easy, CURLOPT_POSTFIELDS, transfer.request_body.data());
                curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                                 static_cast<curl_off_t>(transfer.request_body.size()));
            }
        }

        bool has_expect = false;
        for (const auto& [name, value] : request.headers) {
            const std::string line = name + ": " + value;
            curl_slist* next = curl_slist_append(transfer.header_list, line.c_str());
            if (next == nullptr)
                throw TransportError(ErrorCode::transport_error, "out of memory", false);
            transfer.header_list = next;
            has_expect = has_expect || detail::lower_ascii(name) == "expect";
        }
        if (!has_expect) {
            // A 100-continue round trip only delays requests to APIs that always accept.
            transfer.header_list = curl_slist_append(transfer.header_list, "Expect:");
        }
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, transfer.header_list);

        curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &Engine::on_header);
        curl_easy_setopt(easy, CURLOPT_HEADERDATA, &transfer);
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &Engine::on_body);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, &transfer);
    }

    static std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
        auto& transfer = *static_cast<Transfer*>(user);
        const std::size_t length = size * count;
        const std::string_view line(data, length);
        transfer.last_activity = Clock::now();
        std::lock_guard lock(transfer.mutex);
        // The head is final once ready: the reader holds a reference to it. What comes after
        // (trailers) is not part of it.
        if (transfer.head_ready) return length;
        if (line.rfind("HTTP/", 0) == 0) {
            // A new status line: 1xx interim responses and proxies start a fresh header block.
            transfer.head = {};
            const auto space = line.find(' ');
            if (space != std::string_view::npos) {
                transfer.head.status = std::atoi(std::string(line.substr(space + 1, 3)).c_str());
            }
            return length;
        }
        const std::string_view text = detail::trim_space(line);
        if (text.empty()) {
            if (transfer.head.status >= 200) {
                transfer.head_ready = true;
                announce(transfer);
            }
            return length;
        }
        const auto colon = text.find(':');
        if (colon != std::string_view::npos) {
            transfer.head.headers.emplace_back(
                detail::lower_ascii(text.substr(0, colon)),
                std::string(detail::trim_space(text.substr(colon + 1))));
        }
        return length;
    }

    static std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
        auto& transfer = *static_cast<Transfer*>(user);
        const std::size_t length = size * count;
        transfer.last_activity = Clock::now();
        {
            std::lock_guard lock(transfer.mutex);
            if (transfer.streaming && transfer.body.size() >= transfer.buffer_limit) {
                transfer.paused = true;
                return CURL_WRITEFUNC_PAUSE;
            }
            if (!transfer.streaming && transfer.body.size() + length > transfer.buffer_limit) {
                transfer.too_large = true;
                return 0;  // aborts the transfer with CURLE_WRITE_ERROR
            }
            transfer.body.append(data, length);
            transfer.head_ready = true;
        }
        announce(transfer);
        return length;
    }

    // Notes that `transfer`'s reader has something new, to be woken by `wake_readers`.
    static void announce(Transfer& transfer) {
        // The reader of a whole response waits for its end only, which `finish` announces.
        // A stream driven on its reader's thread (`LaneStream`) has no one to wake.
        if (!transfer.streaming || transfer.news == nullptr || transfer.has_news) return;
        transfer.has_news = true;
        transfer.news->push_back(&transfer);
    }

    // Wakes the reader of each transfer with news, once. Runs before anything can remove a
    // transfer from the loop (complete, detach), so every pointer listed is still held.
    void wake_readers() {
        for (Transfer* transfer : news_) {
            transfer->has_news = false;
            transfer->changed.notify_all();
            tell_reader(*transfer);
        }
        news_.clear();
    }

    // Calls the reader's `notify_when_ready` callback, if it has one.
    static void tell_reader(Transfer& transfer) noexcept {
        std::shared_ptr<const std::function<void()>> notify;
        {
            std::lock_guard lock(transfer.mutex);
            notify = transfer.on_news;
        }
        if (!notify) return;
        try {
            (*notify)();
        } catch (...) {
            // A notification must not throw; the loop goes on with the other transfers.
        }
    }

    void publish_active_count() {
        std::lock_guard lock(commands_mutex_);
        active_count_ = active_.size();
    }

    void finish(Transfer& transfer, std::optional<Failure> failure) {
        ResponseHandler handler;
        HttpResponse response;
        std::exception_ptr error;
        {
            std::lock_guard lock(transfer.mutex);
            if (!transfer.mark_ended(std::move(failure))) return;
            if (transfer.on_done) {
                handler = std::move(transfer.on_done);
                error = outcome(transfer, response);
            }
        }
        transfer.changed.notify_all();
        tell_reader(transfer);
        if (!handler) return;
        try {
            handler(std::move(response), std::move(error));
        } catch (...) {
            // A handler must not throw; the loop goes on with the other transfers.
        }
    }

    // `transfer` by value: it erases the map entry a reference could point into.
    void detach(std::shared_ptr<Transfer> transfer,  // NOLINT(performance-unnecessary-value-param)
                std::optional<Failure> failure) {
        if (active_.erase(transfer->easy) == 0) return;
        publish_active_count();
        curl_multi_remove_handle(multi_, transfer->easy);
        finish(*transfer, std::move(failure));
    }

    void complete(CURL* easy, CURLcode result) {
        const auto it = active_.find(easy);
        if (it == active_.end()) return;
        const auto transfer = it->second;
        detach(transfer, ended_with(*transfer, result));
    }

    // How a transfer that libcurl reports done with `result` ended.
    static std::optional<Failure> ended_with(const Transfer& transfer, CURLcode result) {
        if (result == CURLE_OK) return std::nullopt;
        if (transfer.too_large) {
            return Failure{
                ErrorCode::response_too_large,
                "the response body exceeded " + std::to_string(transfer.buffer_limit) + " bytes",
                false};
        }
        return classify(result, transfer.error_buffer);
    }

    std::unique_ptr<Lane> take_lane() {
        std::unique_ptr<Lane> lane;
        {
            std::lock_guard lock(lanes_mutex_);
            if (!idle_lanes_.empty()) {
                lane = std::move(idle_lanes_.back());
                idle_lanes_.pop_back();
            }
        }
        if (!lane) lane = std::make_unique<Lane>();
        std::lock_guard lock(lanes_mutex_);
        busy_lanes_.push_back(lane.get());
        return lane;
    }

    // Keeps `lane` for the next send, up to `max_idle_lanes` of them; the most recently used is
    // taken first, with its connection still warm.
    void give_lane(std::unique_ptr<Lane> lane) {
        std::lock_guard lock(lanes_mutex_);
        busy_lanes_.erase(std::find(busy_lanes_.begin(), busy_lanes_.end(), lane.get()));
        if (!lanes_closed_.load() && idle_lanes_.size() < max_idle_lanes) {
            idle_lanes_.push_back(std::move(lane));
        }
    }

    // Runs `transfer` on `lane` until it ends, is cancelled through `stop`, falls silent for
    // its idle timeout or the transport shuts down. Leaves the easy handle out of the multi.
    std::optional<Failure> drive(Lane& lane, Transfer& transfer, const std::stop_token& stop) {
        std::atomic<bool> stopped{false};
        const std::stop_callback on_stop(stop, [&] {
            stopped.store(true);
            curl_multi_wakeup(lane.multi);
        });
        if (const CURLMcode code = curl_multi_add_handle(lane.multi, transfer.easy);
            code != CURLM_OK) {
            return Failure{ErrorCode::transport_error, curl_multi_strerror(code), false};
        }
        transfer.last_activity = Clock::now();
        Pumped pumped = pump(lane, transfer, stopped, [] { return false; });
        curl_multi_remove_handle(lane.multi, transfer.easy);
        return std::move(pumped.failure);
    }

    // Drives `transfer`, whose easy handle is in `lane`'s multi, on the calling thread until
    // `enough()` holds after a pass, or until the transfer ends: done, cancelled through
    // `stopped` (then `transfer.cancelled`), silent for its idle timeout, or cut off by the
    // transport's shutdown.
    template <typename Enough>
    Pumped pump(Lane& lane, Transfer& transfer, const std::atomic<bool>& stopped, Enough enough) {
        for (;;) {
            if (stopped.load()) {
                std::lock_guard lock(transfer.mutex);
                transfer.cancelled = true;
                return {true, std::nullopt};
            }
            if (lanes_closed_.load()) {
                return {true, Failure{ErrorCode::connection_failed,
                                      "the transport has been shut down", false}};
            }
            int running = 0;
            curl_multi_perform(lane.multi, &running);
            int queued = 0;
            bool done = false;
            std::optional<Failure> failure;
            while (CURLMsg* message = curl_multi_info_read(lane.multi, &queued)) {
                if (message->msg != CURLMSG_DONE) continue;
                failure = ended_with(transfer, message->data.result);
                done = true;
            }
            if (done) return {true, std::move(failure)};
            if (enough()) return {false, std::nullopt};
            std::chrono::milliseconds wait{1000};
            if (transfer.idle_timeout.count() > 0) {
                const auto left = transfer.last_activity + transfer.idle_timeout - Clock::now();
                if (left <= Clock::duration::zero()) {
                    return {true, Failure{ErrorCode::timeout,
                                          "no data received for " +
                                              std::to_string(transfer.idle_timeout.count()) + " ms",
                                          true}};
                }
                wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(left) +
                                          std::chrono::milliseconds(1));
            }
            curl_multi_poll(lane.multi, nullptr, 0, static_cast<int>(wait.count()), nullptr);
        }
    }

    void apply(Command& command) {
        const auto& transfer = command.transfer;
        switch (command.kind) {
            case Command::Kind::add: {
                bool cancelled = false;
                {
                    // Another thread's `cancel` may be setting it now.
                    std::lock_guard lock(transfer->mutex);
                    cancelled = transfer->cancelled;
                }
                if (cancelled) {
                    finish(*transfer, std::nullopt);
                    return;
                }
                transfer->last_activity = Clock::now();
                if (const CURLMcode code = curl_multi_add_handle(multi_, transfer->easy);
                    code != CURLM_OK) {
                    finish(*transfer,
                           Failure{ErrorCode::transport_error, curl_multi_strerror(code), false});
                    return;
                }
                active_.emplace(transfer->easy, transfer);
                publish_active_count();
                return;
            }
            case Command::Kind::remove:
                detach(transfer, std::nullopt);
                return;
            case Command::Kind::resume: {
                {
                    std::lock_guard lock(transfer->mutex);
                    if (!transfer->paused) return;
                    transfer->paused = false;
                }
                transfer->last_activity = Clock::now();
                if (active_.count(transfer->easy) != 0)
                    curl_easy_pause(transfer->easy, CURLPAUSE_CONT);
                return;
            }
        }
    }

    // Aborts transfers that have been silent for longer than their idle timeout and returns
    // how long the loop may sleep before the next deadline.
    std::chrono::milliseconds enforce_idle_timeouts() {
        const auto now = Clock::now();
        std::chrono::milliseconds wait{1000};
        std::vector<std::shared_ptr<Transfer>> expired;
        for (const auto& [easy, transfer] : active_) {
            if (transfer->idle_timeout.count() <= 0) continue;
            bool paused = false;
            {
                std::lock_guard lock(transfer->mutex);
                paused = transfer->paused;
            }
            if (paused) continue;  // the consumer is slow, not the server
            const auto deadline = transfer->last_activity + transfer->idle_timeout;
            if (deadline <= now) {
                expired.push_back(transfer);
            } else {
                wait = std::min(
                    wait, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) +
                              std::chrono::milliseconds(1));
            }
        }
        for (const auto& transfer : expired) {
            detach(transfer, Failure{ErrorCode::timeout,
                                     "no data received for " +
                                         std::to_string(transfer->idle_timeout.count()) + " ms",
                                     true});
        }
        return wait;
    }

    void run() {
#if defined(__linux__)
        pthread_setname_np(pthread_self(), "ullm-io");
#endif
        for (;;) {
            std::deque<Command> commands;
            {
                std::lock_guard lock(commands_mutex_);
                if (stopping_) break;
                commands.swap(commands_);
            }
            for (auto& command : commands) apply(command);

            int running = 0;
            curl_multi_perform(multi_, &running);
            // Also what resuming a paused transfer delivered while the commands were applied.
            wake_readers();
            int queued = 0;
            while (CURLMsg* message = curl_multi_info_read(multi_, &queued)) {
                if (message->msg == CURLMSG_DONE)
                    complete(message->easy_handle, message->data.result);
            }
            const auto wait = enforce_idle_timeouts();
            {
                std::lock_guard lock(commands_mutex_);
                if (!commands_.empty() || stopping_) continue;
            }
            curl_multi_poll(multi_, nullptr, 0, static_cast<int>(wait.count()), nullptr);
        }
        // Shutting down: every transfer still running fails; queued ones never start.
        std::deque<Command> leftover;
        {
            std::lock_guard lock(commands_mutex_);
            leftover.swap(commands_);
        }
        for (auto& command : leftover) {
            finish(*command.transfer, Failure{ErrorCode::connection_failed,
                                              "the transport has been shut down", false});
        }
        while (!active_.empty()) {
            // A copy: detach() erases the map entry the reference would point into.
            const std::shared_ptr<Transfer> transfer = active_.begin()->second;
            detach(transfer, Failure{ErrorCode::connection_failed,
                                     "the transport has been shut down", false});
        }
    }

    CurlTransportOptions options_;
    CURLM* multi_ = nullptr;
    std::unordered_map<CURL*, std::shared_ptr<Transfer>> active_;  // (io)
    std::vector<Transfer*> news_;                                  // (io) see Transfer::news
    detail::BufferPool buffers_;

    static constexpr std::size_t max_idle_lanes = 64;
    std::mutex lanes_mutex_;
    std::vector<std::unique_ptr<Lane>> idle_lanes_;
    std::vector<Lane*> busy_lanes_;
    std::atomic<bool> lanes_closed_{false};

    mutable std::mutex commands_mutex_;
    std::deque<Command> commands_;
    bool stopping_ = false;
    std::size_t active_count_ = 0;
    std::thread thread_;
};

namespace {

[[noreturn]] void throw_failure(const Failure& failure) {
    throw failure_error(failure);
}

void cancel_quietly(CurlTransport::Engine& engine,
                    const std::shared_ptr<Transfer>& transfer) noexcept {
    try {
        engine.cancel(transfer);
    } catch (...) {
        // Cancelling must never throw; at worst the transfer finishes on its own.
    }
}

// A request of `CurlTransport::start`.
class CurlPendingRequest final : public PendingRequest {
public:
    CurlPendingRequest(std::shared_ptr<CurlTransport::Engine> engine,
                       std::shared_ptr<Transfer> transfer)
        : engine_(std::move(engine)), transfer_(std::move(transfer)) {}

    void cancel() noexcept override { cancel_quietly(*engine_, transfer_); }

private:
    std::shared_ptr<CurlTransport::Engine> engine_;
    std::shared_ptr<Transfer> transfer_;
};

// The head of a stream's transfer once its status line and headers arrived or it ended: what
// `HttpStream::head()` returns or throws. Called with the transfer's mutex held.
const HttpResponseHead& checked_head(Transfer& transfer) {
    if (transfer.cancelled) throw CancelledError("the request was cancelled");
    if (transfer.head.status == 0) {
        // No response at all: the failure (or an empty reply) is all there is to report.
        if (transfer.failure) throw_failure(*transfer.failure);
        throw TransportError(ErrorCode::connection_failed, "the server sent no response", true);
    }
    return transfer.head;
}

// A stream read on the I/O loop: the reader waits for what the loop received, or is told.
// Registers `on_stop` for the lifetime of a wait; the callback cancels the transfer.
class CurlStream final : public HttpStream {
public:
    CurlStream(std::shared_ptr<CurlTransport::Engine> engine, std::shared_ptr<Transfer> transfer,
               std::stop_token stop)
        : engine_(std::move(engine)),
          transfer_(std::move(transfer)),
          on_stop_(std::move(stop), [this] { cancel(); }) {}

    ~CurlStream() override {
        cancel();
        std::string buffer;
        {
            // Under the lock: the I/O thread may still be writing until the cancel is applied.
            std::lock_guard lock(transfer_->mutex);
            buffer.swap(transfer_->body);
            transfer_->on_news.reset();
        }
        engine_->buffers().give(std::move(buffer));
    }

    CurlStream(const CurlStream&) = delete;
    CurlStream& operator=(const CurlStream&) = delete;

    const HttpResponseHead& head() override {
        std::unique_lock lock(transfer_->mutex);
        transfer_->changed.wait(
            lock, [&] { return transfer_->head_ready || transfer_->done || transfer_->cancelled; });
        head_returned_ = true;
        return checked_head(*transfer_);
    }

    bool notify_when_ready(std::function<void()> notify) override {
        auto shared = std::make_shared<const std::function<void()>>(std::move(notify));
        std::lock_guard lock(transfer_->mutex);
        transfer_->on_news = std::move(shared);
        return true;
    }

    bool ready() override {
        std::lock_guard lock(transfer_->mutex);
        if (transfer_->done || transfer_->cancelled) return true;
        return head_returned_ ? !transfer_->body.empty() : transfer_->head_ready;
    }

    bool read(std::string& out) override {
        out.clear();
        bool resume = false;
        {
            std::unique_lock lock(transfer_->mutex);
            transfer_->changed.wait(lock, [&] {
                return !transfer_->body.empty() || transfer_->done || transfer_->cancelled;
            });
            if (transfer_->cancelled) throw CancelledError("the stream was cancelled");
            if (!transfer_->body.empty()) {
                // Copied, not swapped: each side keeps its buffer's storage, so neither grows
                // a fresh one from nothing while the stream runs.
                out.assign(transfer_->body);
                transfer_->body.clear();
                resume = transfer_->paused;
            } else if (transfer_->failure) {
                throw_failure(*transfer_->failure);
            } else {
                return false;
            }
        }
        if (resume) engine_->resume(transfer_);
        return true;
    }

    void cancel() noexcept override { cancel_quietly(*engine_, transfer_); }

private:
    std::shared_ptr<CurlTransport::Engine> engine_;
    std::shared_ptr<Transfer> transfer_;
    bool head_returned_ = false;  // the consumer's own
    std::stop_callback<std::function<void()>> on_stop_;
};

// A stream whose reader drives the transfer on its own thread, on a lane, inside `head()` and
// `read()`: the bytes are decoded where they arrive, with no wake-up of the I/O thread and
// back per read. Back-pressure is the reader's pace: nothing is read from the socket between
// its calls. The lane goes back to the engine as soon as the transfer ends.
class LaneStream final : public HttpStream {
public:
    LaneStream(std::shared_ptr<CurlTransport::Engine> engine, const HttpRequest& request,
               std::stop_token stop)
        : engine_(std::move(engine)), lane_(engine_->take_lane()) {
        try {
            curl_easy_reset(lane_->easy);
            engine_->configure(transfer_, request, true, lane_->easy);
        } catch (...) {
            end(std::nullopt);
            throw;
        }
        if (const CURLMcode code = curl_multi_add_handle(lane_->multi, transfer_.easy);
            code != CURLM_OK) {
            end(Failure{ErrorCode::transport_error, curl_multi_strerror(code), false});
        }
        transfer_.last_activity = Clock::now();
        on_stop_.emplace(std::move(stop), [this] { cancel(); });
    }

    ~LaneStream() override {
        on_stop_.reset();  // waits for a cancel running on another thread
        end(std::nullopt);
    }

    LaneStream(const LaneStream&) = delete;
    LaneStream& operator=(const LaneStream&) = delete;

    const HttpResponseHead& head() override {
        drive([this] { return transfer_.head_ready; });
        return checked_head(transfer_);
    }

    bool read(std::string& out) override {
        out.clear();
        if (drive([this] { return !transfer_.body.empty(); })) {
            // Swapped: each side keeps a buffer's storage, so neither grows one from nothing.
            out.swap(transfer_.body);
            if (transfer_.paused && !transfer_.done) {
                transfer_.paused = false;
                curl_easy_pause(transfer_.easy, CURLPAUSE_CONT);  // may write into `body`
            }
            return true;
        }
        if (transfer_.cancelled) throw CancelledError("the stream was cancelled");
        if (transfer_.failure) throw_failure(*transfer_.failure);
        return false;
    }

    void cancel() noexcept override {
        cancelled_.store(true);
        std::lock_guard lock(lane_mutex_);
        if (lane_) curl_multi_wakeup(lane_->multi);
    }

private:
    // Drives the transfer until `enough()` holds or it has ended. Returns whether `enough()`
    // held; throws `CancelledError` once cancelled, whatever arrived before.
    template <typename Enough>
    bool drive(Enough enough) {
        if (cancelled_.load() && !transfer_.cancelled) {
            end(std::nullopt);
            transfer_.cancelled = true;
        }
        if (transfer_.cancelled) throw CancelledError("the stream was cancelled");
        if (enough()) return true;
        if (transfer_.done) return false;
        Pumped pumped = engine_->pump(*lane_, transfer_, cancelled_, enough);
        if (pumped.ended) end(std::move(pumped.failure));
        if (transfer_.cancelled) throw CancelledError("the stream was cancelled");
        return enough();
    }

    // Ends the transfer (aborting it, and closing its connection, if it still runs) and gives
    // the lane back to the engine for the next call. Idempotent.
    void end(std::optional<Failure> failure) noexcept {
        if (!transfer_.mark_ended(std::move(failure))) return;
        std::unique_ptr<Lane> lane;
        {
            std::lock_guard lock(lane_mutex_);
            lane.swap(lane_);
        }
        if (transfer_.easy != nullptr) curl_multi_remove_handle(lane->multi, transfer_.easy);
        transfer_.easy = nullptr;  // the lane's
        engine_->give_lane(std::move(lane));
    }

    std::shared_ptr<CurlTransport::Engine> engine_;
    Transfer transfer_;
    std::atomic<bool> cancelled_{false};
    std::mutex lane_mutex_;       // guards `lane_` against `cancel` from another thread
    std::unique_ptr<Lane> lane_;  // null once the transfer ended
    std::optional<std::stop_callback<std::function<void()>>> on_stop_;
};

}  // namespace

CurlTransport::CurlTransport(CurlTransportOptions options)
    : engine_(std::make_shared<Engine>(std::move(options))) {
    engine_->launch();
}

CurlTransport::~CurlTransport() {
    engine_->stop();
}

HttpResponse CurlTransport::send(const HttpRequest& request, std::stop_token stop) {
    if (stop.stop_requested()) throw CancelledError("the request was cancelled");
    const std::shared_ptr<Engine> engine = engine_;  // held through a concurrent shutdown
    return engine->send_on_lane(request, stop);
}

std::unique_ptr<HttpStream> CurlTransport::open_stream(const HttpRequest& request,
                                                       std::stop_token stop) {
    if (stop.stop_requested()) throw CancelledError("the request was cancelled");
    auto transfer = engine_->start(request, true);
    return std::make_unique<CurlStream>(engine_, std::move(transfer), std::move(stop));
}

std::shared_ptr<PendingRequest> CurlTransport::start(const HttpRequest& request,
                                                     ResponseHandler on_done) {
    auto transfer = engine_->start(request, false, std::move(on_done));
    return std::make_shared<CurlPendingRequest>(engine_, std::move(transfer));
}

std::unique_ptr<HttpStream> CurlTransport::open_blocking_stream(const HttpRequest& request,
                                                                std::stop_token stop) {
    if (stop.stop_requested()) throw CancelledError("the request was cancelled");
    return std::make_unique<LaneStream>(engine_, request, std::move(stop));
}

std::size_t CurlTransport::active_transfers() const {
    return engine_->active();
}

}  // namespace ullm
