#include <ullm/conversation/turn_queue.hpp>

#include <ullm/core/error.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/scripted_client.hpp"

namespace turn_queue_test {

using namespace std::chrono_literals;

using ullm::test::error_code_of;

namespace {

void wait_for_waiting(const ullm::TurnQueue& queue, std::size_t count) {
    ullm::test::wait_until([&] { return queue.waiting() == count; });
}

}  // namespace

TEST_CASE("turn queue serves 8 threads in arrival order", "[turn_queue]") {
    ullm::TurnQueue queue;
    queue.acquire();  // Hold the slot while the others arrive one by one.
    std::mutex order_mutex;
    std::vector<int> order;
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
        threads.emplace_back([&, i] {
            queue.acquire();
            {
                std::lock_guard lock(order_mutex);
                order.push_back(i);
            }
            queue.release();
        });
        wait_for_waiting(queue, static_cast<std::size_t>(i + 1));
    }
    queue.release();
    for (auto& thread : threads) thread.join();
    CHECK(order == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
    CHECK(queue.waiting() == 0);
}

TEST_CASE("turn queue refuses a turn while a tool callback runs", "[turn_queue]") {
    ullm::TurnQueue queue;
    queue.tool_started();
    try {
        queue.acquire();
        FAIL("acquire succeeded while a tool ran");
    } catch (const ullm::ConversationBusyError& error) {
        CHECK(error.code() == "conversation_busy");
        CHECK(error.status() == 409);
        CHECK_FALSE(error.retryable());
    }
    queue.tool_finished();
    queue.acquire();
    queue.release();
}

TEST_CASE("turn queue waits for running tools when asked, except on a tool's own thread",
          "[turn_queue]") {
    ullm::TurnQueue queue;
    std::atomic<bool> tool_may_finish{false};
    std::string own_thread_code;
    std::atomic<bool> refused{false};
    queue.tool_started();  // As the tool runner does before the callback's thread starts.
    std::thread tool([&] {
        queue.enter_tool_thread();
        // The callback starting a turn on its own conversation is refused, even when waiting.
        own_thread_code = error_code_of([&] { queue.acquire({}, true); });
        refused = true;
        while (!tool_may_finish) std::this_thread::sleep_for(1ms);
        queue.tool_finished();
    });
    ullm::test::wait_until([&] { return refused.load(); });
    CHECK(own_thread_code == "conversation_busy");
    CHECK(error_code_of([&] { queue.acquire(); }) == "conversation_busy");

    std::atomic<bool> served{false};
    std::thread waiter([&] {
        queue.acquire({}, true);
        served = true;
        queue.release();
    });
    wait_for_waiting(queue, 1);
    CHECK_FALSE(served.load());  // Still waiting: the tool runs.
    tool_may_finish = true;
    tool.join();
    waiter.join();
    CHECK(served.load());

    // A stop ends the wait.
    queue.tool_started();
    std::stop_source stop;
    std::string stopped_code;
    std::thread stopped(
        [&] { stopped_code = error_code_of([&] { queue.acquire(stop.get_token(), true); }); });
    wait_for_waiting(queue, 1);
    stop.request_stop();
    stopped.join();
    CHECK(stopped_code == "cancelled");
    queue.tool_finished();
    queue.acquire();
    queue.release();
}

TEST_CASE("turn queue rechecks the busy guard when a queued turn reaches the front",
          "[turn_queue]") {
    ullm::TurnQueue queue;
    queue.acquire();
    std::string code;
    std::thread queued([&] { code = error_code_of([&] { queue.acquire(); }); });
    wait_for_waiting(queue, 1);
    queue.tool_started();  // A callback begins after the other turn queued...
    queue.release();       // ...and outlives its own turn.
    queued.join();
    CHECK(code == "conversation_busy");
    CHECK(queue.waiting() == 0);
    queue.tool_finished();
    CHECK(error_code_of([&] {
              queue.acquire();
              queue.release();
          }) == "no error");
}

TEST_CASE("turn queue lets a waiting turn be cancelled without blocking the next", "[turn_queue]") {
    ullm::TurnQueue queue;
    queue.acquire();
    std::stop_source cancel;
    std::string cancelled_code;
    std::thread first(
        [&] { cancelled_code = error_code_of([&] { queue.acquire(cancel.get_token()); }); });
    wait_for_waiting(queue, 1);
    std::atomic<bool> second_served{false};
    std::thread second([&] {
        queue.acquire();
        second_served = true;
        queue.release();
    });
    wait_for_waiting(queue, 2);
    cancel.request_stop();
    first.join();
    CHECK(cancelled_code == "cancelled");
    queue.release();
    second.join();
    CHECK(second_served);
}

TEST_CASE("turn queue runs exclusive work only when idle", "[turn_queue]") {
    ullm::TurnQueue queue;
    int runs = 0;
    queue.run_exclusive([&] { ++runs; });
    CHECK(runs == 1);
    queue.acquire();
    CHECK(error_code_of([&] { queue.run_exclusive([&] { ++runs; }); }) == "conversation_busy");
    queue.release();
    queue.tool_started();
    CHECK(error_code_of([&] { queue.run_exclusive([&] { ++runs; }); }) == "conversation_busy");
    queue.tool_finished();
    CHECK(runs == 1);
    // An exception inside leaves the queue usable.
    CHECK_THROWS_AS(queue.run_exclusive([] { throw std::runtime_error("boom"); }),
                    std::runtime_error);
    queue.acquire();
    queue.release();
}

namespace {

// What an `acquire_async` caller was told, kept for the test thread to read.
struct Told {
    std::mutex mutex;
    std::vector<std::string> outcomes;  ///< "<name>" when granted, "<name>:<code>" when refused

