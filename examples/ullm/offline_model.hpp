#pragma once

// The model of `ullm chat --offline`: a scripted provider that answers from simple rules, so a
// newcomer sees the whole loop (streaming, a tool call and its result, tokens) with no
// network and no key. Ask it the time, a sum, to read a file, or for a story.

#include <ullm/testing/scripted_provider.hpp>

#include <chrono>
#include <memory>

namespace ullm_cli {

// The offline model, called "offline": it streams word by word, `word_delay` apart.
std::shared_ptr<ullm::ScriptedProvider> offline_model(
    std::chrono::milliseconds word_delay = std::chrono::milliseconds(40));

}  // namespace ullm_cli
