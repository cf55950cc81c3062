#pragma once

// Runs one round of tool calls for a conversation: each call on its own thread, up to a number
// at once or one after another, each with its own deadline and a stop token, counted by the turn
// queue's busy guard until its callback really returns.

#include <ullm/conversation/turn_queue.hpp>
#include <ullm/core/message.hpp>
#include <ullm/tools/tool_registry.hpp>

#include "../core/thread_pool.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

namespace ullm::detail {

/// Runs `work` once `delay` has passed, on a thread of its own choosing (never inside the call):
/// the calls' deadlines and the grace after a stop.
using ToolTimer =
    std::function<void(std::chrono::steady_clock::duration delay, std::function<void()> work)>;

struct ToolRoundSettings {
    ThreadPool* pool = nullptr;  ///< Where the callbacks run (the client's tool pool).
    std::chrono::milliseconds timeout{30'000};
    ValidationMode validation = ValidationMode::strict;
    bool sequential = false;        ///< One call after another (a window of one).
    std::size_t max_parallel = 16;  ///< At most this many calls run at once.
    std::string session_id;
    std::string tenant;
    std::string model;
    std::string provider;
    std::string turn_tag;
    std::string unknown_tool_text;  ///< Replaces the registry's unknown-tool text when set.
    ToolTimer timer;                ///< A process-wide timer thread when empty.
};

// The error result of a call that a cancel cut off or kept from starting.
inline constexpr const char* tool_call_cancelled_text = "Tool call cancelled";

struct ToolRound {
    std::vector<ToolResultPart> results;  ///< One per call, in call order.
    bool end_turn = false;                ///< A finished call set `ToolContext::end_turn`.
    bool cancelled = false;               ///< The turn was cancelled while the round ran.
    std::size_t cancelled_calls = 0;      ///< Calls answered `Tool call cancelled`.
};

// Starts the round and returns at once; `on_done` is called exactly once with the round as
// `run_tool_round` would return it, on the thread that settles it last (a tool's, the timer's,
// or the one that requested `turn_stop`), possibly before this returns. No thread waits for the
// round meanwhile.
void start_tool_round(std::shared_ptr<const ToolRegistry> registry,
                      std::shared_ptr<TurnQueue> queue, std::vector<ToolCallPart> calls,
                      ToolRoundSettings settings, std::stop_token turn_stop,
                      std::function<void(ToolRound)> on_done);

// Runs `calls`, waiting for the round (`start_tool_round`). A call that does not finish before its
// deadline is asked to stop and answered with a `tool_timeout` error result; its callback keeps the
// busy guard until it returns. When `turn_stop` is requested, every running call is asked to stop
// and each call without a result by then (running or never started) is answered `Tool call
// cancelled`.
ToolRound run_tool_round(const std::shared_ptr<const ToolRegistry>& registry,
                         const std::shared_ptr<TurnQueue>& queue,
                         const std::vector<ToolCallPart>& calls, const ToolRoundSettings& settings,
                         const std::stop_token& turn_stop);

}  // namespace ullm::detail
