#include <ullm/conversation/turn_queue.hpp>

#include <ullm/core/error.hpp>

#include <algorithm>
#include <thread>

namespace ullm {

namespace {

[[noreturn]] void throw_busy() {
    throw ConversationBusyError(
        "a tool callback of this conversation is running; a tool must not start turns on its "
        "own conversation, and other callers must wait until it returns");
}

}  // namespace

void TurnQueue::acquire(std::stop_token stop, bool wait_for_tools) {
    std::unique_lock lock(mutex_);
    const bool tool_thread = std::find(tool_threads_.begin(), tool_threads_.end(),
                                       std::this_thread::get_id()) != tool_threads_.end();
    if (tools_running_ > 0 && (!wait_for_tools || tool_thread)) throw_busy();
    if (active_ && owner_ == std::this_thread::get_id()) {
        // A callback of the running turn (a context manager, a budget warning) or a consumer
        // holding an unfinished stream would wait for itself forever.
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
        changed_.notify_all();
        throw CancelledError("the turn was cancelled while it waited for its slot");
    }
    waiting_.pop_front();
    if (tools_running_ > 0) {
        // Queued before the callback began: rejected rather than run beside it.
        changed_.notify_all();
        throw_busy();
    }
    active_ = true;
    owner_ = std::this_thread::get_id();
}

void TurnQueue::release() noexcept {
    {
        std::lock_guard lock(mutex_);
        active_ = false;
    }
    changed_.notify_all();
}

void TurnQueue::tool_started() noexcept {
    std::lock_guard lock(mutex_);
    ++tools_running_;
}

void TurnQueue::tool_finished() noexcept {
    {
        std::lock_guard lock(mutex_);
        --tools_running_;
        const auto mark =
            std::find(tool_threads_.begin(), tool_threads_.end(), std::this_thread::get_id());
        if (mark != tool_threads_.end()) tool_threads_.erase(mark);
    }
    changed_.notify_all();
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
    {
        std::lock_guard lock(mutex_);
        exclusive_ = false;
    }
    changed_.notify_all();
}

int TurnQueue::tools_running() const {
    std::lock_guard lock(mutex_);
    return tools_running_;
}

std::size_t TurnQueue::waiting() const {
    std::lock_guard lock(mutex_);
    return waiting_.size();
}

}  // namespace ullm
