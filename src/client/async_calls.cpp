// The async face of `Client`: `complete_async` (future and callback) and `complete_many`. A
// call is one `CompletionCall`: its attempts run on the transport's loop (`Transport::start`),
// its answers are decoded and its retries wait on the client's callback thread, and it
// completes once, through `finish`.

#include <ullm/client/client.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/redact.hpp>

#include "call_steps.hpp"
#include "client_state.hpp"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

namespace ullm {

namespace {

using Handler = std::function<void(Result<ChatResponse>)>;

class CompletionCall final : public detail::AsyncCall,
                             public std::enable_shared_from_this<CompletionCall> {
public:
    CompletionCall(std::shared_ptr<Client::State> client, Handler on_done,
                   std::shared_ptr<Executor> executor)
        : client_(std::move(client)),
          on_done_(std::move(on_done)),
          executor_(std::move(executor)) {}

    // Routes, checks and starts the call; every error, from routing on, completes it.
    void begin(const Client& owner, ChatRequest request, AsyncOptions options) {
        if (!client_->async_calls.add(shared_from_this())) {
            fail(std::make_exception_ptr(CancelledError("the client was closed")));
            return;
        }
        if (options.stop.stop_possible()) {
            on_stop_.emplace(std::move(options.stop), StopHandler{weak_from_this()});
        }
        try {
            route_ = detail::routed(owner, request, false);
            request_ = std::move(request);
            if (options.budget) {
                detail::check_call_budget(*options.budget);
                if (auto skipped =
                        detail::within_budget(*client_, request_, route_, *options.budget)) {
                    detail::report_usage(*client_, route_.provider->name(), route_.model,
                                         skipped->usage, false, true);
                    post_to_client(
                        [self = shared_from_this(), skipped = std::move(*skipped)]() mutable {
                            self->finish(Result<ChatResponse>(std::move(skipped)));
                        });
                    return;
                }
            }
            if (route_.provider->offline()) {
                respond_offline();
                return;
            }
            http_ = detail::encode_request(*route_.provider, request_, false);
            secrets_ = detail::request_secrets(http_);
        } catch (...) {
            fail(std::current_exception());
            return;
        }
        start_attempt();
    }

    void cancel() noexcept override {
        std::shared_ptr<PendingRequest> pending;
        {
            std::lock_guard lock(mutex_);
            if (cancelled_ || finished_) return;
            cancelled_ = true;
            stop_.request_stop();  // an offline provider's answer
            pending = pending_;
        }
        if (pending) {
            pending->cancel();  // the transport answers with `CancelledError`
        } else {
            // Waiting for a retry, or not started: nothing else would complete the call soon.
            fail(std::make_exception_ptr(CancelledError("the request was cancelled")));
        }
    }

private:
    // Cancels the call when its stop token is requested; holds the call weakly, so that a
    // token that lives on does not keep it.
    struct StopHandler {
        std::weak_ptr<CompletionCall> call;
        void operator()() const noexcept {
            if (const auto held = call.lock()) held->cancel();
        }
    };

    void post_to_client(std::function<void()> work) noexcept {
        client_->callbacks.post(std::move(work));
    }

    void start_attempt() {
        {
            std::lock_guard lock(mutex_);
            if (finished_) return;
            ++attempt_;
        }
        if (is_cancelled()) {
            fail(std::make_exception_ptr(CancelledError("the request was cancelled")));
            return;
        }
        std::shared_ptr<PendingRequest> pending;
        try {
            pending = client_->transport->start(
                http_,
                [self = shared_from_this()](HttpResponse answer, std::exception_ptr error) mutable {
                    // The call moves on to the callback thread; the transport's thread keeps no
                    // reference to it (it may be the last one, and the loop must not free it).
                    CompletionCall& call = *self;
                    call.post_to_client([self = std::move(self), answer = std::move(answer),
                                         error = std::move(error)]() mutable {
                        self->on_answer(std::move(answer), std::move(error));
                    });
                });
        } catch (...) {
            fail(std::current_exception());
            return;
        }
        bool late_cancel = false;
        {
            std::lock_guard lock(mutex_);
            pending_ = pending;
            late_cancel = cancelled_;
        }
        if (late_cancel) pending->cancel();
    }

    bool is_cancelled() {
        std::lock_guard lock(mutex_);
        return cancelled_;
    }

    // On the callback thread: decodes an attempt's answer, or retries, or completes.
    void on_answer(HttpResponse answer, std::exception_ptr error) {
        {
            std::lock_guard lock(mutex_);
            pending_ = nullptr;
        }
        if (!error) {
            try {
                finish(Result<ChatResponse>(detail::checked(
                    *client_, route_, request_, route_.provider->decode(answer, request_), true)));
                return;
            } catch (...) {
                error = std::current_exception();
            }
        }
        std::optional<std::chrono::milliseconds> delay;
        try {
            std::rethrow_exception(error);
        } catch (const CancelledError&) {
        } catch (Error& failure) {
            detail::redact_secrets(failure, secrets_);
            error = std::current_exception();
            delay = detail::retry_delay(client_->retry, failure, attempt_);
        } catch (...) {
        }
        if (is_cancelled()) {
            finish(std::make_exception_ptr(CancelledError("the request was cancelled")));
        } else if (!delay) {
            finish(std::move(error));
        } else {
            client_->callbacks.post_after(*delay,
                                          [self = shared_from_this()] { self->start_attempt(); });
        }
    }

    // An offline provider answers on a thread of its own: its `respond` may block.
    void respond_offline() {
        std::thread([self = shared_from_this()]() mutable {
            std::exception_ptr error;
            std::optional<ChatResponse> response;
            try {
                response = detail::checked(
                    *self->client_, self->route_, self->request_,
                    self->route_.provider->respond(self->request_, self->stop_.get_token()), true);
            } catch (...) {
                error = std::current_exception();
            }
            CompletionCall& call = *self;
            call.post_to_client(
                [self = std::move(self), response = std::move(response), error]() mutable {
                    self->finish(error ? Result<ChatResponse>(error)
                                       : Result<ChatResponse>(std::move(*response)));
                });
        }).detach();
    }

    // Completes the call with `error` from the callback thread, whichever thread fails it (a
    // caller's routing error is not delivered before `complete_async` returns).
    void fail(std::exception_ptr error) noexcept {
        post_to_client([self = shared_from_this(), error = std::move(error)]() mutable {
            self->finish(Result<ChatResponse>(std::move(error)));
        });
    }

    // Completes the call, once, on the callback thread: later outcomes (a cancel racing an
    // answer) are dropped. The stop callback stays registered until the call is freed: it holds
    // the call weakly, and resetting it here could race with its registration in `begin`.
    void finish(Result<ChatResponse> result) {
        {
            std::lock_guard lock(mutex_);
            if (finished_) return;
            finished_ = true;
            pending_ = nullptr;
        }
        client_->async_calls.remove(this);
        auto deliver = [on_done = std::move(on_done_), result = std::move(result)]() mutable {
            try {
                on_done(std::move(result));
            } catch (...) {
                // A callback cannot fail the loop, or the other calls.
            }
        };
        if (executor_) {
            executor_->post(std::move(deliver));
        } else {
            deliver();
        }
    }

    std::shared_ptr<Client::State> client_;
    Handler on_done_;
    std::shared_ptr<Executor> executor_;
    Route route_;
    ChatRequest request_;
    HttpRequest http_;
    std::vector<std::string> secrets_;
    std::stop_source stop_;
    std::optional<std::stop_callback<StopHandler>> on_stop_;

    std::mutex mutex_;
    std::shared_ptr<PendingRequest> pending_;
    int attempt_ = 0;
    bool cancelled_ = false;
    bool finished_ = false;
};

}  // namespace

void Client::complete_async(ChatRequest request, std::function<void(Result<ChatResponse>)> on_done,
                            AsyncOptions options) const {
    auto executor = std::move(options.executor);
    auto call = std::make_shared<CompletionCall>(state_, std::move(on_done), std::move(executor));
    call->begin(*this, std::move(request), std::move(options));
}

std::future<ChatResponse> Client::complete_async(ChatRequest request, AsyncOptions options) const {
    auto promise = std::make_shared<std::promise<ChatResponse>>();
    std::future<ChatResponse> future = promise->get_future();
    complete_async(
        std::move(request),
        [promise](Result<ChatResponse> result) {
            if (result) {
                promise->set_value(std::move(result).value());
            } else {
                promise->set_exception(result.error());
            }
        },
        std::move(options));
    return future;
}

namespace {

// The requests of one `complete_many`, their results, and the next one to start.
struct Batch {
    std::vector<ChatRequest> requests;
    std::vector<std::optional<Result<ChatResponse>>> results;
    std::size_t next = 0;
    std::size_t finished = 0;
    std::mutex mutex;
    std::condition_variable changed;
};

// Starts the next request of `batch`, if any; each completion starts the one after it.
void start_next(const Client& client, const std::shared_ptr<Batch>& batch,
                const BatchOptions& options) {
    std::size_t index = 0;
    {
        std::lock_guard lock(batch->mutex);
        if (batch->next == batch->requests.size()) return;
        index = batch->next++;
    }
    AsyncOptions async{options.stop, nullptr, options.budget};
    client.complete_async(
        std::move(batch->requests[index]),
        [client, batch, options, index](Result<ChatResponse> result) {
            {
                std::lock_guard lock(batch->mutex);
                batch->results[index].emplace(std::move(result));
                ++batch->finished;
            }
            batch->changed.notify_all();
            start_next(client, batch, options);
        },
        std::move(async));
}

}  // namespace

std::vector<Result<ChatResponse>> Client::complete_many(std::vector<ChatRequest> requests,
                                                        BatchOptions options) const {
    if (options.max_in_flight == 0) {
        throw InvalidOptionError(ErrorCode::invalid_batch_options,
                                 "BatchOptions::max_in_flight must be at least 1");
    }
    auto batch = std::make_shared<Batch>();
    batch->requests = std::move(requests);
    batch->results.resize(batch->requests.size());
    const std::size_t first = std::min(options.max_in_flight, batch->requests.size());
    for (std::size_t i = 0; i < first; ++i) start_next(*this, batch, options);
    std::unique_lock lock(batch->mutex);
    batch->changed.wait(lock, [&] { return batch->finished == batch->requests.size(); });
    std::vector<Result<ChatResponse>> results;
    results.reserve(batch->results.size());
    for (auto& result : batch->results) results.push_back(std::move(*result));
    return results;
}

}  // namespace ullm
