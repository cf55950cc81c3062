#pragma once

// Runs one round of tool calls for a conversation: each call on its own thread, all in
// parallel, each with a deadline and a stop token, counted by the turn queue's busy guard until
// its callback really returns.

#include <ullm/conversation/turn_queue.hpp>
#include <ullm/core/message.hpp>
#include <ullm/tools/tool_registry.hpp>

#include <chrono>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

namespace ullm::detail {

struct ToolRoundSettings {
    std::chrono::milliseconds timeout{30'000};
    ValidationMode validation = ValidationMode::strict;
    std::string session_id;
    std::string tenant;
    std::string model;
    std::string provider;
    std::string turn_tag;
    std::string unknown_tool_text;  ///< Replaces the registry's unknown-tool text when set.
};

// The results of `calls`, in call order. A call that does not finish before its deadline is
// asked to stop and answered with a `tool_timeout` error result; its callback keeps the busy
// guard until it returns. Throws `CancelledError` when `turn_stop` is requested (every running
// call is asked to stop).
std::vector<ToolResultPart> run_tool_round(const std::shared_ptr<const ToolRegistry>& registry,
                                           const std::shared_ptr<TurnQueue>& queue,
                                           const std::vector<ToolCallPart>& calls,
                                           const ToolRoundSettings& settings,
                                           std::stop_token turn_stop);

}  // namespace ullm::detail
