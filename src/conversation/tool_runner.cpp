#include "tool_runner.hpp"

#include <ullm/core/error.hpp>

#include <condition_variable>
#include <mutex>
#include <thread>

namespace ullm::detail {

namespace {

// What one running call shares with the thread that runs it; outlives the turn when the
// callback ignores its stop token.
struct CallState {
    std::mutex mutex;
    std::condition_variable_any finished;
    bool done = false;
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

// Gives calls that were asked to stop a moment to return, so that a tool that honours its stop
// token does not keep the busy guard past the turn.
void grace(const std::vector<std::shared_ptr<CallState>>& states) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    for (const auto& state : states) {
        std::unique_lock lock(state->mutex);
        state->finished.wait_until(lock, until, [&] { return state->done; });
    }
}

}  // namespace

std::vector<ToolResultPart> run_tool_round(const std::shared_ptr<const ToolRegistry>& registry,
                                           const std::shared_ptr<TurnQueue>& queue,
                                           const std::vector<ToolCallPart>& calls,
                                           const ToolRoundSettings& settings,
                                           std::stop_token turn_stop) {
    const auto deadline = std::chrono::steady_clock::now() + settings.timeout;
    std::vector<std::shared_ptr<CallState>> states;
    states.reserve(calls.size());
    for (const auto& call : calls) {
        auto state = std::make_shared<CallState>();
        ToolContext context{.stop_token = state->stop.get_token(),
                            .deadline = deadline,
                            .session_id = settings.session_id,
                            .tenant = settings.tenant,
                            .model = settings.model,
                            .provider = settings.provider,
                            .tool_call_id = call.id,
                            .turn_tag = settings.turn_tag};
        // The closure is built before the guard counts the call, so that a failure to build
        // it leaves no call counted.
        auto run = [registry, queue, state, call, context, validation = settings.validation,
                    unknown = settings.unknown_tool_text]() mutable {
            ToolOutcome outcome;
            try {
                if (!unknown.empty() && registry->find(call.name) == nullptr) {
                    outcome = {unknown, true, "unknown_tool"};
                } else {
                    outcome = registry->run(call.name, call.arguments, context, validation);
                }
            } catch (...) {
                outcome.is_error = true;  // Only bad_alloc gets here.
                outcome.error_code = "tool_execution_failed";
            }
            // The guard drops before the result is visible, so that the turn that reads the
            // result never sees its own tool still counted as running.
            queue->tool_finished();
            {
                std::lock_guard lock(state->mutex);
                state->outcome = std::move(outcome);
                state->done = true;
            }
            state->finished.notify_all();
        };
        queue->tool_started();
        try {
            std::thread(std::move(run)).detach();
        } catch (...) {
            queue->tool_finished();
            std::lock_guard lock(state->mutex);
            state->outcome = {"Error: tool \"" + call.name + "\" could not be started", true,
                              "tool_execution_failed"};
            state->done = true;
        }
        states.push_back(std::move(state));
    }

    std::vector<ToolResultPart> results;
    results.reserve(calls.size());
    for (std::size_t i = 0; i < calls.size(); ++i) {
        auto& state = *states[i];
        std::unique_lock lock(state.mutex);
        const bool done =
            state.finished.wait_until(lock, turn_stop, deadline, [&] { return state.done; });
        if (done) {
            results.push_back(
                {calls[i].id, calls[i].name, state.outcome.result, state.outcome.is_error});
            continue;
        }
        lock.unlock();
        if (turn_stop.stop_requested()) {
            for (auto& running : states) running->stop.request_stop();
            grace(states);
            throw CancelledError("the turn was cancelled while its tools ran");
        }
        state.stop.request_stop();
        grace({states[i]});
        results.push_back(timeout_result(calls[i], settings.timeout));
    }
    return results;
}

}  // namespace ullm::detail
