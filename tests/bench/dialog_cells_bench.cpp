// Prints what 100,000 tool calls leave behind in a cell space: the cell count and the resident
// memory (RSS) of this process before, during and after, with no network.
//
// 1. The dispatch every dialog call goes through (`DialogToolRegistry::run`), over one space:
//    handler tool calls and pattern tool calls, half each. Each handler call makes a result
//    cell, each pattern call an argument and a result cell; they go once nothing needs them.
// 2. Through `Dialog::send`: turns of one round of ten calls (five of each tool), ten turns for
//    each of 1,000 instances, over one space. Here the transcripts grow (they are the
//    instances' history, kept by design); the cells do not.
// 3. The runs of 1. with every run kept (their holds stored), which is what a space that never
//    releases a cell holds: the growth the lifetime rules take away.
// Each runs in a process of its own.
//
// Usage: ullm_bench_dialog_cells [calls]   (default 100000)

#include <ullm/dialog/dialog.hpp>
#include <ullm/providers/provider.hpp>
#include <ullm/testing/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>

#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;
using ullm::json;
namespace schema = ullm::schema;

// This process's resident set size in KiB, from /proc/self/status (0 where there is none).
long rss_kib() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
    }
    return 0;
}

// Hands freed memory back to the system where the allocator can (glibc), so that RSS shows
// what is still in use.
void release_free_memory() {
#ifdef __GLIBC__
    (void)::malloc_trim(0);
#endif
}

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// A model that never runs out and records nothing: a user message is answered with one round
// of `calls` tool calls, alternating `add_note` and `count_notes`; tool results with a short
// text. It answers whole responses only, through a scripted provider's in-process transport.
class LoopProvider final : public ullm::Provider {
public:
    explicit LoopProvider(int calls) : calls_(calls) {}

    [[nodiscard]] std::string_view name() const noexcept override { return "loop"; }
    [[nodiscard]] ullm::ProviderCapabilities capabilities(std::string_view) const override {
        return {};
    }
    [[nodiscard]] ullm::HttpRequest encode(const ullm::ChatRequest& request,
                                           bool stream) const override {
        return wire_.encode(request, stream);
    }
    [[nodiscard]] std::unique_ptr<ullm::StreamDecoder> stream_decoder(
        const ullm::ChatRequest& request) const override {
        return wire_.stream_decoder(request);  // the queue is empty: `mock_queue_exhausted`
    }
    [[nodiscard]] ullm::Transport* transport() const noexcept override { return wire_.transport(); }
    [[nodiscard]] const ullm::RetryPolicy* retry_policy() const noexcept override {
        return wire_.retry_policy();
    }

    [[nodiscard]] ullm::ChatResponse decode(const ullm::HttpResponse&,
                                            const ullm::ChatRequest& request) const override {
        ullm::ChatResponse response;
        response.model = request.model;
        response.message.role = ullm::Role::assistant;
        if (!request.messages.empty() && request.messages.back().role == ullm::Role::user) {
            for (int i = 0; i < calls_; ++i) {
                ullm::ToolCallPart call{"call_" + std::to_string(i),
                                        i % 2 == 0 ? "add_note" : "count_notes", json::object()};
                response.message.parts.emplace_back(call);
                response.tool_calls.push_back(std::move(call));
            }
            response.finish_reason = ullm::FinishReason::tool_call;
            return response;
        }
        response.message.parts.emplace_back(ullm::TextPart{"Noted."});
        response.text = "Noted.";
        return response;
    }

private:
    int calls_;
    ullm::ScriptedProvider wire_{"loop"};
};

// A notes counter, a handler that counts one and writes the count as its result, and a pattern
// that returns the count.
struct Tools {
    std::shared_ptr<ullm::CellSpace> space;
    ullm::CellLink counter;
    ullm::CellLink add;
    ullm::CellLink count;

    explicit Tools(ullm::CellSpaceOptions options = {})
        : space(std::make_shared<ullm::CellSpace>(options)) {
        counter = space->create(0, schema::integer(), "bench-counter-0123456789");
        add = space->add_handler(
            {.description = "Count a note",
             .input_schema = schema::object(),
             .writes = {counter},
             .run = [link = counter](const json& input, ullm::CellWriter& cells) {
                 const int next = cells.get(link).get<int>() + 1;
                 cells.set(link, next);
                 cells.set(ullm::parse_link(input["result"]), {{"notes", next}});
             }});
        count = space->add_pattern(
            {.description = "Read the count",
             .argument_schema = schema::object(),
             .result_schema = schema::object({{"notes", schema::integer()}}, {"notes"}),
             .run = [link = counter](const json&, const ullm::CellReader& cells,
                                     std::stop_token) -> json {
                 return {{"notes", cells.get(link)}};
             }});
    }

    [[nodiscard]] std::vector<ullm::DialogTool> dialog_tools() const {
        return {ullm::DialogTool::handler("add_note", add),
                ullm::DialogTool::pattern("count_notes", count)};
    }
};

void header(const char* title) {
    fmt::print("\n{}\n{:>10} {:>10} {:>12} {:>10}\n", title, "calls", "cells", "RSS KiB",
               "RSS +KiB");
}

void row(long calls, std::size_t cells, long base) {
    const long rss = rss_kib();
    fmt::print("{:>10} {:>10} {:>12} {:>+10}\n", calls, cells, rss, rss - base);
}

