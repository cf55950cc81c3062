// ullm context management: keep long conversations inside the model's context window.
//
// A context manager decides, before every model request, which messages are sent. The stored
// history is never changed: only the request is. `SlidingWindowStrategy` sends the most recent
// messages; `SummarisationStrategy` replaces the older ones with a summary; a manager of your own
// can do anything else, and what it returns is checked before it is sent. `on_compaction` reports
// each trim. A scripted provider plays the model and records every request, so the program can
// show what each request carried.

#include <ullm/client/client.hpp>
#include <ullm/conversation/context_manager.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>
#include <ullm/testing/scripted_provider.hpp>

#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

// A message in a few words: its text, or what a summary stands for.
std::string describe(const ullm::Message& message) {
    if (message.metadata.value("summary", false)) {
        return fmt::format("<summary of {}>", message.metadata["summarised_messages"].dump());
    }
    return message.text();
}

// Messages in a few words each.
std::string describe(const std::vector<ullm::Message>& messages) {
    std::string out;
    for (const auto& message : messages) out += (out.empty() ? "" : " | ") + describe(message);
    return out;
}

// Five turns under `manager`, showing what each request carried.
void chat(const std::string& title, const std::shared_ptr<ullm::ContextManager>& manager) {
    fmt::print("== {} ==\n", title);
    auto model = std::make_shared<ullm::ScriptedProvider>();
    for (int i = 1; i <= 5; ++i) model->push_text(fmt::format("Answer {}.", i));
    const ullm::Client client({.default_model = "scripted/demo", .providers = {model}});

    auto conversation = client.conversation(
        {.system = "Be brief.",  // Sent with every request; never trimmed, never counted.
         .context_manager = manager,
         .on_compaction = [](const ullm::CompactionEvent& event) {
             fmt::print("  on_compaction: {} -> {} messages\n", event.messages_before,
                        event.messages_after);
         }});

    for (int turn = 1; turn <= 5; ++turn) {
        (void)conversation.send(fmt::format("Question {}?", turn));
        // `requests()` returns copies: keep the one to look at.
        const auto sent = model->requests().back().messages;
        fmt::print("turn {}: request carried {} messages: {}\n", turn, sent.size(), describe(sent));
        if (sent.front().metadata.value("summary", false)) {
            fmt::print("  summary sent: {}\n", ullm::json(sent.front().text()).dump());
        }
    }
    fmt::print("stored history: {} messages\n\n", conversation.history().size());
}

// A manager of your own: sends the user's questions and the latest answer only.
class QuestionsOnly : public ullm::ContextManager {
public:
    bool should_trim(std::vector<ullm::Message> messages) override { return messages.size() > 3; }

    std::vector<ullm::Message> trim(std::vector<ullm::Message> messages) override {
        std::vector<ullm::Message> kept;
        for (std::size_t i = 0; i < messages.size(); ++i) {
            if (messages[i].role == ullm::Role::user || i + 2 == messages.size()) {
                kept.push_back(std::move(messages[i]));
            }
        }
        return kept;
    }
};

// A mistake: a note as a system message. The conversation sends its own system prompt, so the
// output is refused before anything is sent.
class WithNote : public ullm::ContextManager {
public:
    bool should_trim(std::vector<ullm::Message>) override { return true; }

    std::vector<ullm::Message> trim(std::vector<ullm::Message> messages) override {
        messages.insert(messages.begin(), ullm::Message::system("Older messages were left out."));
        return messages;
    }
};

}  // namespace

int main() try {
    // At most 4 messages per request: the newest ones, always including the question being
    // answered. `max_tokens` (by a rough estimate of 4 characters per token) works the same way.
    chat("sliding window", std::make_shared<ullm::SlidingWindowStrategy>(
                               ullm::SlidingWindowOptions{.max_messages = 4}));

    // Over 4 messages, everything but the last 2 becomes one summary message. The summariser
    // is yours: a real one would ask a (cheaper) model, e.g. with `client.complete()`. The
    // strategy remembers its last summary, so later calls get that summary plus what is new.
    auto summarise = [](const std::vector<ullm::Message>& messages) {
        fmt::print("  summariser given: {}\n", describe(messages));
        std::string summary;
        for (const auto& message : messages) {
            if (message.metadata.value("summary", false)) {
                // An earlier summary: "Summary of the earlier conversation:\n<its text>".
                const auto text = message.text();
                summary = text.substr(text.find('\n') + 1);
            } else if (message.role == ullm::Role::user) {
                summary += (summary.empty() ? "The user asked: " : " ") + message.text();
            }
        }
        return summary;
    };
    auto summarisation = std::make_shared<ullm::SummarisationStrategy>(ullm::SummarisationOptions{
        .max_messages = 4, .keep_last_messages = 2, .summarizer = summarise});
    chat("summarisation", summarisation);

    chat("custom manager", std::make_shared<QuestionsOnly>());
    try {
        chat("invalid output", std::make_shared<WithNote>());
    } catch (const ullm::InvalidOptionError& error) {
        fmt::print("{} (status {})\n", error.what(), error.status());
    }
    return 0;
} catch (const std::exception& error) {
    std::fprintf(stderr, "context window example failed: %s\n", error.what());
    return 1;
}
