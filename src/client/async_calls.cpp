// The async face of `Client`: `complete_async` (future and callback), `complete_many` and
// `stream_async`. A completion is one `CompletionCall`: its attempts run on the transport's
// loop (`Transport::start`), its answers are decoded and its retries wait on the client's
// callback thread, and it completes once, through `finish`. A stream is one `StreamCall`: the
// loop tells it when bytes arrive, and it polls its `ChatStreamState` on the callback thread.

#include <ullm/client/client.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/redact.hpp>

#include "call_steps.hpp"
#include "chat_stream_state.hpp"
#include "client_state.hpp"
#include "conversation_calls.hpp"

#include <atomic>
#include <chrono>
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

// Cancels a call when its stop token is requested; holds the call weakly, so that a token that
// lives on does not keep it.
template <class Call>
struct CancelOnStop {
    std::weak_ptr<Call> call;
    void operator()() const noexcept {
        if (const auto held = call.lock()) held->cancel();
    }
};

class CompletionCall final : public detail::AsyncCall,
                             public std::enable_shared_from_this<CompletionCall> {
public:
    CompletionCall(std::shared_ptr<Client::State> client, Handler on_done,
                   std::shared_ptr<Executor> executor)
        : client_(std::move(client)),
          on_done_(std::move(on_done)),
          executor_(std::move(executor)) {}

    // Routes, checks and starts the call; every error, from routing on, completes it. A
    // conversation's tools were checked when it took them (`tools_checked`).
    void begin(const Client& owner, ChatRequest request, AsyncOptions options,
               bool tools_checked = false) {
        started_ = std::chrono::system_clock::now();
        {
            std::lock_guard lock(mutex_);
            self_ = shared_from_this();
        }
        if (!client_->async_calls.add(shared_from_this())) {
            fail(std::make_exception_ptr(CancelledError("the client was closed")));
            return;
        }
        if (options.stop.stop_possible()) {
            on_stop_.emplace(std::move(options.stop),
                             CancelOnStop<CompletionCall>{weak_from_this()});
        }
        std::exception_ptr refused;
        try {
            route_ = detail::routed(owner, request, false, tools_checked);
            request_ = std::move(request);
            if (options.budget) {
                detail::check_call_budget(*options.budget);
                if (auto skipped =
                        detail::within_budget(*client_, request_, route_, *options.budget)) {
                    detail::report_usage(*client_, route_.provider->name(), route_.model,
                                         skipped->usage, false, true, started_);
                    post_to_client(
                        [self = shared_from_this(), skipped = std::move(*skipped)]() mutable {
                            self->finish(Result<ChatResponse>(std::move(skipped)));
                        });
                    return;
                }
            }
            http_ = detail::encode_request(*route_.provider, request_, false);
            secrets_ = detail::request_secrets(http_);
            limit_ = detail::Limit::of(*client_, route_.provider->name(), options.lane, http_,
                                       detail::max_output_tokens(request_));
        } catch (...) {
            refused = std::current_exception();
        }
        if (refused) return fail(std::move(refused));  // outside the handler: see fail()
        start_attempt();
    }

    void cancel() noexcept override {
        std::shared_ptr<PendingRequest> pending;
        std::shared_ptr<detail::RequestLimiter::Waiter> waiting;
        {
            std::lock_guard lock(mutex_);
            if (cancelled_ || finished_) return;
            cancelled_ = true;
            pending = pending_;
            waiting = std::exchange(waiting_, nullptr);
        }
        if (pending) {
            pending->cancel();  // the transport answers with `CancelledError`
        } else if (waiting) {
            limit_.limiter->withdraw(waiting);  // the limiter answers with `CancelledError`
        } else {
            // Waiting for a retry, or not started: nothing else would complete the call soon.
            fail(std::make_exception_ptr(CancelledError("the request was cancelled")));
        }
    }

private:
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
        if (limit_.limiter) {
            wait_for_limits();
        } else {
            send_attempt();
        }
    }

    // Waits, without a thread, for the provider's limits; the grant sends the attempt from the
    // callback thread.
    void wait_for_limits() {
        std::shared_ptr<detail::RequestLimiter::Waiter> waiter;
        std::exception_ptr refused;
        try {
            waiter = limit_.limiter->request(
                limit_.lane, limit_.tokens,
                [weak = weak_from_this()](detail::RequestLimiter::Permit permit,
                                          std::exception_ptr error) {
                    const auto self = weak.lock();
                    if (!self) return;
                    {
                        std::lock_guard lock(self->mutex_);
                        self->waiting_ = nullptr;
                        self->permit_ = std::move(permit);
                    }
                    if (error) {
                        self->fail(std::move(error));
                    } else {
                        self->post_to_client([self] { self->send_attempt(); });
                    }
                });
        } catch (...) {
            refused = std::current_exception();
        }
        if (refused) return fail(std::move(refused));
        bool late_cancel = false;
        {
            std::lock_guard lock(mutex_);
            if (waiter && !permit_.held()) waiting_ = waiter;
            late_cancel = cancelled_ && waiting_ != nullptr;
        }
        if (late_cancel) limit_.limiter->withdraw(waiter);
    }

    void send_attempt() {
        if (is_cancelled()) {
            release_permit();
            fail(std::make_exception_ptr(CancelledError("the request was cancelled")));
            return;
        }
        std::shared_ptr<PendingRequest> pending;
        std::exception_ptr refused;
        try {
            pending =
                detail::transport_of(*client_, *route_.provider)
                    .start(http_, [self = shared_from_this()](HttpResponse answer,
                                                              std::exception_ptr error) mutable {
                        // The call moves on to the callback thread; the transport's thread keeps no
                        // reference to it (it may be the last one, and the loop must not free it).
                        CompletionCall& call = *self;
                        call.post_to_client([self = std::move(self), answer = std::move(answer),
                                             error = std::move(error)]() mutable {
                            self->on_answer(answer, std::move(error));
                        });
                    });
        } catch (...) {
            refused = std::current_exception();
        }
        if (refused) {
            release_permit();
            return fail(std::move(refused));
        }
        bool late_cancel = false;
        {
            std::lock_guard lock(mutex_);
            // An attempt may be answered before `start` returned (a refused connection): then
            // it is over, and a cancel must not wait for it but end the call.
            if (answered_ < attempt_) pending_ = pending;
            late_cancel = cancelled_;
        }
        if (late_cancel) pending->cancel();
    }

    // Ends the attempt's time in flight; first counts what it used, when it answered.
    void release_permit(const ChatResponse* answer = nullptr) {
        detail::RequestLimiter::Permit permit;
        {
            std::lock_guard lock(mutex_);
            permit = std::move(permit_);
        }
        if (answer != nullptr) permit.settle(detail::used_tokens(*answer));
    }

    bool is_cancelled() {
        std::lock_guard lock(mutex_);
        return cancelled_;
    }

    // On the callback thread: decodes an attempt's answer, or retries, or completes.
    void on_answer(const HttpResponse& answer, std::exception_ptr error) {
        {
            std::lock_guard lock(mutex_);
            pending_ = nullptr;
            answered_ = attempt_;
        }
        if (!error) {
            try {
                ChatResponse response =
                    detail::checked(*client_, route_, request_,
                                    route_.provider->decode(answer, request_), true, started_);
                release_permit(&response);
                finish(Result<ChatResponse>(std::move(response)));
                return;
            } catch (...) {
                error = std::current_exception();
            }
        }
        release_permit();
        std::optional<std::chrono::milliseconds> delay;
        try {
            std::rethrow_exception(error);
        } catch (const CancelledError&) {
        } catch (Error& failure) {
            detail::redact_secrets(failure, secrets_);
            limit_.note(failure);
            error = std::current_exception();
            delay = detail::retry_delay(detail::retry_of(*client_, *route_.provider), failure,
                                        attempt_);
        } catch (...) {
        }
        if (is_cancelled()) {
            finish(std::make_exception_ptr(CancelledError("the request was cancelled")));
        } else if (!delay) {
            finish(std::move(error));
        } else {
            // The timer holds the call weakly: cancelled meanwhile, it ends at once and lets
            // go of the client, instead of keeping it (and its connections) until the timer.
            client_->callbacks.post_after(*delay, [weak = weak_from_this()] {
                if (const auto self = weak.lock()) self->start_attempt();
            });
        }
    }

    // Completes the call with `error` from the callback thread, whichever thread fails it (a
    // caller's routing error is never delivered inside `complete_async`).
    // Call it outside any handler, holding no other reference to `error`: whoever drops the
    // last reference frees the exception, and that must be the caller's thread after it has
    // read it (libstdc++ counts references where TSan cannot see them, so a free by our thread
    // after the caller's read shows as a race).
    void fail(std::exception_ptr error) noexcept {
        post_to_client([self = shared_from_this(), error = std::move(error)]() mutable {
            self->finish(Result<ChatResponse>(std::move(error)));
        });
    }

    // Completes the call, once, on the callback thread: later outcomes (a cancel racing an
    // answer) are dropped. The stop callback stays registered until the call is freed: it holds
    // the call weakly, and resetting it here could race with its registration in `begin`.
    void finish(Result<ChatResponse> result) {
        std::shared_ptr<CompletionCall> keep;  // the caller's frame holds another reference
        {
            std::lock_guard lock(mutex_);
            if (finished_) return;
            finished_ = true;
            pending_ = nullptr;
            keep = std::move(self_);
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
    /// When `begin` ran: the start its usage report gives (set before any other thread sees
    /// the call, read-only afterwards).
    std::chrono::system_clock::time_point started_;
    HttpRequest http_;
    std::vector<std::string> secrets_;
    std::optional<std::stop_callback<CancelOnStop<CompletionCall>>> on_stop_;

    std::mutex mutex_;
    // The call's own reference until it finishes: while it waits for a retry nothing else holds
    // it (the timer holds it weakly). Let go of in `finish`, on the callback thread.
    std::shared_ptr<CompletionCall> self_;
    std::shared_ptr<PendingRequest> pending_;
    detail::Limit limit_;  ///< The provider's limits each attempt waits for.
    std::shared_ptr<detail::RequestLimiter::Waiter> waiting_;  ///< While it waits for them.
    detail::RequestLimiter::Permit permit_;                    ///< While an attempt is in flight.
    int attempt_ = 0;
    int answered_ = 0;  ///< The attempts whose answer arrived.
    bool cancelled_ = false;
    bool finished_ = false;
};

using Poll = detail::ChatStreamState::Poll;

class StreamCall final : public detail::AsyncCall, public std::enable_shared_from_this<StreamCall> {
public:
    StreamCall(std::shared_ptr<Client::State> client, StreamCallbacks callbacks,
               std::shared_ptr<Executor> executor)
        : client_(std::move(client)),
          callbacks_(std::move(callbacks)),
          executor_(std::move(executor)) {}

    // Routes, checks and makes the stream, then starts polling it; an error on the way ends
    // the stream through `on_done`.
    void begin(const Client& owner, ChatRequest request, AsyncOptions options,
               bool tools_checked = false) {
        std::exception_ptr refused;
        try {
            Route route = detail::routed(owner, request, true, tools_checked);
            std::optional<ChatResponse> skipped;
            if (options.budget) {
                detail::check_call_budget(*options.budget);
                skipped = detail::within_budget(*client_, request, route, *options.budget);
            }
            if (skipped) {
                state_ = std::make_unique<detail::ChatStreamState>(
                    client_, std::move(route), std::move(request), std::move(*skipped));
            } else {
                state_ = std::make_unique<detail::ChatStreamState>(
                    client_, std::move(route), std::move(request), std::stop_token{}, options.lane);
            }
        } catch (...) {
            refused = std::current_exception();
        }
        if (refused) {
            // Told on the callback thread, after `stream_async` returned, as every outcome is
            // (posted outside the handler: see CompletionCall::fail).
            post([self = shared_from_this(), error = std::move(refused)]() mutable {
                self->end(std::move(error));
            });
            return;
        }
        notify_ = [weak = weak_from_this()] {
            if (auto held = weak.lock()) wake(std::move(held));
        };
        {
            std::lock_guard lock(mutex_);
            self_ = shared_from_this();
        }
        if (!client_->async_calls.add(shared_from_this())) {
            state_->cancel();
        } else if (options.stop.stop_possible()) {
            on_stop_.emplace(std::move(options.stop), CancelOnStop<StreamCall>{weak_from_this()});
        }
        wake(shared_from_this());
    }

    void cancel() noexcept override {
        if (!state_) return;  // `begin` failed: the stream has ended
        state_->cancel();     // a read in progress ends with CancelledError
        wake(shared_from_this());
    }

private:
    // Runs `work` where the callbacks run: the executor, else the callback thread.
    void post(std::function<void()> work) noexcept {
        if (executor_) {
            executor_->post(std::move(work));
        } else {
            client_->callbacks.post(std::move(work));
        }
    }

    // Has `drive` run on the callback thread, unless it is already due. The reference moves
    // into the posted work: a transport thread must never let go of the last one.
    static void wake(std::shared_ptr<StreamCall> self) noexcept {
        Client::State& client = *self->client_;
        bool due = false;
        {
            std::lock_guard lock(self->mutex_);
            due = self->scheduled_;
            self->scheduled_ = true;
        }
        if (due) {
            client.callbacks.post([held = std::move(self)] {});
        } else {
            client.callbacks.post([held = std::move(self)] { held->drive(); });
        }
    }

    // On the callback thread: polls the stream for a batch of events and hands it over.
    void drive() {
        {
            std::lock_guard lock(mutex_);
            scheduled_ = false;
            if (ended_ || delivering_ || threaded_) return;
        }
        constexpr std::size_t batch_limit = 256;  // then the other streams have their turn
        std::vector<StreamEvent> batch;
        std::exception_ptr error;
        bool ended = false;
        Poll outcome = Poll::blocked;
        while (batch.size() < batch_limit) {
            std::optional<StreamEvent> event;
            try {
                event = state_->poll(notify_, outcome);
            } catch (...) {
                error = std::current_exception();
                break;
            }
            if (outcome != Poll::event) {
                ended = outcome == Poll::finished;
                break;
            }
            batch.push_back(std::move(*event));
            if (batch.back().type == StreamEvent::Type::done) {
                ended = true;
                break;
            }
        }
        if (outcome == Poll::needs_thread && batch.empty() && !error) {
            read_on_thread();
            return;
        }
        // A full batch, or one read before the stream turned out to need a thread: poll again.
        const bool more = batch.size() == batch_limit || outcome == Poll::needs_thread;
        if (outcome == Poll::blocked && !error && !ended) {
            if (const auto deadline = state_->retry_deadline()) {
                // Weakly, as CompletionCall's retry timer does.
                client_->callbacks.post_after(*deadline - std::chrono::steady_clock::now(),
                                              [weak = weak_from_this()] {
                                                  if (auto held = weak.lock())
                                                      wake(std::move(held));
                                              });
            }
        }
        if (batch.empty() && !error && !ended) return;
        const bool last = ended || error != nullptr;
        // Moved all the way into `on_done`: this thread keeps no reference to the error once
        // the callback has it (see `end`).
        hand_over(std::move(batch), std::move(error), last, more);
    }

    // Gives a batch to the callbacks: here (the callback thread), or on the executor, which
    // has it back to `drive` when it is done.
    void hand_over(std::vector<StreamEvent> batch, std::exception_ptr error, bool ended,
                   bool more) {
        if (!executor_) {
            deliver(batch, std::move(error), ended);
            if (more) wake(shared_from_this());
            return;
        }
        {
            std::lock_guard lock(mutex_);
            delivering_ = true;
        }
        executor_->post([self = shared_from_this(), batch = std::move(batch),
                         error = std::move(error), ended]() mutable {
            self->deliver(batch, std::move(error), ended);
            {
                std::lock_guard lock(self->mutex_);
                self->delivering_ = false;
            }
            if (!ended) wake(std::move(self));
        });
    }

    // Calls `on_event` for each event, then `on_done` when the stream has ended.
    void deliver(const std::vector<StreamEvent>& batch, std::exception_ptr error, bool ended) {
        for (const StreamEvent& event : batch) {
            if (!callbacks_.on_event) break;
            try {
                callbacks_.on_event(event);
            } catch (...) {
                // The consumer gave up on the stream: it is cancelled, and learns why.
                state_->cancel();
                error = std::current_exception();
                ended = true;
                break;
            }
        }
        if (ended) end(std::move(error));
    }

    // A stream that cannot notify (a transport's without an I/O loop): pulled on a thread of its
    // own, each event handed over (and taken) before the next is read.
    void read_on_thread() {
        {
            std::lock_guard lock(mutex_);
            threaded_ = true;
        }
        std::thread([self = shared_from_this()] {
            for (bool ended = false; !ended;) {
                std::vector<StreamEvent> batch;
                std::exception_ptr error;
                try {
                    if (auto event = self->state_->next()) {
                        ended = event->type == StreamEvent::Type::done;
                        batch.push_back(std::move(*event));
                    } else {
                        ended = true;
                    }
                } catch (...) {
                    error = std::current_exception();
                    ended = true;
                }
                // Shared: the callback thread may still be inside `set_value` when this one
                // wakes and goes on.
                auto taken = std::make_shared<std::promise<void>>();
                auto handed = taken->get_future();
                self->post([&self, &batch, &error, ended, taken] {
                    self->deliver(batch, std::move(error), ended);
                    taken->set_value();
                });
                handed.wait();
                std::lock_guard lock(self->mutex_);
                ended = ended || self->ended_;
            }
        }).detach();
    }

    // Ends the stream once: `on_done` with the error, else with the whole response. The error
    // is moved into the callback's `Result`, so that whoever holds it last frees it: holding a
    // copy here would make this thread free an exception the consumer may still be reading
    // (harmless, but TSan cannot see libstdc++'s reference count and reports it).
    void end(std::exception_ptr error) {
        std::shared_ptr<StreamCall> keep;  // let go of after `on_done`, by the caller's frame
        {
            std::lock_guard lock(mutex_);
            if (ended_) return;
            ended_ = true;
            keep = std::move(self_);
        }
        client_->async_calls.remove(this);
        if (!callbacks_.on_done) return;
        std::optional<Result<ChatResponse>> result;
        if (error) {
            result.emplace(std::move(error));
        } else if (state_ && state_->response()) {
            result.emplace(*state_->response());
        } else {
            result.emplace(std::make_exception_ptr(
                StreamTruncatedError("the stream ended without its done event")));
        }
        try {
            callbacks_.on_done(std::move(*result));
        } catch (...) {
            // A callback cannot fail the loop, or the other calls.
        }
    }

    std::shared_ptr<Client::State> client_;
    StreamCallbacks callbacks_;
    std::shared_ptr<Executor> executor_;
    std::unique_ptr<detail::ChatStreamState> state_;
    std::function<void()> notify_;  // handed to each attempt's stream
    std::optional<std::stop_callback<CancelOnStop<StreamCall>>> on_stop_;

    std::mutex mutex_;
    // The stream's own reference while it runs: between two batches nothing else holds it
    // (the loop's notification holds it weakly). `end` lets go of it on the thread that runs
    // the callbacks, never on a transport thread.
    std::shared_ptr<StreamCall> self_;
    bool scheduled_ = false;   // a `drive` is posted and has not started
    bool delivering_ = false;  // a batch is on the executor
    bool threaded_ = false;    // pulled by `read_on_thread`
    bool ended_ = false;
};

}  // namespace

