#pragma once

#include <ullm/core/executor.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace ullm::test {

/// A test executor: one thread that runs what is posted, in order. Made `closed`, it runs
/// nothing until `open()`, so that what a call did before its first step can be seen.
///
/// Its last owner may be a coroutine that ran on that thread (the frame holds the executor):
/// the thread cannot join itself, so it is then let go and ends once the work it runs returns.
class QueueExecutor final : public Executor {
public:
    enum class Gate { open, closed };

    explicit QueueExecutor(Gate gate = Gate::open)
        : core_(std::make_shared<Core>(gate == Gate::open)),
          thread_([core = core_] { core->run(); }) {}
    QueueExecutor(const QueueExecutor&) = delete;
    QueueExecutor& operator=(const QueueExecutor&) = delete;
    ~QueueExecutor() override {
        core_->stop();
        if (thread_.get_id() == std::this_thread::get_id()) {
            thread_.detach();
        } else {
            thread_.join();
        }
    }

    void post(std::function<void()> work) noexcept override { core_->post(std::move(work)); }
    /// Lets a closed executor run what was posted and what comes.
    void open() { core_->set_open(); }
    [[nodiscard]] std::thread::id id() const { return thread_.get_id(); }

private:
    struct Core {
        explicit Core(bool open) : opened(open) {}

        std::mutex mutex;
        std::condition_variable changed;
        std::deque<std::function<void()>> queue;
        bool opened;
        bool stopping = false;

        void post(std::function<void()> work) {
            {
                std::lock_guard lock(mutex);
                queue.push_back(std::move(work));
            }
            changed.notify_all();
        }
        void set_open() {
            {
                std::lock_guard lock(mutex);
                opened = true;
            }
            changed.notify_all();
        }
        void stop() {
            {
                std::lock_guard lock(mutex);
                stopping = true;
                opened = true;  // what was posted still runs
            }
            changed.notify_all();
        }
        void run() {
            std::unique_lock lock(mutex);
            for (;;) {
                changed.wait(lock, [&] { return stopping || (opened && !queue.empty()); });
                if (queue.empty()) return;
                auto work = std::move(queue.front());
                queue.pop_front();
                lock.unlock();
                work();
                work = nullptr;  // unlocked: the executor's last owner may be among its captures
                lock.lock();
            }
        }
    };
    std::shared_ptr<Core> core_;
    std::thread thread_;
};

}  // namespace ullm::test
