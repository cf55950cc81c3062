#include <ullm/conversation/context_manager.hpp>

#include <ullm/core/error.hpp>

#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/catch.hpp"

namespace context_manager_test {

using ullm::json;
using ullm::Message;

namespace {

Message pinned(Message message) {
    message.metadata["pinned"] = true;
    return message;
}

Message calls(std::vector<std::string> ids) {
    Message message{ullm::Role::assistant, {}, json::object(), std::nullopt};
    for (auto& id : ids) {
        message.parts.push_back(ullm::ToolCallPart{std::move(id), "lookup", {{"q", "x"}}});
    }
    return message;
}

Message results(const std::vector<std::string>& ids) {
    std::vector<ullm::ToolResultPart> parts;
    for (const auto& id : ids) parts.push_back({id, "lookup", "ok", false});
    return Message::tool_results(std::move(parts));
}

// user 0, assistant 0, user 1, assistant 1, …
std::vector<Message> dialogue(std::size_t turns, const std::string& label = "") {
    std::vector<Message> out;
    for (std::size_t i = 0; i < turns; ++i) {
        out.push_back(Message::user(label + "question " + std::to_string(i)));
        out.push_back(Message::assistant(label + "answer " + std::to_string(i)));
    }
    return out;
}

std::vector<std::string> texts(const std::vector<Message>& messages) {
    std::vector<std::string> out;
    for (const auto& message : messages) {
        out.push_back(message.role == ullm::Role::tool ? "tool" : message.text());
    }
    return out;
}

std::string error_code(const std::function<void()>& action) {
    try {
        action();
    } catch (const ullm::InvalidOptionError& error) {
        CHECK(error.status() == 400);
        return error.code();
    }
    return "(no error)";
}

std::string invalid_output(const std::vector<Message>& output, std::size_t input_size = 1) {
    try {
        ullm::validate_context(output, input_size);
    } catch (const ullm::InvalidOptionError& error) {
        CHECK(error.code() == "invalid_context_manager_output");
        CHECK(error.status() == 400);
        CHECK_FALSE(error.retryable());
        return error.message();
    }
    return "(valid)";
}

bool contains(const std::string& text, std::string_view part) {
    return text.find(part) != std::string::npos;
}

struct SummariserFailed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

}  // namespace

TEST_CASE("token estimates are about four characters of JSON per token", "[context_manager]") {
    const auto short_message = Message::user("");
    CHECK(ullm::estimate_tokens(short_message) >= 1);
    const auto long_message = Message::user(std::string(4000, 'x'));
    const auto estimate = ullm::estimate_tokens(long_message);
    CHECK(estimate >= 1000);
    CHECK(estimate <= 1020);
    // Replay state is opaque provider data, not prompt text.
    auto with_replay = Message::assistant("hi");
    const auto without = ullm::estimate_tokens(with_replay);
    with_replay.replay = ullm::ReplayState{"gemini", "m", std::string(4000, 's')};
    CHECK(ullm::estimate_tokens(with_replay) == without);
}

TEST_CASE("only metadata pinned: true pins a message", "[context_manager]") {
    CHECK(ullm::is_pinned(pinned(Message::user("x"))));
    CHECK_FALSE(ullm::is_pinned(Message::user("x")));
    auto message = Message::user("x");
    message.metadata = {{"pinned", "true"}};
    CHECK_FALSE(ullm::is_pinned(message));
    message.metadata = {{"pinned", false}};
    CHECK_FALSE(ullm::is_pinned(message));
    message.metadata = nullptr;
    CHECK_FALSE(ullm::is_pinned(message));
}

TEST_CASE("a sliding window keeps the most recent messages", "[context_manager]") {
    ullm::SlidingWindowStrategy window({.max_messages = 4});
    const auto messages = dialogue(5);
    CHECK(window.should_trim(messages));
    CHECK_FALSE(window.should_trim(dialogue(2)));
    const auto kept = window.trim(messages);
    CHECK(texts(kept) ==
          std::vector<std::string>{"question 3", "answer 3", "question 4", "answer 4"});
    CHECK_NOTHROW(ullm::validate_context(kept, messages.size()));
    CHECK(window.trim(dialogue(2)) == dialogue(2));
    CHECK(window.trim({}).empty());
}

TEST_CASE("a sliding window can be bounded by estimated tokens", "[context_manager]") {
    const auto messages = dialogue(5);
    std::int64_t last_three = 0;
    for (std::size_t i = messages.size() - 3; i < messages.size(); ++i) {
        last_three += ullm::estimate_tokens(messages[i]);
    }
    ullm::SlidingWindowStrategy window({.max_tokens = last_three});
    CHECK(window.should_trim(messages));
    CHECK(texts(window.trim(messages)) ==
          std::vector<std::string>{"answer 3", "question 4", "answer 4"});

    ullm::SlidingWindowStrategy both({.max_messages = 2, .max_tokens = last_three});
    CHECK(texts(both.trim(messages)) == std::vector<std::string>{"question 4", "answer 4"});
}

TEST_CASE("a sliding window never drops pinned messages", "[context_manager]") {
    auto messages = dialogue(5);
    messages[0] = pinned(messages[0]);
    messages[3] = pinned(messages[3]);
    ullm::SlidingWindowStrategy window({.max_messages = 4});
    CHECK(texts(window.trim(messages)) ==
          std::vector<std::string>{"question 0", "answer 1", "question 4", "answer 4"});

    // Pinned messages beyond the limit are kept anyway.
    for (auto& message : messages) message = pinned(message);
    CHECK(window.trim(messages).size() == messages.size());
}

TEST_CASE("a sliding window keeps the latest user message even when it alone is too large",
          "[context_manager]") {
    auto messages = dialogue(3);
    messages.push_back(Message::user(std::string(10'000, 'q')));
    ullm::SlidingWindowStrategy window({.max_tokens = 10});
    const auto kept = window.trim(messages);
    REQUIRE(kept.size() == 1);
    CHECK(kept[0] == messages.back());

    // With no user message at all, the newest message still goes out.
    const std::vector<Message> answers = {Message::assistant(std::string(100, 'a')),
                                          Message::assistant(std::string(100, 'b'))};
    CHECK(window.trim(answers) == std::vector<Message>{answers.back()});
}

TEST_CASE("a sliding window keeps the tool rounds of the turn being answered",
          "[context_manager]") {
    auto messages = dialogue(3);
    messages.push_back(Message::user("weather in Köln and Zürich?"));
    messages.push_back(calls({"call_1", "call_2"}));
    messages.push_back(results({"call_1", "call_2"}));
    ullm::SlidingWindowStrategy window({.max_messages = 1});
    const auto kept = window.trim(messages);
    REQUIRE(kept.size() == 3);
    CHECK(kept[0].text() == "weather in Köln and Zürich?");
    CHECK(kept[2].role == ullm::Role::tool);
    CHECK_NOTHROW(ullm::validate_context(kept, messages.size()));
}

TEST_CASE("a sliding window never separates parallel tool calls from their results",
          "[context_manager]") {
    std::vector<Message> messages = {Message::user("plan"),
                                     calls({"call_1", "call_2", "call_3"}),
                                     results({"call_2", "call_1", "call_3"}),
                                     Message::assistant("done with the first"),
                                     calls({"call_4"}),
                                     results({"call_4"}),
                                     Message::assistant("done"),
                                     Message::user("next?")};
    for (std::size_t limit = 1; limit <= messages.size(); ++limit) {
        INFO("max_messages " << limit);
        ullm::SlidingWindowStrategy window({.max_messages = limit});
        const auto kept = window.trim(messages);
        CHECK_NOTHROW(ullm::validate_context(kept, messages.size()));
        REQUIRE_FALSE(kept.empty());
        CHECK(kept.front().role != ullm::Role::tool);
        CHECK(kept.back() == messages.back());
        CHECK(kept.size() <= limit + 1);  // a whole pair may be what does not fit
    }
    ullm::SlidingWindowStrategy three({.max_messages = 3});
    CHECK(texts(three.trim(messages)) == std::vector<std::string>{"done", "next?"});
    ullm::SlidingWindowStrategy four({.max_messages = 4});
    CHECK(texts(four.trim(messages)) == std::vector<std::string>{"", "tool", "done", "next?"});
}

TEST_CASE("context windows refuse invalid options", "[context_manager]") {
    CHECK(error_code([] { ullm::SlidingWindowStrategy window({}); }) == "invalid_context_window");
    CHECK(error_code([] { ullm::SlidingWindowStrategy window({.max_messages = 0}); }) ==
          "invalid_context_window");
    CHECK(error_code([] { ullm::SlidingWindowStrategy window({.max_tokens = 0}); }) ==
          "invalid_context_window");
    CHECK(error_code([] { ullm::SlidingWindowStrategy window({.max_tokens = -5}); }) ==
          "invalid_context_window");
    const auto summarizer = [](const std::vector<Message>&) { return std::string("s"); };
    CHECK(error_code([&] {
              ullm::SummarisationStrategy strategy(
                  {.max_messages = 1, .keep_last_messages = 0, .summarizer = summarizer});
          }) == "invalid_context_window");
    CHECK(error_code([&] {
              ullm::SummarisationStrategy strategy(
                  {.max_messages = 5, .keep_last_messages = 0, .summarizer = summarizer});
          }) == "invalid_context_window");
    CHECK(error_code([&] {
              ullm::SummarisationStrategy strategy(
                  {.max_messages = 5, .keep_last_messages = 5, .summarizer = summarizer});
          }) == "invalid_context_window");
    CHECK(error_code([] {
              ullm::SummarisationStrategy strategy({.max_messages = 5, .keep_last_messages = 2});
          }) == "invalid_context_window");
    CHECK(error_code([&] {
              ullm::SummarisationStrategy strategy(
                  {.max_messages = 2, .keep_last_messages = 1, .summarizer = summarizer});
          }) == "(no error)");
}

TEST_CASE("summarisation replaces older messages with a marked summary message",
          "[context_manager]") {
    std::vector<std::vector<Message>> seen;
    ullm::SummarisationStrategy strategy(
        {.max_messages = 6, .keep_last_messages = 2, .summarizer = [&](const auto& messages) {
             seen.push_back(messages);
             return std::string("they talked about questions 0 to 3");
         }});
    const auto messages = dialogue(5);
    CHECK_FALSE(strategy.should_trim(dialogue(3)));
    CHECK(strategy.trim(dialogue(3)) == dialogue(3));
    CHECK(seen.empty());
    CHECK(strategy.should_trim(messages));

    const auto out = strategy.trim(messages);
    REQUIRE(seen.size() == 1);
    CHECK(seen[0] == std::vector<Message>(messages.begin(), messages.begin() + 8));
    REQUIRE(out.size() == 3);
    CHECK(out[0].role == ullm::Role::user);
    CHECK(out[0].text() ==
          "Summary of the earlier conversation:\nthey talked about questions 0 to 3");
    CHECK(out[0].metadata == json{{"summary", true}, {"summarised_messages", 8}});
    CHECK(out[1] == messages[8]);
    CHECK(out[2] == messages[9]);
    CHECK_NOTHROW(ullm::validate_context(out, messages.size()));
}

TEST_CASE("summarisation summarises only the summary and the new messages next time",
          "[context_manager]") {
    std::vector<std::vector<Message>> seen;
    ullm::SummarisationStrategy strategy(
        {.max_messages = 6, .keep_last_messages = 2, .summarizer = [&](const auto& messages) {
             seen.push_back(messages);
             return "summary " + std::to_string(seen.size());
         }});
    auto messages = dialogue(5);
    (void)strategy.trim(messages);
    REQUIRE(seen.size() == 1);

    // The same history again (another tool round of the same turn): no new summariser call.
    auto out = strategy.trim(messages);
    CHECK(seen.size() == 1);
    CHECK(out[0].text() == "Summary of the earlier conversation:\nsummary 1");

    // Two more messages: the summariser sees the earlier summary and only what is new.
    messages.push_back(Message::user("question 5"));
    messages.push_back(Message::assistant("answer 5"));
    out = strategy.trim(messages);
    REQUIRE(seen.size() == 2);
    REQUIRE(seen[1].size() == 3);
    CHECK(seen[1][0].text() == "Summary of the earlier conversation:\nsummary 1");
    CHECK(seen[1][0].metadata["summary"] == true);
    CHECK(seen[1][1] == messages[8]);
    CHECK(seen[1][2] == messages[9]);
    CHECK(out[0].text() == "Summary of the earlier conversation:\nsummary 2");
    CHECK(out[0].metadata["summarised_messages"] == 10);
    CHECK(texts({out.begin() + 1, out.end()}) ==
          std::vector<std::string>{"question 5", "answer 5"});

    // A history that does not start with the summarised messages is summarised from scratch.
    const auto other = dialogue(5, "other ");
    (void)strategy.trim(other);
    REQUIRE(seen.size() == 3);
    CHECK(seen[2] == std::vector<Message>(other.begin(), other.begin() + 8));
}

TEST_CASE("summarisation keeps pinned messages verbatim and tool pairs whole",
          "[context_manager]") {
    std::vector<std::vector<Message>> seen;
    ullm::SummarisationStrategy strategy(
        {.max_messages = 4, .keep_last_messages = 1, .summarizer = [&](const auto& messages) {
             seen.push_back(messages);
             return std::string("earlier");
         }});
    std::vector<Message> messages = {pinned(Message::user("my account id is 42")),
                                     Message::assistant("noted"), Message::user("weather in Köln?"),
                                     calls({"call_1", "call_2"}), results({"call_1", "call_2"})};
    // The last message is a tool result: the tail grows back to the latest user message.
    auto out = strategy.trim(messages);
    REQUIRE(seen.size() == 1);
    CHECK(seen[0] == std::vector<Message>{messages[1]});
    CHECK(texts(out) == std::vector<std::string>{"Summary of the earlier conversation:\nearlier",
                                                 "my account id is 42", "weather in Köln?", "",
                                                 "tool"});
    CHECK_NOTHROW(ullm::validate_context(out, messages.size()));

    // A tail that would begin with a tool result begins with its call instead.
    messages.push_back(Message::assistant("rainy"));
    messages.push_back(Message::user("thanks"));
    messages.push_back(Message::assistant("welcome"));
    ullm::SummarisationStrategy keep_four(
        {.max_messages = 5, .keep_last_messages = 4, .summarizer = [&](const auto& input) {
             seen.push_back(input);
             return std::string("earlier");
         }});
    out = keep_four.trim(messages);
    CHECK(texts(out) == std::vector<std::string>{"Summary of the earlier conversation:\nearlier",
                                                 "my account id is 42", "", "tool", "rainy",
                                                 "thanks", "welcome"});
    CHECK_NOTHROW(ullm::validate_context(out, messages.size()));
}

TEST_CASE("a summariser's own exception propagates unchanged and leaves the cache",
          "[context_manager]") {
    int calls_made = 0;
    bool fail = false;
    std::vector<Message> last_input;
    ullm::SummarisationStrategy strategy(
        {.max_messages = 6, .keep_last_messages = 2, .summarizer = [&](const auto& messages) {
             ++calls_made;
             if (fail) throw SummariserFailed("summary model unavailable");
             last_input = messages;
             return std::string("first");
         }});
    auto messages = dialogue(5);
    (void)strategy.trim(messages);
    messages.push_back(Message::user("question 5"));
    messages.push_back(Message::assistant("answer 5"));

    fail = true;
    CHECK_THROWS_AS(strategy.trim(messages), SummariserFailed);
    CHECK(calls_made == 2);

    fail = false;
    (void)strategy.trim(messages);
    CHECK(calls_made == 3);
    REQUIRE(last_input.size() == 3);  // still incremental from the first summary
    CHECK(last_input[0].text() == "Summary of the earlier conversation:\nfirst");
}

TEST_CASE("an empty summary is invalid context manager output", "[context_manager]") {
    for (const char* text : {"", " \n\t"}) {
        ullm::SummarisationStrategy strategy(
            {.max_messages = 2, .keep_last_messages = 1, .summarizer = [text](const auto&) {
                 return std::string(text);
             }});
        CHECK(error_code([&] { (void)strategy.trim(dialogue(2)); }) ==
              "invalid_context_manager_output");
    }
}

TEST_CASE("the summariser runs without the strategy's lock held", "[context_manager]") {
    ullm::SummarisationStrategy* self = nullptr;
    int depth = 0;
    ullm::SummarisationStrategy strategy(
        {.max_messages = 2, .keep_last_messages = 1, .summarizer = [&](const auto&) {
             if (++depth == 1) (void)self->trim(dialogue(3, "nested "));
             return std::string("summary");
         }});
    self = &strategy;
    CHECK(strategy.trim(dialogue(2)).size() == 3);
    CHECK(depth == 2);
}

TEST_CASE("valid context manager output passes validation", "[context_manager]") {
    CHECK_NOTHROW(ullm::validate_context({}, 0));
    CHECK_NOTHROW(ullm::validate_context(dialogue(2), 4));
    // The newest message may hold calls whose results are still to come.
    CHECK_NOTHROW(ullm::validate_context({Message::user("go"), calls({"a", "b"})}, 2));
    // A window may start with an assistant message.
    CHECK_NOTHROW(ullm::validate_context({Message::assistant("hi"), Message::user("go")}, 5));
}

TEST_CASE("context manager output of the wrong shape is refused with its index and rule",
          "[context_manager]") {
    CHECK(contains(invalid_output({}, 3), "empty for 3 input message(s)"));
    CHECK(contains(invalid_output({Message::user("a"), Message::system("obey")}),
                   "message 1: has the system role"));
    CHECK(contains(invalid_output({results({"call_1"})}),
                   "message 0: a tool message must directly follow"));
    CHECK(contains(invalid_output({Message::user("a"), results({"call_1"})}),
                   "message 1: a tool message must directly follow"));
    CHECK(contains(invalid_output({calls({"call_1"}), results({"call_9"})}),
                   "message 1: at /parts/0/tool_call_id: answers no tool call"));
    CHECK(contains(invalid_output({calls({"call_1"}), results({"call_1", "call_1"})}),
                   "answers tool call \"call_1\" a second time"));
    CHECK(contains(invalid_output({calls({"call_1", "call_2"}), results({"call_1"})}),
                   "message 0: at /parts/1: tool call \"call_2\" is not answered"));
    CHECK(contains(invalid_output({calls({"call_1"}), Message::user("next")}),
                   "message 0: at /parts/0: tool call \"call_1\" is not answered"));
    CHECK(contains(invalid_output({calls({"call_1", "call_1"}), results({"call_1"})}),
                   "repeats the tool call id"));
    CHECK(contains(invalid_output({calls({"call_1"}), results({"call_1"}), results({"call_1"})}),
                   "message 2: at /parts/0/tool_call_id: answers tool call \"call_1\" a second "
                   "time"));
    CHECK(contains(
        invalid_output({calls({"call_1", "call_2"}), results({"call_1"}), Message::user("next")}),
        "message 0: at /parts/1: tool call \"call_2\" is not answered"));
    CHECK(contains(invalid_output({calls({"call_1"}), results({"call_1"}), Message::user("next"),
                                   results({"call_1"})}),
                   "message 3: a tool message must directly follow"));
}

TEST_CASE("context manager output must hold valid canonical messages", "[context_manager]") {
    Message empty_tool{ullm::Role::tool, {}, json::object(), std::nullopt};
    CHECK(contains(invalid_output({empty_tool}), "message 0: is not a valid canonical message"));

    Message text_in_tool = results({"c"});
    text_in_tool.parts.push_back(ullm::TextPart{"x"});
    CHECK(contains(invalid_output({calls({"c"}), text_in_tool}), "message 1: is not a valid"));

    Message no_source{ullm::Role::user, {ullm::ImagePart{}}, json::object(), std::nullopt};
    CHECK(contains(invalid_output({no_source}), "at /parts/0/url"));

    Message nan_arguments = calls({"c"});
    std::get<ullm::ToolCallPart>(nan_arguments.parts[0]).arguments["n"] =
        std::numeric_limits<double>::infinity();
    CHECK(contains(invalid_output({nan_arguments}), "at /parts/0/arguments/n"));

    CHECK(contains(invalid_output({Message::user("bad \xff text")}), "valid UTF-8"));

    Message list_metadata = Message::user("x");
    list_metadata.metadata = json::array({1});
    CHECK(contains(invalid_output({list_metadata}), "at /metadata"));
}

}  // namespace context_manager_test
