// detail::RequestLimiter, the queue in front of a provider: in-flight and per-minute limits,
// lanes served in turn, a bounded queue, withdrawal. Its clock and timer are turned by hand.

#include <ullm/core/error.hpp>

#include <ullm/detail/request_limiter.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"

namespace request_limiter_test {

using namespace std::chrono_literals;
using ullm::detail::RequestLimiter;
using ullm::test::error_code_of;

namespace {

// A clock that moves only when told, and the timers armed against it.
struct HandTurnedTime {
    RequestLimiter::Clock::time_point now{};
    std::multimap<RequestLimiter::Clock::time_point, std::function<void()>> timers;

    std::shared_ptr<RequestLimiter> limiter(ullm::ProviderLimits limits) {
        return std::make_shared<RequestLimiter>(
            "openai", limits,
            [this](RequestLimiter::Clock::duration delay, std::function<void()> work) {
                timers.emplace(now + delay, std::move(work));
            },
            [this] { return now; });
    }

    // Moves the clock on by `step` and runs the timers that came due.
    void advance(RequestLimiter::Clock::duration step) {
        now += step;
        while (!timers.empty() && timers.begin()->first <= now) {
            auto work = std::move(timers.begin()->second);
            timers.erase(timers.begin());
            work();
        }
    }
};

// What the limiter told the requests, in the order it told them.
struct Grants {
    std::vector<std::string> order;
    std::map<std::string, RequestLimiter::Permit> permits;
    std::map<std::string, std::string> refusals;

    RequestLimiter::Granted for_request(std::string name) {
        return [this, name](RequestLimiter::Permit permit, std::exception_ptr error) {
            order.push_back(name);
            if (error) {
                refusals[name] = error_code_of([&] { std::rethrow_exception(error); });
            } else {
                permits[name] = std::move(permit);
            }
        };
    }

    // Ends request `name`: its permit is released out of the map, which the grants it lets
    // through write to.
    void release(const std::string& name) {
        RequestLimiter::Permit permit = std::move(permits.at(name));
        permits.erase(name);
        permit.release();
    }