void StreamHandle::cancel() const noexcept {
    if (const auto call = call_.lock()) call->cancel();
}

StreamHandle Client::stream_async(ChatRequest request, StreamCallbacks callbacks,
                                  AsyncOptions options) const {
    auto executor = std::move(options.executor);
    auto call = std::make_shared<StreamCall>(state_, std::move(callbacks), std::move(executor));
    call->begin(*this, std::move(request), std::move(options));
    return StreamHandle(call);
}

void detail::ConversationCalls::complete_async(const Client& client, ChatRequest request,
                                               AsyncOptions options,
                                               std::function<void(Result<ChatResponse>)> on_done) {
    auto executor = std::move(options.executor);
    auto call =
        std::make_shared<CompletionCall>(client.state_, std::move(on_done), std::move(executor));
    call->begin(client, std::move(request), std::move(options), true);
}

void detail::ConversationCalls::stream_async(const Client& client, ChatRequest request,
                                             AsyncOptions options, StreamCallbacks callbacks) {
    auto executor = std::move(options.executor);
    auto call =
        std::make_shared<StreamCall>(client.state_, std::move(callbacks), std::move(executor));
    call->begin(client, std::move(request), std::move(options), true);
}

Awaitable<ChatResponse> Client::co_complete(ChatRequest request, AsyncOptions options) const {
    std::shared_ptr<Executor> chosen = options.executor;
    return Awaitable<ChatResponse>(
        [client = *this, request = std::move(request), options = std::move(options)](
            std::shared_ptr<Executor> executor,
            std::function<void(Result<ChatResponse>)> on_done) mutable {
            options.executor = std::move(executor);
            client.complete_async(std::move(request), std::move(on_done), std::move(options));
        },
        std::move(chosen));
}

