#include "tool_runner.hpp"

#include <ullm/core/error.hpp>

#include "../core/work_thread.hpp"

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>

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
    std::function<void()> on_finished;  ///< Told once the call is done, after `done` is set.
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
        return json::parse(
            std::string_view(value.dump(-1, ' ', false, json::error_handler_t::replace)));
    }
}

// Starts `call` on a thread of the pool, counted by the busy guard until its callback returns.
// A call that waits for a thread of the pool waits within its deadline.
std::shared_ptr<CallState> start_call(const std::shared_ptr<const ToolRegistry>& registry,
                                      const std::shared_ptr<TurnQueue>& queue,
                                      const ToolCallPart& call, const ToolRoundSettings& settings,
                                      SteadyClock::time_point deadline,
                                      std::function<void()> on_finished) {
    auto state = std::make_shared<CallState>();
    state->on_finished = std::move(on_finished);
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
        state->on_finished();
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

namespace {

// One round in flight: which calls have started, which have their answer, and the end. Each
// event (a call returned, a deadline or a grace period passed, the turn was stopped) takes the
// mutex, settles what it can and starts what the window now allows; the last one tells
// `on_done`. It holds itself from `begin` until then.
class Round : public std::enable_shared_from_this<Round> {
public:
    Round(std::shared_ptr<const ToolRegistry> registry, std::shared_ptr<TurnQueue> queue,
          std::vector<ToolCallPart> calls, ToolRoundSettings settings,
          std::function<void(ToolRound)> on_done)
        : registry_(std::move(registry)),
          queue_(std::move(queue)),
          calls_(std::move(calls)),
          settings_(std::move(settings)),
          on_done_(std::move(on_done)),
          window_(settings_.sequential ? 1 : std::max<std::size_t>(1, settings_.max_parallel)),
          states_(calls_.size()),
          deadlines_(calls_.size()),
          slots_(calls_.size(), Slot::waiting),
          results_(calls_.size()) {}

    void begin(const std::stop_token& turn_stop) {
        {
            std::lock_guard lock(mutex_);
            self_ = shared_from_this();
        }
        // Made before any call starts, outside the mutex: a stop already requested runs the
        // callback at once, and the round ends with no call started.
        std::unique_ptr<std::stop_callback<std::function<void()>>> on_stop;
        if (turn_stop.stop_possible()) {
            on_stop = std::make_unique<std::stop_callback<std::function<void()>>>(
                turn_stop, std::function<void()>([weak = weak_from_this()] {
                    if (const auto self = weak.lock()) self->stop();
                }));
        }
        Finish finish;
        {
            std::lock_guard lock(mutex_);
            if (finished_) return;  // `on_stop` goes outside the mutex, its callback done
            on_stop_ = std::move(on_stop);
            start_calls(finish);
        }
        finish.deliver();
    }

private:
    enum class Slot { waiting, running, overdue, settled };

    // What an event decided that is done after the mutex is let go: the round's end.
    struct Finish {
        std::function<void(ToolRound)> on_done;
        ToolRound round;
        std::unique_ptr<std::stop_callback<std::function<void()>>> on_stop;
        std::shared_ptr<Round> self;
        void deliver() {
            on_stop.reset();  // may wait for a stop callback running elsewhere: not under the mutex
            if (on_done) on_done(std::move(round));
        }
    };

    // Starts the calls the window allows: in call order, up to `window_` past the first call
    // without an answer. With the mutex held.
    void start_calls(Finish& finish) {
        while (settled_ < calls_.size() && slots_[settled_] == Slot::settled) ++settled_;
        while (!cancelled_ && started_ < calls_.size() && started_ < settled_ + window_) {
            const std::size_t index = started_++;
            deadlines_[index] = SteadyClock::now() + settings_.timeout;
            slots_[index] = Slot::running;
            const std::weak_ptr<Round> weak = weak_from_this();
            states_[index] = start_call(registry_, queue_, calls_[index], settings_,
                                        deadlines_[index], [weak, index] {
                                            if (const auto self = weak.lock())
                                                self->returned(index);
                                        });
            if (done(index)) {
                answer(index);  // the pool could not take it: answered at once
            } else {
                after(deadlines_[index] - SteadyClock::now(),
                      [index](Round& round) { round.overdue(index); });
            }
            while (settled_ < calls_.size() && slots_[settled_] == Slot::settled) ++settled_;
        }
        if (settled_ == calls_.size()) end(finish);
    }

    // Runs `event` with the mutex held, unless the round has ended, then delivers the end it
    // may have decided.
    template <class Event>
    void handle(Event&& event) {
        Finish finish;
        {
            std::lock_guard lock(mutex_);
            if (finished_) return;
            event(finish);
        }
        finish.deliver();
    }

    [[nodiscard]] bool done(std::size_t index) const {
        std::lock_guard lock(states_[index]->mutex);
        return states_[index]->done;
    }

    // Gives call `index` its real result, or the timeout's when it came at or after its
    // deadline (a tool that stops when it sees its deadline has not finished within it).
    void answer(std::size_t index) {
        const CallState& state = *states_[index];
        if (!cancelled_ && state.finished_at >= deadlines_[index]) {
            results_[index] = timeout_result(calls_[index], settings_.timeout);
        } else {
            end_turn_ = end_turn_ || state.end_turn;
            results_[index] = ToolResultPart{calls_[index].id, calls_[index].name,
                                             state.outcome.result, state.outcome.is_error};
        }
        slots_[index] = Slot::settled;
    }

    // Call `index` returned.
    void returned(std::size_t index) {
        handle([&](Finish& finish) {
            if (cancelled_) {
                if (all_returned()) end(finish);
            } else if (slots_[index] == Slot::running) {
                answer(index);
                start_calls(finish);
            } else if (slots_[index] == Slot::overdue) {
                time_out(index, finish);
            }
        });
    }

    // Call `index` reached its deadline: it is asked to stop and given up to 100 ms to return
    // before it is answered with the timeout.
    void overdue(std::size_t index) {
        handle([&](Finish& finish) {
            if (cancelled_ || slots_[index] != Slot::running) return;
            if (done(index)) {
                answer(index);  // returned at the deadline; its own event is on the way
                start_calls(finish);
            } else {
                states_[index]->stop.request_stop();
                slots_[index] = Slot::overdue;
                after(std::chrono::milliseconds(100),
                      [index](Round& round) { round.grace_over(index); });
            }
        });
    }

    void grace_over(std::size_t index) {
        handle([&](Finish& finish) {
            if (!cancelled_ && slots_[index] == Slot::overdue) time_out(index, finish);
        });
    }

    // An overdue call is answered with the timeout, returned or not.
    void time_out(std::size_t index, Finish& finish) {
        results_[index] = timeout_result(calls_[index], settings_.timeout);
        slots_[index] = Slot::settled;
        start_calls(finish);
    }

    // The turn was stopped: every call without an answer is asked to stop (or never starts)
    // and answered `Tool call cancelled`; the round ends once the calls started have returned,
    // or after 100 ms.
    void stop() {
        handle([&](Finish& finish) {
            if (cancelled_) return;
            cancelled_ = true;
            for (std::size_t index = 0; index < calls_.size(); ++index) {
                if (slots_[index] == Slot::settled) continue;
                if (slots_[index] == Slot::overdue) {
                    results_[index] = timeout_result(calls_[index], settings_.timeout);
                } else if (slots_[index] == Slot::running && done(index)) {
                    answer(index);
                    continue;
                } else {
                    if (states_[index]) states_[index]->stop.request_stop();
                    results_[index] = cancelled_result(calls_[index]);
                    ++cancelled_calls_;
                }
                slots_[index] = Slot::settled;
            }
            if (all_returned()) {
                end(finish);
            } else {
                after(std::chrono::milliseconds(100),
                      [](Round& round) { round.grace_after_stop(); });
            }
        });
    }

    void grace_after_stop() {
        handle([&](Finish& finish) { end(finish); });
    }

    [[nodiscard]] bool all_returned() const {
        for (std::size_t index = 0; index < started_; ++index) {
            if (!done(index)) return false;
        }
        return true;
    }

    // Runs `event` on this round after `delay`, unless the round has gone by then.
    void after(SteadyClock::duration delay, std::function<void(Round&)> event) {
        auto work = [weak = weak_from_this(), event = std::move(event)] {
            if (const auto self = weak.lock()) event(*self);
        };
        if (settings_.timer) {
            settings_.timer(delay, std::move(work));
        } else {
            static WorkThread fallback("ullm-tool-timer");
            fallback.post_after(delay, std::move(work));
        }
    }

    // With the mutex held: the round is over; `finish` tells it once the mutex is let go.
    void end(Finish& finish) {
        finished_ = true;
        finish.round.results.reserve(calls_.size());
        for (auto& result : results_) finish.round.results.push_back(std::move(*result));
        finish.round.end_turn = end_turn_;
        finish.round.cancelled = cancelled_;
        finish.round.cancelled_calls = cancelled_calls_;
        finish.on_done = std::move(on_done_);
        finish.on_stop = std::move(on_stop_);
        finish.self = std::move(self_);
    }

    std::shared_ptr<const ToolRegistry> registry_;
    std::shared_ptr<TurnQueue> queue_;
    std::vector<ToolCallPart> calls_;
    ToolRoundSettings settings_;
    std::function<void(ToolRound)> on_done_;
    const std::size_t window_;

    std::mutex mutex_;
    std::vector<std::shared_ptr<CallState>> states_;
    std::vector<SteadyClock::time_point> deadlines_;
    std::vector<Slot> slots_;
    std::vector<std::optional<ToolResultPart>> results_;
    std::size_t started_ = 0;
    std::size_t settled_ = 0;  ///< Calls before this one all have their answer.
    bool cancelled_ = false;
    std::size_t cancelled_calls_ = 0;
    bool end_turn_ = false;
    bool finished_ = false;
    std::unique_ptr<std::stop_callback<std::function<void()>>> on_stop_;
    std::shared_ptr<Round> self_;  ///< From `begin` until the end.
};

}  // namespace

void start_tool_round(std::shared_ptr<const ToolRegistry> registry,
                      std::shared_ptr<TurnQueue> queue, std::vector<ToolCallPart> calls,
                      ToolRoundSettings settings, std::stop_token turn_stop,
                      std::function<void(ToolRound)> on_done) {
    auto round = std::make_shared<Round>(std::move(registry), std::move(queue), std::move(calls),
                                         std::move(settings), std::move(on_done));
    round->begin(turn_stop);
}

ToolRound run_tool_round(const std::shared_ptr<const ToolRegistry>& registry,
                         const std::shared_ptr<TurnQueue>& queue,
                         const std::vector<ToolCallPart>& calls, const ToolRoundSettings& settings,
                         const std::stop_token& turn_stop) {
    // Shared: the thread that ends the round may still be inside `set_value` when this one wakes.
    auto ended = std::make_shared<std::promise<ToolRound>>();
    std::future<ToolRound> round = ended->get_future();
    start_tool_round(registry, queue, calls, settings, turn_stop,
                     [ended](ToolRound result) { ended->set_value(std::move(result)); });
    // A turn run by a tool (an agent calling another) waits here on a thread of the tool pool
    // for calls that need the pool too: the pool has a thread more meanwhile.
    const ThreadPool::Blocked blocked;
    return round.get();
}

}  // namespace ullm::detail
