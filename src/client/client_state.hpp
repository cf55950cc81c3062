#pragma once

// Internal to the client (client.cpp, embed.cpp): its shared state and the pieces every kind of
// request uses — retries, usage reports, the redaction of a request's secrets from errors.

#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/detail/redact.hpp>
#include <ullm/detail/request_limiter.hpp>
#include <ullm/http/retry_policy.hpp>
#include <ullm/providers/price_table.hpp>

#include "../core/buffer_pool.hpp"
#include "../core/thread_pool.hpp"
#include "../core/work_thread.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ullm {

namespace detail {

/// An async call in flight, as its client's registry knows it.
class AsyncCall {
public:
    virtual ~AsyncCall() = default;
    /// Completes the call with `CancelledError` soon, unless it completed first. Never blocks.
    virtual void cancel() noexcept = 0;
};

/// The async calls of one client that have not completed. Thread-safe.
class AsyncCalls {
public:
    /// Registers `call`; false once the client has closed (the call must complete cancelled).
    bool add(const std::shared_ptr<AsyncCall>& call) {
        std::lock_guard lock(mutex_);
        if (closed_) return false;
        calls_.emplace(call.get(), call);
        return true;
    }

    void remove(const AsyncCall* call) noexcept {
        std::lock_guard lock(mutex_);
        calls_.erase(call);
    }

    /// Cancels every call registered, and every later one at once.
    void close() noexcept {
        std::vector<std::shared_ptr<AsyncCall>> running;
        {
            std::lock_guard lock(mutex_);
            closed_ = true;
            for (const auto& [key, call] : calls_) {
                if (auto held = call.lock()) running.push_back(std::move(held));
            }
        }
        for (const auto& call : running) call->cancel();
    }

private:
    std::mutex mutex_;
    bool closed_ = false;
    std::map<const AsyncCall*, std::weak_ptr<AsyncCall>> calls_;
};

}  // namespace detail

struct Client::State {
    std::string default_model;
    std::shared_ptr<Transport> transport;
    RetryPolicy retry;
    std::shared_ptr<const PriceTable> prices;
    std::shared_ptr<SessionStore> session_store;
    std::function<void(const UsageReport&)> on_usage;
    mutable std::shared_mutex mutex;
    std::map<std::string, std::shared_ptr<const Provider>, std::less<>> providers;
    /// The read buffers of streams that ended, for the next ones.
    detail::BufferPool stream_buffers;
    /// Async calls not completed yet (cancelled when the last `Client` copy goes).
    detail::AsyncCalls async_calls;
    /// Where async calls decode their answers, wait for retries and, without an executor of
    /// their own, run their callbacks. Its thread starts on the first async call.
    detail::WorkThread callbacks{"ullm-cb"};
    /// The queue in front of each provider `ClientOptions::limits` names; set by the
    /// constructor, read-only afterwards.
    std::map<std::string, std::shared_ptr<detail::RequestLimiter>, std::less<>> limiters;
    /// Where the tool callbacks of its conversations run (`ClientOptions::max_tool_threads`).
    std::unique_ptr<detail::ThreadPool> tools;
};

namespace detail {

/// Shared by the copies of one `Client` (not by its calls): the last copy closes the client's
/// async calls.
class ClientHandle {
public:
    explicit ClientHandle(const std::shared_ptr<Client::State>& state) : state_(state) {}
    ~ClientHandle() {
        if (const auto state = state_.lock()) state->async_calls.close();
    }
    ClientHandle(const ClientHandle&) = delete;
    ClientHandle& operator=(const ClientHandle&) = delete;

private:
    std::weak_ptr<Client::State> state_;
};

}  // namespace detail

namespace detail {

/// What one request is held to: its provider's limiter (null: none), the lane it waits in and
/// the tokens it is estimated at.
struct Limit {
    std::shared_ptr<RequestLimiter> limiter;
    std::uint64_t lane = 0;
    std::int64_t tokens = 0;

    /// After `error`: a rate limit with a delay holds the whole provider for that long.
    void note(const Error& error) const {
        if (!limiter) return;
        if (const auto* limited = dynamic_cast<const RateLimitError*>(&error)) {
            if (const auto delay = limited->retry_after()) {
                limiter->hold_until(RequestLimiter::Clock::now() + *delay);
            }
        }
    }