Awaitable<ChatResponse> Client::co_complete(ChatRequest request) const {
    return co_complete(std::move(request), AsyncOptions{});
}

AsyncEventStream Client::co_stream(ChatRequest request) const {
    return co_stream(std::move(request), AsyncOptions{});
}

AsyncEventStream Client::co_stream(ChatRequest request, AsyncOptions options) const {
    std::shared_ptr<Executor> resume_on = std::move(options.executor);
    return AsyncEventStream(
        [client = *this, request = std::move(request), options = std::move(options)](
            std::shared_ptr<Executor> batches, std::function<void(const StreamEvent&)> on_event,
            std::function<void(Result<ChatResponse>)> on_done) mutable {
            options.executor = std::move(batches);
            const StreamHandle handle = client.stream_async(
                std::move(request), {std::move(on_event), std::move(on_done)}, std::move(options));
            return std::function<void()>([handle] { handle.cancel(); });
        },
        std::move(resume_on));
}

void Client::complete_async(ChatRequest request, std::function<void(Result<ChatResponse>)> on_done,
                            AsyncOptions options) const {
    auto executor = std::move(options.executor);
    auto call = std::make_shared<CompletionCall>(state_, std::move(on_done), std::move(executor));
    call->begin(*this, std::move(request), std::move(options));
}

std::future<ChatResponse> Client::complete_async(ChatRequest request, AsyncOptions options) const {
    auto [future, handler] = detail::future_and_handler<ChatResponse>();
    complete_async(std::move(request), std::move(handler), std::move(options));
    return std::move(future);
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
    AsyncOptions async{options.stop, nullptr, options.budget, options.lane};
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
                                                        const BatchOptions& options) const {
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