    ullm::TurnQueue::Granted granted(std::string name) {
        return [this, name = std::move(name)](std::exception_ptr error) {
            std::string outcome = name;
            if (error) outcome += ":" + error_code_of([&] { std::rethrow_exception(error); });
            std::lock_guard lock(mutex);
            outcomes.push_back(std::move(outcome));
        };
    }

    std::vector<std::string> seen() {
        std::lock_guard lock(mutex);
        return outcomes;
    }
};

}  // namespace

TEST_CASE("turn queue serves async and blocking callers in one arrival order", "[turn_queue]") {
    ullm::TurnQueue queue;
    Told told;
    queue.acquire_async({}, false, told.granted("first"));
    CHECK(told.seen() == std::vector<std::string>{"first"});  // free: granted at once

    queue.acquire_async({}, false, told.granted("second"));
    std::thread blocking([&] {
        queue.acquire();
        {
            std::lock_guard lock(told.mutex);
            told.outcomes.push_back("blocking");
        }
        queue.release();
    });
    wait_for_waiting(queue, 2);
    queue.acquire_async({}, false, told.granted("third"));
    CHECK(queue.waiting() == 3);

    queue.release();  // first's turn ends: second is granted on this thread
    CHECK(told.seen() == std::vector<std::string>{"first", "second"});
    queue.release();  // second's: the blocking caller runs and, releasing, grants third
    blocking.join();
    CHECK(told.seen() == std::vector<std::string>{"first", "second", "blocking", "third"});
    queue.release();
    CHECK(queue.waiting() == 0);
    CHECK(error_code_of([&] {
              queue.acquire();
              queue.release();
          }) == "no error");
}

TEST_CASE("turn queue applies the busy guard to async callers", "[turn_queue]") {
    ullm::TurnQueue queue;
    Told told;
    queue.tool_started();
    queue.acquire_async({}, false, told.granted("refused"));
    CHECK(told.seen() == std::vector<std::string>{"refused:conversation_busy"});

    queue.acquire_async({}, true, told.granted("waits"));  // waits for the tool instead
    CHECK(queue.waiting() == 1);
    queue.tool_finished();
    CHECK(told.seen() == std::vector<std::string>{"refused:conversation_busy", "waits"});
    queue.release();

    // Queued before a callback began, refused when it reaches the front beside it.
    queue.acquire();
    queue.acquire_async({}, false, told.granted("late"));
    queue.tool_started();
    queue.release();
    CHECK(told.seen().back() == "late:conversation_busy");
    CHECK(queue.waiting() == 0);
    queue.tool_finished();
}

TEST_CASE("turn queue cancels an async caller's wait on its stop token", "[turn_queue]") {
    ullm::TurnQueue queue;
    Told told;
    queue.acquire();
    std::stop_source cancel;
    queue.acquire_async(cancel.get_token(), false, told.granted("cancelled"));
    queue.acquire_async({}, false, told.granted("next"));
    CHECK(queue.waiting() == 2);
    cancel.request_stop();
    CHECK(told.seen() == std::vector<std::string>{"cancelled:cancelled"});
    CHECK(queue.waiting() == 1);
    queue.release();
    CHECK(told.seen() == std::vector<std::string>{"cancelled:cancelled", "next"});
    queue.release();

    // A stop requested before the call: granted when the turn is free, as `acquire` is...
    std::stop_source stopped;
    stopped.request_stop();
    queue.acquire_async(stopped.get_token(), false, told.granted("free"));
    CHECK(told.seen().back() == "free");
    // ...and cancelled at once when it would have to wait.
    queue.acquire_async(stopped.get_token(), false, told.granted("busy"));
    CHECK(told.seen().back() == "busy:cancelled");
    CHECK(queue.waiting() == 0);
    queue.release();

    // A stop from another thread while a release grants the same caller: told exactly once.
    for (int round = 0; round < 50; ++round) {
        queue.acquire();
        std::stop_source racing;
        std::atomic<int> calls{0};
        queue.acquire_async(racing.get_token(), false, [&](const std::exception_ptr& error) {
            ++calls;
            if (!error) queue.release();
        });
        std::thread stopper([&] { racing.request_stop(); });
        queue.release();
        stopper.join();
        CHECK(calls == 1);
        CHECK(queue.waiting() == 0);
    }
    CHECK(error_code_of([&] {
              queue.acquire();
              queue.release();
          }) == "no error");
}

}  // namespace turn_queue_test
