#include "tool_runner.hpp"

#include <ullm/core/error.hpp>

#include <algorithm>
#include <condition_variable>
#include <mutex>

namespace ullm::detail {

namespace {

using SteadyClock = std::chrono::steady_clock;

// What one running call shares with the thread that runs it; outlives the turn when the
// callback ignores its stop token.
struct CallState {
    std::mutex mutex;
    std::condition_variable_any finished;
    bool done = false;
    bool end_turn = false;
    SteadyClock::time_point finished_at;
    ToolOutcome outcome;
    std::stop_source stop;
};

ToolResultPart timeout_result(const ToolCallPart& call, std::chrono::milliseconds timeout) {
    return {call.id, call.name,
            "Error: tool \"" + call.name + "\" did not finish within " +
                std::to_string(timeout.count()) +
                " ms and was stopped. Try again or proceed "
                "without its result.",
            true};
}

ToolResultPart cancelled_result(const ToolCallPart& call) {
    return {call.id, call.name, tool_call_cancelled_text, true};
}

// `value` with every string that is not valid UTF-8 repaired (bad bytes become U+FFFD), so that
// a tool's bytes can always be sent and stored.
json valid_utf8(json value) {
    try {
        (void)value.dump();
        return value;
    } catch (const json::type_error&) {
        return json::parse(value.dump(-1, ' ', false, json::error_handler_t::replace));
    }
}

// Gives calls that were asked to stop a moment to return, so that a tool that honours its stop
// token does not keep the busy guard past the turn.
void grace(const std::vector<std::shared_ptr<CallState>>& states) {
    const auto until = SteadyClock::now() + std::chrono::milliseconds(100);
    for (const auto& state : states) {
        if (!state) continue;
        std::unique_lock lock(state->mutex);
        state->finished.wait_until(lock, until, [&] { return state->done; });
    }
}

// Starts `call` on a thread of the pool, counted by the busy guard until its callback returns.
// A call that waits for a thread of the pool waits within its deadline.
std::shared_ptr<CallState> start_call(const std::shared_ptr<const ToolRegistry>& registry,
                                      const std::shared_ptr<TurnQueue>& queue,
                                      const ToolCallPart& call, const ToolRoundSettings& settings,
                                      SteadyClock::time_point deadline) {
    auto state = std::make_shared<CallState>();
    ToolContext context{.stop_token = state->stop.get_token(),
                        .deadline = deadline,
                        .session_id = settings.session_id,
                        .tenant = settings.tenant,
                        .model = settings.model,
                        .provider = settings.provider,
                        .tool_call_id = call.id,
                        .turn_tag = settings.turn_tag};
    // The closure is built before the guard counts the call, so that a failure to build it
    // leaves no call counted.
    auto run = [registry, queue, state, call, context, validation = settings.validation,
                unknown = settings.unknown_tool_text]() mutable {
        ToolOutcome outcome;
        try {
            // A turn this callback starts on its own conversation is refused, never waited for.
            queue->enter_tool_thread();
            if (state->stop.stop_requested()) {
                // Its deadline passed, or its turn was cancelled, while it waited for a thread
                // of the pool: it has been answered already, and never runs.
                outcome = {tool_call_cancelled_text, true, {}};
            } else if (!unknown.empty() && registry->find(call.name) == nullptr) {
                outcome = {unknown, true, detail::report(ErrorCode::unknown_tool)};
            } else {
                outcome = registry->run(call.name, call.arguments, context, validation);
            }
        } catch (...) {
            outcome.is_error = true;  // Only bad_alloc gets here.
            outcome.error_code = detail::report(ErrorCode::tool_execution_failed);
        }
        outcome.result = valid_utf8(std::move(outcome.result));
        // The guard drops before the result is visible, so that the turn that reads the
        // result never sees its own tool still counted as running.
        queue->tool_finished();
        {
            std::lock_guard lock(state->mutex);
            state->outcome = std::move(outcome);
            state->end_turn = context.end_turn;
            state->finished_at = SteadyClock::now();
            state->done = true;
        }
        state->finished.notify_all();
    };
    queue->tool_started();
    bool posted = false;
    try {
        posted = settings.pool->post(std::move(run));
    } catch (...) {
    }
    if (!posted) {
        queue->tool_finished();
        std::lock_guard lock(state->mutex);
        state->outcome = {"Error: tool \"" + call.name + "\" could not be started", true,
                          detail::report(ErrorCode::tool_execution_failed)};
        state->done = true;
    }
    return state;
}

}  // namespace

ToolRound run_tool_round(const std::shared_ptr<const ToolRegistry>& registry,
                         const std::shared_ptr<TurnQueue>& queue,
                         const std::vector<ToolCallPart>& calls, const ToolRoundSettings& settings,
                         const std::stop_token& turn_stop) {
    // At most `window` calls run at once; each gets its deadline when it starts. Calls start in
    // call order, a later one as an earlier one is done.
    const std::size_t window =
        settings.sequential ? 1 : std::max<std::size_t>(1, settings.max_parallel);
    std::vector<std::shared_ptr<CallState>> states(calls.size());
    std::vector<SteadyClock::time_point> deadlines(calls.size());
    std::size_t started = 0;
    ToolRound round;
    round.results.reserve(calls.size());
    for (std::size_t i = 0; i < calls.size(); ++i) {
        while (!round.cancelled && started < calls.size() && started < i + window &&
               !turn_stop.stop_requested()) {
            deadlines[started] = SteadyClock::now() + settings.timeout;
            states[started] =
                start_call(registry, queue, calls[started], settings, deadlines[started]);
            ++started;
        }
        auto* state = states[i].get();
        bool done = false;
        if (state != nullptr) {
            std::unique_lock lock(state->mutex);
            done = round.cancelled ? state->done
                                   : state->finished.wait_until(lock, turn_stop, deadlines[i],
                                                                [&] { return state->done; });
        }
        // A result that came after the call's deadline is a timeout, however soon the wait
        // noticed: a tool that stops when it sees its deadline has not finished within it.
        if (done && !round.cancelled && state->finished_at >= deadlines[i]) done = false;
        if (done) {
            round.end_turn = round.end_turn || state->end_turn;
            round.results.push_back(
                {calls[i].id, calls[i].name, state->outcome.result, state->outcome.is_error});
            continue;
        }
        if (turn_stop.stop_requested()) {
            // Whatever has no result now never gets one: the call is asked to stop (or never
            // starts) and answered `Tool call cancelled`.
            round.cancelled = true;
            if (state != nullptr) state->stop.request_stop();
            ++round.cancelled_calls;
            round.results.push_back(cancelled_result(calls[i]));
            continue;
        }
        state->stop.request_stop();
        grace({states[i]});
        round.results.push_back(timeout_result(calls[i], settings.timeout));
    }
    if (round.cancelled) grace(states);
    return round;
}

}  // namespace ullm::detail
