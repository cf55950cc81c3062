#include <ullm/conversation/conversation.hpp>

#include <ullm/core/error.hpp>
#include <ullm/testing/scripted_provider.hpp>

#include <functional>
#include <vector>

#include "support/catch.hpp"
#include "support/scripted_client.hpp"

namespace conversation_context_test {

using ullm::json;

using Scripted = ullm::test::ScriptedClient;

namespace {

// A context manager whose behaviour each test writes.
class CustomManager : public ullm::ContextManager {
public:
    std::function<bool(std::vector<ullm::Message>&)> should;
    using Trimmer = std::function<std::vector<ullm::Message>(std::vector<ullm::Message>&)>;
    Trimmer trimmer;
    bool should_trim(std::vector<ullm::Message> messages) override { return should(messages); }
    std::vector<ullm::Message> trim(std::vector<ullm::Message> messages) override {
        return trimmer(messages);
    }
};

struct ManagerError {
    int value;
};

}  // namespace

TEST_CASE("a custom context manager trims what is sent, not what is stored",
          "[conversation][context]") {
    Scripted s;
    for (int i = 0; i < 3; ++i) s.provider->push_text("reply " + std::to_string(i));
    auto manager = std::make_shared<CustomManager>();
    manager->should = [](std::vector<ullm::Message>& messages) {
        const bool longer = messages.size() > 2;
        messages.clear();  // Mutations of its copy are discarded.
        return longer;
    };
    manager->trimmer = [](std::vector<ullm::Message>& messages) {
        std::vector<ullm::Message> last{messages.back()};
        messages.front().parts.clear();  // Discarded as well.
        return last;
    };
    std::vector<ullm::CompactionEvent> compactions;
    auto conversation = s.client.conversation(
        {.context_manager = manager, .on_compaction = [&](const ullm::CompactionEvent& event) {
             compactions.push_back(event);
         }});
    (void)conversation.send("one");
    (void)conversation.send("two");
    (void)conversation.send("three");
    const auto requests = s.provider->requests();
    REQUIRE(requests.size() == 3);
    CHECK(requests[0].messages.size() == 1);  // Not trimmed: only one message.
    REQUIRE(requests[1].messages.size() == 1);
    CHECK(requests[1].messages[0].text() == "two");
    CHECK(requests[2].messages[0].text() == "three");
    REQUIRE(compactions.size() == 2);
    CHECK(compactions[0].messages_before == 3);
    CHECK(compactions[0].messages_after == 1);
    CHECK(compactions[1].messages_before == 5);
    const auto history = conversation.history();
    REQUIRE(history.size() == 6);
    CHECK(history[0].text() == "one");
}

TEST_CASE("invalid context manager output fails the turn with status 400",
          "[conversation][context]") {
    Scripted s;
    const auto fails_with_400 = [&](CustomManager::Trimmer trimmer) {
        auto manager = std::make_shared<CustomManager>();
        manager->should = [](std::vector<ullm::Message>&) { return true; };
        manager->trimmer = std::move(trimmer);
        int compactions = 0;
        auto conversation = s.client.conversation(
            {.context_manager = manager,
             .on_compaction = [&](const ullm::CompactionEvent&) { ++compactions; }});
        try {
            (void)conversation.send("hello");
        } catch (const ullm::InvalidOptionError& error) {
            CHECK(conversation.history().empty());
            CHECK(compactions == 0);  // Output is checked before anyone is told of it.
            return error.code() == "invalid_context_manager_output" && error.status() == 400;
        }
        return false;
    };
    CHECK(fails_with_400([](std::vector<ullm::Message>&) {
        return std::vector<ullm::Message>{ullm::Message::system("injected")};
    }));
    CHECK(fails_with_400([](std::vector<ullm::Message>& messages) {
        auto out = messages;
        out.insert(out.begin(), ullm::Message::tool_results({{"call_x", "t", "r", false}}));
        return out;
    }));
    CHECK(fails_with_400([](std::vector<ullm::Message>&) { return std::vector<ullm::Message>{}; }));
    CHECK(s.provider->requests().empty());
}

TEST_CASE("a context manager's own exception propagates unchanged", "[conversation][context]") {
    Scripted s;
    auto manager = std::make_shared<CustomManager>();
    manager->should = [](std::vector<ullm::Message>&) -> bool { throw ManagerError{42}; };
    auto conversation = s.client.conversation({.context_manager = manager});
    try {
        (void)conversation.send("hello");
        FAIL("no error");
    } catch (const ManagerError& error) {
        CHECK(error.value == 42);
    }
    // The failed turn released its slot.
    manager->should = [](std::vector<ullm::Message>&) { return false; };
    s.provider->push_text("fine");
    CHECK(conversation.send("again").text == "fine");
}

TEST_CASE("a sliding window bounds every request of a long conversation",
          "[conversation][context]") {
    Scripted s;
    for (int i = 0; i < 6; ++i) s.provider->push_text("reply " + std::to_string(i));
    auto conversation =
        s.client.conversation({.context_manager = std::make_shared<ullm::SlidingWindowStrategy>(
                                   ullm::SlidingWindowOptions{.max_messages = 3})});
    for (int i = 0; i < 6; ++i) (void)conversation.send("message " + std::to_string(i));
    for (const auto& request : s.provider->requests()) {
        CHECK(request.messages.size() <= 3);
        CHECK(request.messages.back().role == ullm::Role::user);
    }
    CHECK(s.provider->requests().back().messages.back().text() == "message 5");
    CHECK(conversation.history().size() == 12);
}

TEST_CASE("summarisation sends a summary plus the recent messages and keeps the transcript",
          "[conversation][context]") {
    Scripted s;
    for (int i = 0; i < 5; ++i) s.provider->push_text("reply " + std::to_string(i));
    std::vector<std::size_t> summarised;
    auto conversation = s.client.conversation(
        {.context_manager = std::make_shared<ullm::SummarisationStrategy>(
             ullm::SummarisationOptions{.max_messages = 4,
                                        .keep_last_messages = 2,
                                        .summarizer = [&](const std::vector<ullm::Message>& old) {
                                            summarised.push_back(old.size());
                                            return "They talked about " +
                                                   std::to_string(old.size()) + " things.";
                                        }})});
    for (int i = 0; i < 5; ++i) (void)conversation.send("message " + std::to_string(i));
    const auto last = s.provider->requests().back().messages;
    REQUIRE(last.size() >= 2);
    CHECK(last.front().metadata.value("summary", false));
    CHECK(last.front().text().find("They talked about") != std::string::npos);
    CHECK(last.back().text() == "message 4");
    CHECK_FALSE(summarised.empty());
    CHECK(conversation.history().size() == 10);  // The stored transcript is whole.
    for (const auto& message : conversation.history()) {
        CHECK_FALSE(message.metadata.value("summary", false));
    }
}

}  // namespace conversation_context_test
