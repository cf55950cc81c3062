#pragma once

/// C++20 coroutine faces of the async calls: `co_await client.co_complete(request)` and
/// `co_await stream.next()` on a `Client::co_stream`. They need no coroutine library: any
/// coroutine type whose promise allows plain awaiters can await them.

#include <ullm/core/executor.hpp>
#include <ullm/core/result.hpp>
#include <ullm/providers/chat.hpp>

#include <atomic>
#include <concepts>
#include <coroutine>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

namespace ullm {

namespace detail {

/// The executor an awaiting coroutine is resumed on: `chosen` when set, else its promise's
/// `get_executor()` when the promise has one, else none (the thread that completes the call).
template <class Promise>
std::shared_ptr<Executor> resume_executor(std::shared_ptr<Executor> chosen,
                                          std::coroutine_handle<Promise> handle) {
    if constexpr (requires(Promise & promise) {
                      { promise.get_executor() } -> std::convertible_to<std::shared_ptr<Executor>>;
                  }) {
        if (!chosen) return handle.promise().get_executor();
    }
    (void)handle;
    return chosen;
}

}  // namespace detail

/// One async call, started when it is awaited: `co_await` gives its value or throws its error.
/// It resumes the awaiting coroutine on the executor of the call's `AsyncOptions`, else on the
/// promise's `get_executor()` when it has one, else on the client's callback thread (or, when
/// the call ended before the coroutine had suspended, at once on the awaiting thread). Await
/// it once. Made by `Client::co_complete`.
template <class T>
class Awaitable {
public:
    /// Starts the call on `executor` (may be null) and calls the handler once with its outcome.
    using Starter =
        std::function<void(std::shared_ptr<Executor> executor, std::function<void(Result<T>)>)>;

    Awaitable(Starter start, std::shared_ptr<Executor> executor)
        : start_(std::move(start)), executor_(std::move(executor)) {}

    [[nodiscard]] bool await_ready() const noexcept { return false; }

    template <class Promise>
    bool await_suspend(std::coroutine_handle<Promise> handle) {
        const auto executor = detail::resume_executor(executor_, handle);
        std::shared_ptr<State> state = state_;
        start_(executor, [state, handle](Result<T> result) mutable {
            state->result.emplace(std::move(result));
            // Resumed here unless `await_suspend` has not returned yet: it then resumes it.
            if (state->stage.exchange(Stage::done, std::memory_order_acq_rel) == Stage::suspended) {
                handle.resume();
            }
        });
        if (state->stage.exchange(Stage::suspended, std::memory_order_acq_rel) != Stage::done) {
            return true;
        }
        // The outcome came before the coroutine suspended: it still goes on where it asked to
        // (without an executor, at once on this thread).
        if (!executor) return false;
        executor->post([handle]() mutable { handle.resume(); });
        return true;
    }

    T await_resume() {
        // Taken out of the state, so that an error's exception is let go of on this thread (the
        // last owner of the state may be the thread that ran `await_suspend`).
        Result<T> result = std::move(*state_->result);
        state_->result.reset();
        return std::move(result).value();
    }

private:
    enum class Stage { running, suspended, done };
    struct State {
        std::atomic<Stage> stage{Stage::running};
        std::optional<Result<T>> result;
    };

    Starter start_;
    std::shared_ptr<Executor> executor_;
    std::shared_ptr<State> state_ = std::make_shared<State>();
};

/// The events of one stream for a coroutine: `co_await stream.next()` gives the next event,
/// `std::nullopt` after `done`, or throws the error that ended the stream. The stream is sent on
/// the first `next()`. A batch of events is taken from the transport only when the coroutine
/// has used up the previous one, so a slow coroutine holds back its own stream alone; while
/// events are waiting, `next()` does not suspend at all. The coroutine is resumed on the
/// executor of the call's `AsyncOptions`, else on the client's callback thread. One consumer;
/// `cancel()` from any thread. Destroying it cancels the stream. Made by `Client::co_stream`.
class AsyncEventStream {
    struct State;

public:
    /// Starts the stream: events go to `on_event`, the end to `on_done`, one batch at a time
    /// through the executor given.
    using Starter = std::function<std::function<void()>(
        std::shared_ptr<Executor> batches, std::function<void(const StreamEvent&)> on_event,
        std::function<void(Result<ChatResponse>)> on_done)>;

    AsyncEventStream(Starter start, std::shared_ptr<Executor> resume_on)
        : state_(std::make_shared<State>()) {
        state_->start = std::move(start);
        state_->resume_on = std::move(resume_on);
    }
    ~AsyncEventStream() { close(); }
    AsyncEventStream(AsyncEventStream&&) noexcept = default;
    AsyncEventStream& operator=(AsyncEventStream&& other) noexcept {
        if (this != &other) {
            close();
            state_ = std::move(other.state_);
        }
        return *this;
    }
    AsyncEventStream(const AsyncEventStream&) = delete;
    AsyncEventStream& operator=(const AsyncEventStream&) = delete;

    /// Cancels the stream: the pending or next `next()` throws `CancelledError` once the events
    /// before it are taken. Thread-safe, idempotent.
    void cancel() noexcept {
        if (!state_) return;
        std::function<void()> cancel_stream;
        {
            std::lock_guard lock(state_->mutex);
            cancel_stream = state_->cancel;
        }
        if (cancel_stream) cancel_stream();
    }