    /// The limit of a request of `http` to `provider` that may answer with up to `max_output`
    /// tokens: about 4 bytes of body a token, plus the output.
    static Limit of(const Client::State& client, std::string_view provider, std::uint64_t lane,
                    const HttpRequest& http, std::int64_t max_output) {
        const auto found = client.limiters.find(provider);
        if (found == client.limiters.end()) return {};
        return {found->second, lane,
                static_cast<std::int64_t>((http.body.size() + 3) / 4) + max_output};
    }
};

/// The output a chat request may use, as its provider's limits count it.
inline std::int64_t max_output_tokens(const ChatRequest& request) {
    return request.max_tokens.value_or(4096);
}

/// The tokens an answer reports it used, for `RequestLimiter::Permit::settle`.
template <class Answer>
std::int64_t used_tokens(const Answer& answer) {
    return answer.usage.input_tokens + answer.usage.output_tokens;
}

// A retry's delay, or nullopt when `error` must not be retried after `attempt`.
inline std::optional<std::chrono::milliseconds> retry_delay(const RetryPolicy& policy,
                                                            const Error& error, int attempt) {
    if (!error.retryable()) return std::nullopt;
    std::optional<std::chrono::milliseconds> hint;
    if (const auto* limited = dynamic_cast<const RateLimitError*>(&error)) {
        hint = limited->retry_after();
    } else if (const auto* failed = dynamic_cast<const ProviderError*>(&error)) {
        hint = failed->retry_after();
    }
    return policy.delay_before(attempt, hint, RetryPolicy::random_unit());
}

// Tells `ClientOptions::on_usage` of a finished request that began at `started` (see
// `UsageReport::started_at`); what the callback throws is dropped.
inline void report_usage(const Client::State& client, std::string_view provider,
                         const std::string& model, const Usage& usage, bool streamed, bool skipped,
                         std::chrono::system_clock::time_point started,
                         bool embedding = false) noexcept {
    if (!client.on_usage) return;
    try {
        client.on_usage(UsageReport{std::string(provider), model, usage, streamed, skipped,
                                    embedding, started});
    } catch (...) {
        // A usage callback cannot fail the request it reports.
    }
}

// Removes the request's secrets from an error: a server may echo a key in an error body, an
// HTML page or an in-stream event, and the adapters quote such bytes. Done here, for every
// provider, before anyone else sees the error.
inline void redact_secrets(Error& error, const std::vector<std::string>& secrets) {
    if (secrets.empty()) return;
    std::string clean = detail::redact(error.message(), secrets);
    if (clean != error.message()) detail::ErrorEditor::set_message(error, clean);
}

/// The transport `provider`'s requests take: its own, else the client's.
inline Transport& transport_of(const Client::State& state, const Provider& provider) {
    Transport* own = provider.transport();
    return own != nullptr ? *own : *state.transport;
}

/// The retry policy of `provider`'s requests: its own, else the client's.
inline const RetryPolicy& retry_of(const Client::State& state, const Provider& provider) {
    const RetryPolicy* own = provider.retry_policy();
    return own != nullptr ? *own : state.retry;
}

// Sends `http` to `provider` and returns what `decode` makes of the answer, retrying what the
// retry policy allows; no error it throws holds a secret of `http`.
// Each attempt waits for `limit` first.
template <class Decode>
auto send_with_retries(const Client::State& state, const Provider& provider,
                       const HttpRequest& http, const std::stop_token& stop, const Limit& limit,
                       const Decode& decode)
    -> decltype(decode(std::declval<const HttpResponse&>())) {
    Transport& transport = transport_of(state, provider);
    const RetryPolicy& retry = retry_of(state, provider);
    const std::vector<std::string> secrets = detail::request_secrets(http);
    for (int attempt = 1;; ++attempt) {
        try {
            RequestLimiter::Permit permit;
            if (limit.limiter) permit = limit.limiter->acquire(limit.lane, limit.tokens, stop);
            auto answer = decode(transport.send(http, stop));
            permit.settle(used_tokens(answer));
            return answer;
        } catch (const CancelledError&) {
            throw;
        } catch (Error& error) {
            redact_secrets(error, secrets);
            limit.note(error);
            const auto delay = retry_delay(retry, error, attempt);
            if (!delay) throw;
            if (!RetryPolicy::sleep(*delay, stop))
                throw CancelledError("the request was cancelled");
        }
    }
}

}  // namespace detail

}  // namespace ullm
