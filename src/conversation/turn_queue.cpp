#include <ullm/conversation/turn_queue.hpp>

#include <ullm/core/error.hpp>

#include <algorithm>
#include <iterator>
#include <thread>
#include <vector>

namespace ullm {

namespace {

ConversationBusyError busy_error() {
    return ConversationBusyError(
        "a tool callback of this conversation is running; a tool must not start turns on its "
        "own conversation, and other callers must wait until it returns");
}

[[noreturn]] void throw_busy() {
    throw busy_error();
}

// The queues whose async turns the calling thread is running a step of, innermost last.
thread_local std::vector<const TurnQueue*> async_steps;

bool on_tool_thread(const std::vector<std::thread::id>& tool_threads) {
    return std::find(tool_threads.begin(), tool_threads.end(), std::this_thread::get_id()) !=
           tool_threads.end();
}

}  // namespace

void TurnQueue::acquire(std::stop_token stop, bool wait_for_tools) {
    std::unique_lock lock(mutex_);
    if (tools_running_ > 0 && (!wait_for_tools || on_tool_thread(tool_threads_))) throw_busy();
    const bool async_step =
        owner_ == std::thread::id() &&
        std::find(async_steps.begin(), async_steps.end(), this) != async_steps.end();
    if (active_ && (owner_ == std::this_thread::get_id() || async_step)) {
        // A callback of the running turn (a context manager, a budget warning, an async turn's
        // event callback) or a consumer holding an unfinished stream would wait for itself.
        throw ConversationBusyError(
            "this thread is running a turn of this conversation; finish or cancel it first");
    }
    const std::uint64_t ticket = next_ticket_++;
    waiting_.push_back(ticket);
    const bool served = changed_.wait(lock, stop, [&] {
        return !active_ && !exclusive_ && waiting_.front() == ticket &&
               (!wait_for_tools || tools_running_ == 0);
    });
    if (!served) {
        waiting_.erase(std::find(waiting_.begin(), waiting_.end(), ticket));
        changed_and_serve(lock);
        throw CancelledError("the turn was cancelled while it waited for its slot");
    }
    waiting_.pop_front();
    if (tools_running_ > 0) {
        // Queued before the callback began: rejected rather than run beside it.
        changed_and_serve(lock);
        throw_busy();
    }
    active_ = true;
    owner_ = std::this_thread::get_id();
}

void TurnQueue::acquire_async(std::stop_token stop, bool wait_for_tools, Granted granted) {
    // Made before a ticket is queued: a failed allocation leaves nothing behind.
    auto on_stop = stop.stop_possible() ? std::make_unique<StopSlot>() : nullptr;
    std::unique_lock lock(mutex_);
    if (tools_running_ > 0 && (!wait_for_tools || on_tool_thread(tool_threads_))) {
        lock.unlock();
        granted(std::make_exception_ptr(busy_error()));
        return;
    }
    const std::uint64_t ticket = next_ticket_++;
    waiting_.push_back(ticket);
    try {
        async_waiting_.emplace(ticket, AsyncWaiter{wait_for_tools, std::move(granted), nullptr});
    } catch (...) {
        waiting_.pop_back();
        throw;
    }
    Outcomes outcomes;
    serve_async(outcomes);
    const bool waits = async_waiting_.count(ticket) != 0;
    lock.unlock();
    outcomes.deliver();
    if (!waits || !on_stop) return;
    // Registered outside the mutex: a stop already requested runs the callback at once.
    on_stop->emplace(std::move(stop), CancelWait{this, ticket});
    lock.lock();
    const auto found = async_waiting_.find(ticket);
    if (found != async_waiting_.end()) {
        found->second.on_stop = std::move(on_stop);
        return;
    }
    lock.unlock();  // served or cancelled meanwhile: the callback goes outside the mutex
}

void TurnQueue::CancelWait::operator()() const {
    std::unique_lock held(queue->mutex_);
    const auto found = queue->async_waiting_.find(ticket);
    if (found == queue->async_waiting_.end()) return;  // served meanwhile
    Outcomes cancelled;
    cancelled.told.emplace_back(std::move(found->second.granted),
                                std::make_exception_ptr(CancelledError(
                                    "the turn was cancelled while it waited for its slot")));
    // This callback's own object goes with it, last: a stop callback may destroy itself on
    // the thread that runs it, and nothing of it is used after.
    cancelled.gone.push_back(std::move(found->second));
    queue->async_waiting_.erase(found);
    queue->waiting_.erase(std::find(queue->waiting_.begin(), queue->waiting_.end(), ticket));
    queue->changed_and_serve(held);
    cancelled.deliver();
}

void TurnQueue::release() noexcept {
    std::unique_lock lock(mutex_);
    active_ = false;
    changed_and_serve(lock);
}

void TurnQueue::Outcomes::deliver() noexcept {
    gone.clear();
    for (auto& [granted, error] : told) {
        try {
            granted(error);
        } catch (...) {
            // `granted` must not throw; a turn it failed to take is its own to free.
        }
    }
    told.clear();
}

void TurnQueue::serve_async(Outcomes& outcomes) {
    while (!waiting_.empty() && !active_ && !exclusive_) {
        const auto found = async_waiting_.find(waiting_.front());
        if (found == async_waiting_.end()) return;  // a blocked caller is next: it wakes
        if (found->second.wait_for_tools && tools_running_ > 0) return;
        std::exception_ptr refused;
        if (tools_running_ > 0) {
            // Queued before the callback began: rejected rather than run beside it.
            refused = std::make_exception_ptr(busy_error());
        } else {
            active_ = true;
            owner_ = std::thread::id();
        }
        outcomes.told.emplace_back(std::move(found->second.granted), std::move(refused));
        outcomes.gone.push_back(std::move(found->second));
        async_waiting_.erase(found);
        waiting_.pop_front();
    }
}

void TurnQueue::changed_and_serve(std::unique_lock<std::mutex>& lock) noexcept {
    Outcomes outcomes;
    try {
        serve_async(outcomes);
    } catch (...) {
        // Only bad_alloc: the waiters are served at the next change.
    }
    lock.unlock();
    changed_.notify_all();
    outcomes.deliver();
}

void TurnQueue::tool_started() noexcept {
    std::lock_guard lock(mutex_);
    ++tools_running_;
}

void TurnQueue::tool_finished() noexcept {
    std::unique_lock lock(mutex_);
    --tools_running_;
    const auto mark =
        std::find(tool_threads_.begin(), tool_threads_.end(), std::this_thread::get_id());
    if (mark != tool_threads_.end()) tool_threads_.erase(mark);
    changed_and_serve(lock);
}

void TurnQueue::enter_tool_thread() {
    std::lock_guard lock(mutex_);
    tool_threads_.push_back(std::this_thread::get_id());
}

void TurnQueue::run_exclusive(const std::function<void()>& action) {
    {
        std::lock_guard lock(mutex_);
        if (active_ || exclusive_ || tools_running_ > 0 || !waiting_.empty()) {
            throw ConversationBusyError("a turn of this conversation is in progress");
        }
        exclusive_ = true;
    }
    try {
        action();
    } catch (...) {
        release_exclusive();
        throw;
    }
    release_exclusive();
}

void TurnQueue::release_exclusive() noexcept {
    std::unique_lock lock(mutex_);
    exclusive_ = false;
    changed_and_serve(lock);
}

int TurnQueue::tools_running() const {
    std::lock_guard lock(mutex_);
    return tools_running_;
}

std::size_t TurnQueue::waiting() const {
    std::lock_guard lock(mutex_);
    return waiting_.size();
}

void TurnQueue::enter_async_step() noexcept {
    try {
        async_steps.push_back(this);
    } catch (...) {
        // Without the mark a blocking turn started here waits, as before marks existed.
    }
}

void TurnQueue::leave_async_step() noexcept {
    const auto found = std::find(async_steps.rbegin(), async_steps.rend(), this);
    if (found != async_steps.rend()) async_steps.erase(std::next(found).base());
}

}  // namespace ullm