void registry_calls(long calls, long step) {
    Tools tools;
    const ullm::DialogToolRegistry registry(tools.space, tools.dialog_tools(),
                                            {.builtin_tools = false});
    ullm::DialogInstanceState state;
    std::mutex mutex;
    ullm::ToolContext context;
    ullm::CellHold turn = tools.space->hold();
    ullm::DialogCall call{&state, &mutex, [] { return true; }, &context, &turn};
    header("1. registry dispatch: handler and pattern tool calls over one CellSpace");
    const long base = rss_kib();
    row(0, tools.space->cell_count(), base);
    const auto start = Clock::now();
    for (long i = 1; i <= calls; ++i) {
        const auto outcome =
            registry.run(i % 2 == 0 ? "add_note" : "count_notes", json::object(), call);
        if (outcome.is_error) throw std::runtime_error(outcome.result.dump());
        if (i % step == 0) row(i, tools.space->cell_count(), base);
    }
    const double took = seconds_since(start);
    const std::size_t released = tools.space->collect();
    fmt::print("after collect(): {} cells ({} released); {:.1f} us a call\n",
               tools.space->cell_count(), released, took * 1e6 / static_cast<double>(calls));
}

void dialog_calls(long calls, long step) {
    constexpr int calls_per_turn = 10;
    constexpr int turns_per_instance = 10;
    Tools tools;
    long base = 0;
    {
        const ullm::Client client({.default_model = "loop/bench",
                                   .providers = {std::make_shared<LoopProvider>(calls_per_turn)}});
        ullm::Dialog dialog(client, tools.space,
                            {.tools = tools.dialog_tools(), .builtin_tools = false});
        header("2. Dialog::send: rounds of ten calls, ten turns per instance");
        base = rss_kib();
        row(0, tools.space->cell_count(), base);
        const long turns = calls / calls_per_turn;
        std::size_t messages = 0;
        const auto start = Clock::now();
        for (long i = 1; i <= turns; ++i) {
            const std::string instance = "instance-" + std::to_string(i / turns_per_instance);
            const auto turn = dialog.send(instance, "Add five notes and count them.");
            if (turn.status != ullm::DialogTurnStatus::completed) {
                throw std::runtime_error("a turn failed: " + turn.text);
            }
            if ((i * calls_per_turn) % step == 0) {
                row(i * calls_per_turn, tools.space->cell_count(), base);
            }
        }
        const double took = seconds_since(start);
        for (long i = 0; i <= turns / turns_per_instance; ++i) {
            messages += dialog.transcript("instance-" + std::to_string(i)).size();
        }
        const std::size_t released = tools.space->collect();
        fmt::print(
            "after collect(): {} cells ({} released); transcripts hold {} messages; {:.0f} "
            "us a turn\n",
            tools.space->cell_count(), released, messages,
            took * 1e6 / static_cast<double>(std::max(1L, turns)));
    }
    // The dialog, its instances and their transcripts are gone; the space is as it began.
    release_free_memory();
    const long rss = rss_kib();
    fmt::print("after the Dialog is destroyed: {} cells, RSS {} KiB ({:+} KiB)\n",
               tools.space->cell_count(), rss, rss - base);
}

void kept_runs(long calls, long step) {
    Tools tools({.max_cells = static_cast<std::size_t>(calls) * 2 + 16});
    std::vector<ullm::CellHold> kept;
    kept.reserve(static_cast<std::size_t>(calls));
    header("3. the runs of 1. again, every run kept (what a space that never releases holds)");
    const long base = rss_kib();
    row(0, tools.space->cell_count(), base);
    for (long i = 1; i <= calls; ++i) {
        if (i % 2 == 0) {
            kept.push_back(tools.space->run_handler(tools.add, json::object()).hold);
        } else {
            kept.push_back(tools.space->run_pattern(tools.count, json::object()).hold);
        }
        if (i % step == 0) row(i, tools.space->cell_count(), base);
    }
    kept.clear();
    const std::size_t released = tools.space->collect();
    release_free_memory();
    const long rss = rss_kib();
    fmt::print(
        "after letting go and collect(): {} released, {} cells left, RSS {} KiB ({:+} KiB)\n",
        released, tools.space->cell_count(), rss, rss - base);
}

// Runs `scenario` in a child process of its own, so that the memory one frees (which stays
// with the allocator) does not hide the growth of the next. Returns its exit status.
int in_child(void (*scenario)(long, long), long calls, long step) {
    std::fflush(stdout);
    const pid_t child = ::fork();
    if (child < 0) throw std::runtime_error("fork failed");
    if (child == 0) {
        int status = 0;
        try {
            scenario(calls, step);
        } catch (const std::exception& error) {
            std::fprintf(stderr, "ullm_bench_dialog_cells failed: %s\n", error.what());
            status = 1;
        }
        std::fflush(stdout);
        std::_Exit(status);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
    const long calls = argc > 1 ? std::atol(argv[1]) : 100'000;
    const long step = std::max(1L, calls / 4);
    int failed = 0;
    for (auto* scenario : {&registry_calls, &dialog_calls, &kept_runs}) {
        failed |= in_child(scenario, calls, step);
    }
    return failed;
}
