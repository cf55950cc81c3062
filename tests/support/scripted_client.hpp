#pragma once

// Test helpers for conversations and dialogs: a client over a scripted provider, tools and
// responses made up for a test, and a bounded wait for a condition another thread makes true.

#include <ullm/client/client.hpp>
#include <ullm/testing/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>
#include <ullm/tools/tool.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"

namespace ullm::test {

// A client whose default model "scripted/model-a" is served by `provider`.
struct ScriptedClient {
    std::shared_ptr<ScriptedProvider> provider = std::make_shared<ScriptedProvider>("scripted");
    Client client{{.default_model = "scripted/model-a", .providers = {provider}}};
};

// A tool called `name` whose callback runs `body`.
inline Tool tool_running(std::string name, ToolCallback body) {
    return define_tool({.name = std::move(name),
                        .description = "Runs a test body",
                        .parameters = schema::object(),
                        .execute = std::move(body)});
}

// A response asking for several tool calls at once.
inline ChatResponse parallel_calls(const std::vector<ToolCallPart>& calls) {
    ChatResponse response;
    response.message.role = Role::assistant;
    for (const auto& call : calls) response.message.parts.emplace_back(call);
    response.tool_calls = calls;
    response.finish_reason = FinishReason::tool_call;
    return response;
}

// Waits (up to 10 s) until `condition` holds, then requires it.
inline void wait_until(const std::function<bool()>& condition) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!condition() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(condition());
}

}  // namespace ullm::test
