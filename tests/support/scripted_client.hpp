#pragma once

// Test helpers for conversations and dialogs: a client over a scripted provider, and a bounded
// wait for a condition another thread makes true.

#include <ullm/client/client.hpp>
#include <ullm/providers/scripted_provider.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "support/catch.hpp"

namespace ullm::test {

// A client whose default model "scripted/model-a" is served by `provider`.
struct ScriptedClient {
    std::shared_ptr<ScriptedProvider> provider = std::make_shared<ScriptedProvider>("scripted");
    Client client{{.default_model = "scripted/model-a", .providers = {provider}}};
};

// Waits (up to 10 s) until `condition` holds, then requires it.
inline void wait_until(const std::function<bool()>& condition) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!condition() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(condition());
}

}  // namespace ullm::test