    Grants() = default;
    Grants(const Grants&) = delete;
    Grants& operator=(const Grants&) = delete;
    // Releases what is held one permit at a time: a release may grant a request still waiting,
    // which writes its permit here (a map cannot take one while it is being destroyed).
    ~Grants() {
        while (!permits.empty()) release(permits.begin()->first);
    }
};

}  // namespace

TEST_CASE("requests beyond max_in_flight wait for a release, in order",
          "[request_limiter][limits]") {
    HandTurnedTime time;
    const auto limiter = time.limiter({.max_in_flight = 2});
    Grants grants;
    CHECK(limiter->request(0, 10, grants.for_request("a")) == nullptr);
    CHECK(limiter->request(0, 10, grants.for_request("b")) == nullptr);
    CHECK(limiter->request(0, 10, grants.for_request("c")) != nullptr);
    CHECK(limiter->request(0, 10, grants.for_request("d")) != nullptr);
    CHECK(grants.order == std::vector<std::string>{"a", "b"});
    CHECK(limiter->in_flight() == 2);
    CHECK(limiter->queued() == 2);

    grants.release("b");
    CHECK(grants.order == std::vector<std::string>{"a", "b", "c"});
    {
        const RequestLimiter::Permit destroyed = std::move(grants.permits.at("a"));
    }  // a destroyed permit releases too
    CHECK(grants.order == std::vector<std::string>{"a", "b", "c", "d"});
    CHECK(limiter->in_flight() == 2);
    CHECK(limiter->queued() == 0);
    CHECK(time.timers.empty());  // nothing waits on time
}

TEST_CASE("lanes are served in turn, each in its own order", "[request_limiter][limits]") {
    HandTurnedTime time;
    const auto limiter = time.limiter({.max_in_flight = 1});
    const std::uint64_t busy = 7;
    const std::uint64_t quiet = 1;
    const std::uint64_t other = 42;
    Grants grants;
    (void)limiter->request(busy, 1, grants.for_request("first"));
    for (const char* name : {"busy-1", "busy-2", "busy-3"}) {
        (void)limiter->request(busy, 1, grants.for_request(name));
    }
    (void)limiter->request(quiet, 1, grants.for_request("quiet-1"));
    (void)limiter->request(other, 1, grants.for_request("other-1"));
    for (std::size_t released = 0; released < 5; ++released) {
        grants.release(grants.order.back());
    }
    CHECK(grants.order ==
          std::vector<std::string>{"first", "busy-1", "quiet-1", "other-1", "busy-2", "busy-3"});
    CHECK(grants.refusals.empty());
}

TEST_CASE("requests_per_minute holds a start until the oldest leaves the minute",
          "[request_limiter][limits]") {
    HandTurnedTime time;
    const auto limiter = time.limiter({.requests_per_minute = 2});
    Grants grants;
    (void)limiter->request(0, 1, grants.for_request("a"));
    time.advance(10s);
    (void)limiter->request(0, 1, grants.for_request("b"));
    grants.release("a");  // finished: they still count for the minute they started in
    grants.release("b");
    (void)limiter->request(0, 1, grants.for_request("c"));
    CHECK(grants.order == std::vector<std::string>{"a", "b"});
    REQUIRE(time.timers.size() == 1);
    CHECK(time.timers.begin()->first == RequestLimiter::Clock::time_point{} + 60s);

    time.advance(49s);
    CHECK(grants.order.size() == 2);
    time.advance(1s);  // a started 60 s ago
    CHECK(grants.order == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("tokens_per_minute counts estimates, then what the request used",
          "[request_limiter][limits]") {
    HandTurnedTime time;
    const auto limiter = time.limiter({.tokens_per_minute = 1000});
    Grants grants;
    (void)limiter->request(0, 600, grants.for_request("a"));
    (void)limiter->request(0, 600, grants.for_request("b"));
    CHECK(grants.order == std::vector<std::string>{"a"});

    SECTION("settling below the estimate makes room at once") {
        grants.permits["a"].settle(150);
        CHECK(grants.order == std::vector<std::string>{"a", "b"});
    }
    SECTION("else the estimate counts for the minute") {
        grants.permits["a"].release();
        CHECK(grants.order.size() == 1);
        time.advance(60s);
        CHECK(grants.order == std::vector<std::string>{"a", "b"});
    }
    SECTION("a later small request does not overtake the waiting large one") {
        (void)limiter->request(0, 100, grants.for_request("small"));
        CHECK(grants.order.size() == 1);
        time.advance(60s);
        CHECK(grants.order == std::vector<std::string>{"a", "b", "small"});
    }
}

TEST_CASE("a request larger than tokens_per_minute starts alone in an empty minute",
          "[request_limiter][limits]") {
    HandTurnedTime time;
    const auto limiter = time.limiter({.tokens_per_minute = 100});
    Grants grants;
    (void)limiter->request(0, 5000, grants.for_request("huge"));
    (void)limiter->request(0, 1, grants.for_request("tiny"));
    CHECK(grants.order == std::vector<std::string>{"huge"});
    time.advance(60s);
    CHECK(grants.order == std::vector<std::string>{"huge", "tiny"});
}

TEST_CASE("a hold starts nothing until it ends, and only grows", "[request_limiter][limits]") {
    HandTurnedTime time;
    const auto limiter = time.limiter({.max_in_flight = 8});
    Grants grants;
    limiter->hold_until(time.now + 2s);
    limiter->hold_until(time.now + 1s);  // shorter: changes nothing
    (void)limiter->request(0, 1, grants.for_request("a"));
    (void)limiter->request(0, 1, grants.for_request("b"));
    CHECK(grants.order.empty());
    time.advance(1s);
    CHECK(grants.order.empty());
    time.advance(1s);
    CHECK(grants.order == std::vector<std::string>{"a", "b"});
}

TEST_CASE("a full queue refuses at once with queue_full", "[request_limiter][limits]") {
    HandTurnedTime time;
    Grants grants;
    SECTION("max_queued waiting already") {
        const auto limiter = time.limiter({.max_in_flight = 1, .max_queued = 1});
        (void)limiter->request(0, 1, grants.for_request("running"));
        CHECK(limiter->request(0, 1, grants.for_request("waiting")) != nullptr);
        CHECK(limiter->request(0, 1, grants.for_request("refused")) == nullptr);
        CHECK(grants.refusals == std::map<std::string, std::string>{{"refused", "queue_full"}});
        CHECK(limiter->queued() == 1);
    }
    SECTION("max_queued 0: a request that cannot start fails") {
        const auto limiter = time.limiter({.max_in_flight = 1, .max_queued = 0});
        (void)limiter->request(0, 1, grants.for_request("running"));
        CHECK(limiter->request(0, 1, grants.for_request("refused")) == nullptr);
        CHECK(grants.refusals == std::map<std::string, std::string>{{"refused", "queue_full"}});
    }
}

TEST_CASE("a request that waits past max_queue_wait fails with queue_timeout",
          "[request_limiter][limits]") {
    HandTurnedTime time;
    const auto limiter = time.limiter({.max_in_flight = 1, .max_queue_wait = 100ms});
    Grants grants;
    (void)limiter->request(0, 1, grants.for_request("running"));
    CHECK(limiter->request(0, 1, grants.for_request("early")) != nullptr);
    time.advance(60ms);
    CHECK(limiter->request(0, 1, grants.for_request("late")) != nullptr);
    time.advance(40ms);  // "early" has waited 100 ms
    CHECK(grants.refusals == std::map<std::string, std::string>{{"early", "queue_timeout"}});
    CHECK(limiter->queued() == 1);
    grants.release("running");  // "late" starts in time; its timer then finds nothing
    time.advance(100ms);
    CHECK(grants.order == std::vector<std::string>{"running", "early", "late"});
    CHECK(grants.refusals.size() == 1);
    CHECK(limiter->in_flight() == 1);
}

TEST_CASE("a withdrawn request is told cancelled and lets the next go",
          "[request_limiter][limits]") {
    HandTurnedTime time;
    const auto limiter = time.limiter({.tokens_per_minute = 1000});
    Grants grants;
    (void)limiter->request(0, 600, grants.for_request("a"));
    const auto large = limiter->request(0, 900, grants.for_request("large"));
    (void)limiter->request(0, 100, grants.for_request("small"));
    REQUIRE(large != nullptr);
    limiter->withdraw(large);
    CHECK(grants.refusals == std::map<std::string, std::string>{{"large", "cancelled"}});
    CHECK(grants.order == std::vector<std::string>{"a", "large", "small"});
    limiter->withdraw(large);  // once only
    CHECK(grants.order.size() == 3);
}

TEST_CASE("acquire waits for a permit and gives up on its stop token",
          "[request_limiter][limits]") {
    const auto limiter = std::make_shared<RequestLimiter>(
        "openai", ullm::ProviderLimits{.max_in_flight = 1},
        [](RequestLimiter::Clock::duration, std::function<void()>) {});
    auto held = limiter->acquire(0, 1, {});
    CHECK(limiter->in_flight() == 1);

    std::stop_source stop;
    std::string outcome;
    std::thread waiter(
        [&] { outcome = error_code_of([&] { (void)limiter->acquire(0, 1, stop.get_token()); }); });
    while (limiter->queued() == 0) std::this_thread::sleep_for(1ms);
    stop.request_stop();
    waiter.join();
    CHECK(outcome == "cancelled");

    std::thread next(
        [&] { outcome = error_code_of([&] { auto p = limiter->acquire(0, 1, {}); }); });
    while (limiter->queued() == 0) std::this_thread::sleep_for(1ms);
    held.release();
    next.join();
    CHECK(outcome == "no error");
    CHECK(limiter->in_flight() == 0);
}

}  // namespace request_limiter_test
