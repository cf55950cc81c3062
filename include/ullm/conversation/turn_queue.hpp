#pragma once

/// `TurnQueue`: the FIFO order of a conversation's turns and its busy guard.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

namespace ullm {

/// Serves a conversation's turns one at a time, in arrival order, and guards the conversation
/// while a tool callback runs. Callers from any thread; every member is thread-safe.
///
/// The busy guard: while any tool callback of the conversation runs (including one that timed
/// out and ignored its stop token), `acquire` fails with `ConversationBusyError`, both on
/// arrival and again when a turn that queued earlier reaches the front. A caller that asks to
/// wait for tools waits instead, unless it is a tool callback's own thread.
class TurnQueue {
public:
    /// Waits for the caller's turn. Throws `ConversationBusyError` (`conversation_busy`, 409)
    /// when a tool callback is running on arrival or when the turn reaches the front, or when
    /// the calling thread holds the active turn itself (it would wait for itself), and
    /// `CancelledError` when `stop` is requested while waiting; either way the caller holds no
    /// turn and the next caller is served. With `wait_for_tools`, running tool callbacks are
    /// waited for instead of refused, except on the thread of a tool callback itself (it would
    /// wait for itself).
    void acquire(std::stop_token stop = {}, bool wait_for_tools = false);

    /// Told once how an `acquire_async` ended: null when the caller now holds the turn, else
    /// the error `acquire` would have thrown.
    using Granted = std::function<void(std::exception_ptr)>;

    /// As `acquire`, without waiting: `granted` is called once, in the same order and under the
    /// same rules as `acquire`'s callers are served. It is called at once (before this returns)
    /// when the turn is free or refused on arrival, else on the thread that frees the slot or
    /// requests `stop`; it must not block. The turn it grants belongs to no thread: `release()`
    /// from any thread ends it. Throws `bad_alloc` only.
    void acquire_async(std::stop_token stop, bool wait_for_tools, Granted granted);

    /// Ends the current turn and serves the next caller. Does not throw.
    void release() noexcept;

    /// Marks the calling thread, until the matching `leave_async_step`, as running a step of
    /// an async turn of this queue (the caller's callbacks included): while an async turn
    /// holds the slot, `acquire` there throws `ConversationBusyError`, as on the thread of a
    /// blocking turn, instead of waiting for itself. Steps nest; does not throw.
    void enter_async_step() noexcept;
    void leave_async_step() noexcept;

    /// Counts a tool callback as running until `tool_finished`. Does not throw.
    void tool_started() noexcept;

    /// Counts a tool callback as finished; on a thread that `enter_tool_thread` marked, removes
    /// the mark. Does not throw.
    void tool_finished() noexcept;
    /// Marks the calling thread as running a tool callback until it calls `tool_finished`.
    /// Throws `bad_alloc` only, with no mark made.
    void enter_tool_thread();

    /// Runs `action` while no turn is active or waiting and no tool runs, with new turns held
    /// back until it returns; throws `ConversationBusyError` otherwise. For `clear()`.
    void run_exclusive(const std::function<void()>& action);

    /// How many tool callbacks are running now.
    [[nodiscard]] int tools_running() const;

    /// How many callers wait for a turn (the active turn not included).
    [[nodiscard]] std::size_t waiting() const;

private:
    /// Takes a waiting `acquire_async` caller out of the queue and tells it it was cancelled.
    struct CancelWait {
        TurnQueue* queue;
        std::uint64_t ticket;
        void operator()() const;
    };
    /// Room for a waiter's stop callback, made before it is registered.
    using StopSlot = std::optional<std::stop_callback<CancelWait>>;
    /// An `acquire_async` caller waiting for its turn.
    struct AsyncWaiter {
        bool wait_for_tools = false;
        Granted granted;
        std::unique_ptr<StopSlot> on_stop;
    };
    /// What the mutex-holding code decided for async waiters, told after it is released.
    struct Outcomes {
        std::vector<std::pair<Granted, std::exception_ptr>> told;
        std::vector<AsyncWaiter> gone;  ///< Their stop callbacks go outside the mutex.
        void deliver() noexcept;
    };

    void release_exclusive() noexcept;
    /// Serves the async waiters at the front that can be served now. Called with the mutex
    /// held after anything that may let the front go on.
    void serve_async(Outcomes& outcomes);
    /// Serves what can be served, then wakes the blocked callers and tells the async ones.
    void changed_and_serve(std::unique_lock<std::mutex>& lock) noexcept;

    mutable std::mutex mutex_;
    std::condition_variable_any changed_;
    std::deque<std::uint64_t> waiting_;                   ///< Tickets in arrival order.
    std::map<std::uint64_t, AsyncWaiter> async_waiting_;  ///< The tickets of async callers.
    std::uint64_t next_ticket_ = 0;
    bool active_ = false;
    std::thread::id owner_;  ///< The thread that acquired the active turn.
    bool exclusive_ = false;
    int tools_running_ = 0;
    std::vector<std::thread::id> tool_threads_;  ///< Threads running a tool callback now.
};

}  // namespace ullm
