// `detail::start_tool_round`, the async round of a conversation's tool calls, driven directly:
// answers in call order, the window, deadlines, a stop, one end, and no round kept alive by a
// timer. (The conversation tests cover the same rules through `send`, which waits for it.)

#include "../../src/conversation/tool_runner.hpp"

#include <ullm/tools/schema.hpp>

#include "../../src/core/work_thread.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/concurrency_counter.hpp"
#include "support/scripted_client.hpp"

namespace tool_round_test {

using namespace std::chrono_literals;
using ullm::json;

namespace {

// A tool that sleeps `ms` (from its arguments), or until stopped when `ms` is negative.
ullm::Tool sleeper(ullm::test::ConcurrencyCounter& counter, std::atomic<int>& runs,
                   std::atomic<int>& stopped) {
    return ullm::define_tool(
        {.name = "sleep",
         .description = "Sleeps",
         .parameters = ullm::schema::object({{"ms", ullm::schema::integer()}}, {"ms"}),
         .execute = [&](const json& args, ullm::ToolContext& context) -> json {
             const auto running = counter.enter();
             ++runs;
             const int ms = args["ms"].get<int>();
             const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
             while ((ms < 0 || std::chrono::steady_clock::now() < until) &&
                    !context.stop_token.stop_requested()) {
                 std::this_thread::sleep_for(1ms);
             }
             if (context.stop_token.stop_requested()) ++stopped;
             if (args.value("end", false)) context.end_turn = true;
             return "slept " + std::to_string(ms);
         }});
}

ullm::ToolCallPart call(const std::string& id, int ms) {
    return {id, "sleep", json{{"ms", ms}}};
}

struct Fixture {
    ullm::test::ConcurrencyCounter counter;
    std::atomic<int> runs{0};
    std::atomic<int> stopped{0};
    std::shared_ptr<const ullm::ToolRegistry> registry = std::make_shared<const ullm::ToolRegistry>(
        std::vector<ullm::Tool>{sleeper(counter, runs, stopped)});
    std::shared_ptr<ullm::TurnQueue> queue = std::make_shared<ullm::TurnQueue>();
    ullm::detail::ThreadPool pool{"ullm-tool", 8};
    std::shared_ptr<ullm::detail::WorkThread> timer =
        std::make_shared<ullm::detail::WorkThread>("ullm-test-timer");

    ullm::detail::ToolRoundSettings settings(std::chrono::milliseconds timeout = 5000ms) {
        ullm::detail::ToolRoundSettings out;
        out.pool = &pool;
        out.timeout = timeout;
        out.timer = [timer = timer](std::chrono::steady_clock::duration delay,
                                    std::function<void()> work) {
            timer->post_after(delay, std::move(work));
        };
        return out;
    }

    // Starts a round and waits for its end; counts how often `on_done` was called.
    ullm::detail::ToolRound run(std::vector<ullm::ToolCallPart> calls,
                                ullm::detail::ToolRoundSettings with, std::stop_token stop = {},
                                std::atomic<int>* ends = nullptr) {
        auto ended = std::make_shared<std::promise<ullm::detail::ToolRound>>();
        auto future = ended->get_future();
        ullm::detail::start_tool_round(registry, queue, std::move(calls), std::move(with),
                                       std::move(stop),
                                       [ended, ends](ullm::detail::ToolRound round) {
                                           if (ends != nullptr) ++*ends;
                                           ended->set_value(std::move(round));
                                       });
        REQUIRE(future.wait_for(20s) == std::future_status::ready);
        return future.get();
    }
};

std::vector<std::string> ids(const ullm::detail::ToolRound& round) {
    std::vector<std::string> out;
    for (const auto& result : round.results) out.push_back(result.tool_call_id);
    return out;
}

}  // namespace

TEST_CASE("a tool round answers in call order and keeps its window", "[tool_round]") {
    Fixture f;
    auto settings = f.settings();
    settings.max_parallel = 2;
    std::atomic<int> ends{0};
    // The first call is the slowest: the later ones finish first, and the window slides only
    // as far as two past the first call without an answer.
    const auto round =
        f.run({call("a", 150), call("b", 10), call("c", 10), call("d", 10)}, settings, {}, &ends);
    CHECK(ids(round) == std::vector<std::string>{"a", "b", "c", "d"});
    CHECK(round.results[0].result == "slept 150");
    CHECK(round.results[3].result == "slept 10");
    CHECK_FALSE(round.cancelled);
    CHECK(f.counter.most() == 2);
    CHECK(f.runs == 4);
    std::this_thread::sleep_for(50ms);
    CHECK(ends == 1);
    CHECK(f.queue->tools_running() == 0);

    settings.sequential = true;
    (void)f.run({call("e", 5), call("f", 5), call("g", 5)}, settings);
    CHECK(f.counter.most() == 2);  // one at a time this round
}

TEST_CASE("a tool round times a call out at its deadline and stops it", "[tool_round]") {
    Fixture f;
    const auto round = f.run({call("slow", -1), call("quick", 5)}, f.settings(100ms));
    REQUIRE(round.results.size() == 2);
    CHECK(round.results[0].is_error);
    CHECK(round.results[0].result.get<std::string>().find("did not finish within 100 ms") !=
          std::string::npos);
    CHECK(round.results[1].result == "slept 5");
    CHECK(f.stopped == 1);
}

TEST_CASE("a stopped tool round answers what has no result and never starts the rest",
          "[tool_round]") {
    Fixture f;
    auto settings = f.settings();
    settings.sequential = true;

    SECTION("stopped while a call runs") {
        std::stop_source stop;
        std::thread stopper([&] {
            while (f.runs < 2) std::this_thread::sleep_for(1ms);
            stop.request_stop();
        });
        const auto round = f.run({call("done", 5), call("running", -1), call("never", 5)}, settings,
                                 stop.get_token());
        stopper.join();
        CHECK(round.cancelled);
        CHECK(round.cancelled_calls == 2);
        CHECK(round.results[0].result == "slept 5");
        CHECK(round.results[1].result == "Tool call cancelled");
        CHECK(round.results[2].result == "Tool call cancelled");
        CHECK(f.runs == 2);
        CHECK(f.stopped == 1);
    }
    SECTION("stopped before it began") {
        std::stop_source stop;
        stop.request_stop();
        const auto round = f.run({call("a", 5), call("b", 5)}, settings, stop.get_token());
        CHECK(round.cancelled);
        CHECK(round.cancelled_calls == 2);
        CHECK(f.runs == 0);
    }
}

TEST_CASE("a finished tool round is not kept alive by its pending deadline timers",
          "[tool_round]") {
    Fixture f;
    std::weak_ptr<int> watched;
    {
        auto token = std::make_shared<int>(1);
        watched = token;
        auto settings = f.settings(300'000ms);  // a deadline far away
        settings.timer = [timer = f.timer, token](std::chrono::steady_clock::duration delay,
                                                  std::function<void()> work) {
            timer->post_after(delay, std::move(work));
        };
        const auto round = f.run({call("a", 1)}, std::move(settings));
        CHECK(round.results.at(0).result == "slept 1");
    }
    // The settings (and so the round) go once the round has ended (just after `on_done`), although
    // the timer still holds its work for five minutes.
    ullm::test::wait_until([&] { return watched.expired(); });
}

}  // namespace tool_round_test