    /// The whole response, once `done` has been taken.
    [[nodiscard]] const std::optional<ChatResponse>& response() const noexcept {
        return state_->response;
    }

    /// Awaits the next event.
    class Next {
    public:
        explicit Next(std::shared_ptr<State> state) : state_(std::move(state)) {}
        [[nodiscard]] bool await_ready() { return state_->take_available(); }
        template <class Promise>
        bool await_suspend(std::coroutine_handle<Promise> handle) {
            return state_->wait(handle, detail::resume_executor(nullptr, handle));
        }
        std::optional<StreamEvent> await_resume() { return state_->pop(); }

    private:
        std::shared_ptr<State> state_;  // kept while the coroutine waits
    };

    /// The next event; see the class comment.
    [[nodiscard]] Next next() {
        state_->begin();
        return Next(state_);
    }

private:
    // The consumer is going: cancels the stream and lets it run to its end without waiting for
    // the consumer (a batch kept for it would hold the stream, and its client, forever).
    void close() noexcept {
        if (!state_) return;
        std::function<void()> kept;
        {
            std::lock_guard lock(state_->mutex);
            state_->closed = true;
            kept = std::move(state_->batch);
            state_->batch = nullptr;
        }
        cancel();
        if (kept) kept();
    }

    struct State : std::enable_shared_from_this<State> {
        std::mutex mutex;
        Starter start;
        std::function<void()> cancel;
        std::shared_ptr<Executor> resume_on;
        std::deque<StreamEvent> events;
        std::function<void()> batch;  // a batch handed over and not yet taken
        std::coroutine_handle<> waiting;
        std::optional<Result<ChatResponse>> end;
        std::optional<ChatResponse> response;
        bool started = false;
        bool closed = false;  // the consumer has gone: batches run as they come

        // Hands batches to the consumer: runs one at once when the consumer waits for it (and
        // resumes the consumer), else keeps it until the consumer asks.
        struct Gate final : Executor {
            std::weak_ptr<State> state;
            void post(std::function<void()> work) noexcept override {
                const auto held = state.lock();
                if (!held) {
                    work();  // the consumer is gone: let the stream finish
                    return;
                }
                std::coroutine_handle<> resume;
                std::shared_ptr<Executor> where;
                {
                    std::lock_guard lock(held->mutex);
                    if (!held->waiting && !held->closed) {
                        held->batch = std::move(work);
                        return;
                    }
                    resume = std::exchange(held->waiting, {});
                    where = held->resume_on;
                }
                work();
                if (!resume) return;
                {
                    // A batch that brought neither an event nor the end (a conversation turn
                    // that only moved on) leaves the consumer waiting for the next one.
                    std::lock_guard lock(held->mutex);
                    if (held->events.empty() && !held->end && !held->closed) {
                        held->waiting = resume;
                        return;
                    }
                }
                if (where) {
                    where->post([resume] { resume.resume(); });
                } else {
                    resume.resume();
                }
            }
        };

        void begin() {
            {
                std::lock_guard lock(mutex);
                if (started) return;
                started = true;
            }
            auto gate = std::make_shared<Gate>();
            gate->state = weak_from_this();
            std::weak_ptr<State> weak = weak_from_this();
            auto cancel_stream = start(
                gate,
                [weak](const StreamEvent& event) {
                    if (const auto held = weak.lock()) {
                        std::lock_guard lock(held->mutex);
                        held->events.push_back(event);
                    }
                },
                [weak](Result<ChatResponse> result) {
                    if (const auto held = weak.lock()) {
                        std::lock_guard lock(held->mutex);
                        held->end.emplace(std::move(result));
                    }
                });
            std::lock_guard lock(mutex);
            cancel = std::move(cancel_stream);
        }

        // Whether `pop` has something to give without waiting; takes a waiting batch first.
        bool take_available() {
            for (;;) {
                std::function<void()> work;
                {
                    std::lock_guard lock(mutex);
                    if (!events.empty() || end) return true;
                    if (!batch) return false;
                    work = std::move(batch);
                    batch = nullptr;
                }
                work();
            }
        }

        // Suspends the consumer unless something arrived meanwhile; it is resumed on
        // `resume_on`, else on the promise's executor (`promise_executor`), else where the
        // batch arrives.
        bool wait(std::coroutine_handle<> handle, std::shared_ptr<Executor> promise_executor) {
            for (;;) {
                std::function<void()> work;
                {
                    std::lock_guard lock(mutex);
                    if (!events.empty() || end) return false;
                    if (!batch) {
                        if (!resume_on) resume_on = std::move(promise_executor);
                        waiting = handle;
                        return true;
                    }
                    work = std::move(batch);
                    batch = nullptr;
                }
                work();  // a batch that came meanwhile
            }
        }

        std::optional<StreamEvent> pop() {
            (void)take_available();
            std::lock_guard lock(mutex);
            if (!events.empty()) {
                StreamEvent event = std::move(events.front());
                events.pop_front();
                if (event.type == StreamEvent::Type::done && event.response) {
                    response = *event.response;
                }
                return event;
            }
            if (end && !end->has_value()) std::rethrow_exception(end->error());
            return std::nullopt;
        }
    };

    std::shared_ptr<State> state_;
};

}  // namespace ullm
