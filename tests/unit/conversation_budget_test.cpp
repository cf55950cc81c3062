#include <ullm/conversation/conversation.hpp>

#include <ullm/core/error.hpp>
#include <ullm/testing/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>

#include <functional>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"

namespace conversation_budget_test {

using ullm::json;

using ullm::test::error_code_of;

namespace {

// $10 per million tokens in and out: a round of 1,000 + 1,000 tokens costs $0.02, and the
// estimate of a short request with max_tokens 100 is a little over $0.001.
std::shared_ptr<const ullm::PriceTable> ten_dollars() {
    return std::make_shared<const ullm::PriceTable>(ullm::PriceTable::parse(
        {{"models",
          {{"scripted/*", {{"input", 10}, {"output", 10}, {"lastUpdated", "2026-11-01"}}}}}}));
}

struct Priced {
    std::shared_ptr<ullm::ScriptedProvider> provider =
        std::make_shared<ullm::ScriptedProvider>("scripted");
    ullm::Client client{
        {.default_model = "scripted/model-a", .providers = {provider}, .prices = ten_dollars()}};

    void answer(const std::string& text) { provider->push_text(text, thousand()); }
    void call_tool() { provider->push_tool_call("echo", {{"value", 1}}, "", "", thousand()); }
    static ullm::Usage thousand() { return {1000, 1000, 0, 0, 0, std::nullopt}; }
};

ullm::Tool echo_tool() {
    return ullm::define_tool(
        {.name = "echo",
         .description = "Echoes its input",
         .parameters = ullm::schema::object({{"value", ullm::schema::integer()}}),
         .execute = [](const json& args, ullm::ToolContext&) -> json { return args; }});
}

std::vector<ullm::Role> roles(const std::vector<ullm::Message>& messages) {
    std::vector<ullm::Role> out;
    for (const auto& message : messages) out.push_back(message.role);
    return out;
}

using R = ullm::Role;

}  // namespace

TEST_CASE("budget throw stops before the request that could exceed the cap", "[budget]") {
    Priced p;
    auto conversation = p.client.conversation({.max_tokens = 100, .budget_usd = 0.0});
    try {
        (void)conversation.send("Hello there");
        FAIL("no error");
    } catch (const ullm::BudgetExceededError& error) {
        CHECK(error.code() == "budget_exceeded");
        CHECK(error.status() == 402);
        CHECK_FALSE(error.retryable());
        CHECK(error.remaining_usd() == 0.0);
        CHECK(error.estimated_usd() > 0.001);
        CHECK(error.message().find("conversation budget") != std::string::npos);
        CHECK(error.message().find("Hello there") == std::string::npos);
    }
    CHECK(p.provider->requests().empty());
    CHECK(conversation.history().empty());
}

TEST_CASE("the conversation cap counts persisted spend and earlier rounds of the turn",
          "[budget]") {
    Priced p;
    SECTION("across turns") {
        p.answer("one");
        p.answer("two");
        p.answer("three");
        auto conversation = p.client.conversation({.max_tokens = 100, .budget_usd = 0.03});
        (void)conversation.send("a");  // Spends 0.02; 0.01 remains.
        (void)conversation.send("b");  // The estimate (~0.0012) fits; spends 0.02 more.
        CHECK(conversation.totals().cost_usd == Approx(0.04));
        CHECK(error_code_of([&] { (void)conversation.send("c"); }) == "budget_exceeded");
        CHECK(p.provider->requests().size() == 2);
        CHECK(conversation.history().size() == 4);
    }
    SECTION("across the tool rounds of one turn") {
        p.call_tool();
        p.call_tool();
        p.answer("never reached");
        auto conversation =
            p.client.conversation({.tools = {echo_tool()}, .max_tokens = 100, .budget_usd = 0.03});
        CHECK(error_code_of([&] { (void)conversation.send("go"); }) == "budget_exceeded");
        CHECK(p.provider->requests().size() == 2);  // The guard ran before the third round.
        CHECK(conversation.history().empty());
        CHECK(conversation.totals().cost_usd == Approx(0.04));  // The spend is kept.
        CHECK(conversation.totals().rounds == 2);
    }
}

TEST_CASE("a per-send budget caps one turn, not the conversation", "[budget]") {
    Priced p;
    p.call_tool();
    p.answer("never reached");
    p.answer("second turn");
    auto conversation = p.client.conversation({.tools = {echo_tool()}, .max_tokens = 100});
    // Round 1 fits 0.015; after it spent 0.02 the next round does not.
    CHECK(error_code_of([&] { (void)conversation.send("go", {.budget_usd = 0.015}); }) ==
          "budget_exceeded");
    CHECK(p.provider->requests().size() == 1);
    // The next turn starts with its own cap again.
    p.provider->push_text("ignored");  // Keep the queue aligned: "never reached" is next.
    CHECK(conversation.send("again", {.budget_usd = 0.015}).text == "never reached");
}

TEST_CASE("each round gets the smaller of the conversation and turn remainders", "[budget]") {
    Priced p;
    const auto message_of = [&](ullm::ConversationOptions options, ullm::SendOptions send) {
        auto conversation = p.client.conversation(std::move(options));
        try {
            (void)conversation.send("go", std::move(send));
        } catch (const ullm::BudgetExceededError& error) {
            return error.message();
        }
        return std::string("no error");
    };
    CHECK(message_of({.max_tokens = 100, .budget_usd = 1.0}, {.budget_usd = 0.001})
              .find("turn budget of $0.001000") != std::string::npos);
    CHECK(message_of({.max_tokens = 100, .budget_usd = 0.001}, {.budget_usd = 1.0})
              .find("conversation budget of $0.001000") != std::string::npos);
    CHECK(p.provider->requests().empty());
}

TEST_CASE("budget warn calls back once per turn and ignores callback failures", "[budget]") {
    Priced p;
    p.call_tool();
    p.answer("done");
    std::vector<ullm::BudgetWarning> warnings;
    auto conversation =
        p.client.conversation({.system = "secret system prompt",
                               .tools = {echo_tool()},
                               .max_tokens = 100,
                               .budget_usd = 0.0,
                               .budget_action = ullm::BudgetAction::warn,
                               .on_budget_warning = [&](const ullm::BudgetWarning& warning) {
                                   warnings.push_back(warning);
                                   throw std::runtime_error("callbacks cannot stop the turn");
                               }});
    const auto reply = conversation.send("private question");
    CHECK(reply.text == "done");
    CHECK(reply.model_rounds == 2);  // Both rounds were over budget; one warning.
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].scope == "conversation");
    CHECK(warnings[0].budget_usd == 0.0);
    CHECK(warnings[0].model == "model-a");
    CHECK(warnings[0].provider == "scripted");
    CHECK(warnings[0].estimated_usd > 0);
    CHECK(warnings[0].message.find("private question") == std::string::npos);
    CHECK(warnings[0].message.find("secret") == std::string::npos);
    CHECK(conversation.history().size() == 4);
}

TEST_CASE("budget skip answers with a synthetic reply that is never stored", "[budget]") {
    Priced p;
    SECTION("before the first round") {
        auto conversation = p.client.conversation(
            {.max_tokens = 100, .budget_usd = 0.0, .budget_action = ullm::BudgetAction::skip});
        const auto reply = conversation.send("hello");
        CHECK(reply.budget_skipped);
        CHECK(reply.finish_reason == ullm::FinishReason::error);
        CHECK(reply.raw_finish_reason == "budget_exceeded");
        CHECK(reply.usage == ullm::Usage{0, 0, 0, 0, 0, 0.0});
        CHECK(reply.text.find("Budget exceeded") == 0);
        CHECK(p.provider->requests().empty());
        CHECK(roles(conversation.history()) == std::vector<R>{R::user});
        CHECK(conversation.totals().rounds == 0);
    }
    SECTION("after a tool round: the real tool messages stay") {
        p.call_tool();
        auto conversation = p.client.conversation({.tools = {echo_tool()},
                                                   .max_tokens = 100,
                                                   .budget_usd = 0.01,
                                                   .budget_action = ullm::BudgetAction::skip});
        const auto reply = conversation.send("go");
        CHECK(reply.budget_skipped);
        CHECK(reply.tool_rounds == 1);
        CHECK(roles(conversation.history()) == std::vector<R>{R::user, R::assistant, R::tool});
        CHECK(conversation.totals().cost_usd == Approx(0.02));
    }
    SECTION("a streamed skip yields one zero-cost usage event and done") {
        auto conversation = p.client.conversation(
            {.max_tokens = 100, .budget_usd = 0.0, .budget_action = ullm::BudgetAction::skip});
        auto stream = conversation.send_stream("hello");
        std::vector<ullm::StreamEvent::Type> types;
        for (const auto& event : stream) {
            types.push_back(event.type);
            if (event.type == ullm::StreamEvent::Type::usage_update) {
                CHECK(event.usage->cost_usd == 0.0);
            }
        }
        CHECK(types == std::vector<ullm::StreamEvent::Type>{ullm::StreamEvent::Type::usage_update,
                                                            ullm::StreamEvent::Type::done});
        CHECK(stream.reply()->budget_skipped);
    }
}

TEST_CASE("per-send action and max_tokens override the conversation's for one turn", "[budget]") {
    Priced p;
    p.answer("fits");
    auto conversation = p.client.conversation({.max_tokens = 100, .budget_usd = 0.0});
    const auto skipped = conversation.send("a", {.budget_action = ullm::BudgetAction::skip});
    CHECK(skipped.budget_skipped);
    CHECK(error_code_of([&] { (void)conversation.send("b"); }) == "budget_exceeded");
    (void)conversation.send("c", {.budget_action = ullm::BudgetAction::warn, .max_tokens = 800});
    REQUIRE(p.provider->requests().size() == 1);
    CHECK(p.provider->requests()[0].max_tokens == 800);
}

TEST_CASE("a budget without a price for the model is a clear error", "[budget]") {
    // The shipped table prices "scripted/*" at zero; a provider of another name has no price.
    auto provider = std::make_shared<ullm::ScriptedProvider>("homegrown");
    provider->push_text("free");
    const ullm::Client client({.default_model = "homegrown/unpriced", .providers = {provider}});
    auto budgeted = client.conversation({.budget_usd = 1.0});
    CHECK(error_code_of([&] { (void)budgeted.send("hi"); }) == "unknown_model_pricing");
    auto unbudgeted = client.conversation({});
    CHECK(unbudgeted.send("hi").text == "free");
}

namespace {

ullm::ChatRequest short_request() {
    ullm::ChatRequest request;
    request.model = "scripted/model-a";
    request.messages = {ullm::Message::user("Hello there")};
    request.max_tokens = 100;  // worst case a little over $0.001
    return request;
}

}  // namespace

TEST_CASE("a direct call within its budget is sent; over it, throw sends nothing", "[budget]") {
    Priced p;
    p.answer("Hi.");
    const auto sent = p.client.complete(short_request(), {}, {.usd = 0.01});
    CHECK(sent.text == "Hi.");
    CHECK(sent.usage.cost_usd == Approx(0.02));
    try {
        (void)p.client.complete(short_request(), {}, {.usd = 0.0005});
        FAIL("no error");
    } catch (const ullm::BudgetExceededError& error) {
        CHECK(error.code() == "budget_exceeded");
        CHECK(error.remaining_usd() == 0.0005);
        CHECK(error.estimated_usd() > 0.001);
        CHECK(error.message().find("more than its budget of $0.000500") != std::string::npos);
    }
    CHECK(error_code_of([&] { (void)p.client.stream(short_request(), {}, {.usd = 0.0005}); }) ==
          "budget_exceeded");
    CHECK(p.provider->requests().size() == 1);
}

TEST_CASE("a direct call over its budget warns once and is sent", "[budget]") {
    Priced p;
    p.answer("Sent anyway.");
    std::vector<ullm::BudgetWarning> warnings;
    const auto reply = p.client.complete(short_request(), {},
                                         {.usd = 0.0005,
                                          .action = ullm::BudgetAction::warn,
                                          .on_warning = [&](const ullm::BudgetWarning& warning) {
                                              warnings.push_back(warning);
                                              throw std::runtime_error("ignored");
                                          }});
    CHECK(reply.text == "Sent anyway.");
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].scope == "request");
    CHECK(warnings[0].budget_usd == 0.0005);
    CHECK(warnings[0].estimated_usd > 0.001);
    CHECK(warnings[0].provider == "scripted");
    CHECK(warnings[0].model == "model-a");
    CHECK(warnings[0].message.find("Hello") == std::string::npos);  // no prompt text
    CHECK(p.provider->requests().size() == 1);
}

TEST_CASE(
    "a skipped direct call returns the synthetic reply; a stream has one zero-cost usage "
    "event",
    "[budget]") {
    Priced p;
    const ullm::CallBudget skip{.usd = 0.0005, .action = ullm::BudgetAction::skip};
    const auto reply = p.client.complete(short_request(), {}, skip);
    CHECK(reply.text.rfind("Budget exceeded: the request to scripted/model-a could cost up to $",
                           0) == 0);
    CHECK(reply.finish_reason == ullm::FinishReason::error);
    CHECK(reply.raw_finish_reason == "budget_exceeded");
    CHECK(reply.usage.input_tokens == 0);
    CHECK(reply.usage.cost_usd == 0.0);

    auto stream = p.client.stream(short_request(), {}, skip);
    std::vector<ullm::StreamEvent> events;
    for (const auto& event : stream) events.push_back(event);
    REQUIRE(events.size() == 2);
    CHECK(events[0].type == ullm::StreamEvent::Type::usage_update);
    REQUIRE(events[0].usage);
    CHECK(events[0].usage->cost_usd == 0.0);
    CHECK(events[1].type == ullm::StreamEvent::Type::done);
    REQUIRE(stream.response());
    CHECK(stream.response()->text == reply.text);
    CHECK(p.provider->requests().empty());
}

TEST_CASE("a direct call's budget is checked before anything is sent", "[budget]") {
    Priced p;
    const auto code = [&](const ullm::CallBudget& budget) {
        return error_code_of([&] { (void)p.client.complete(short_request(), {}, budget); });
    };
    CHECK(code({.usd = -1}) == "invalid_budget");
    CHECK(code({.usd = std::numeric_limits<double>::quiet_NaN()}) == "invalid_budget");
    CHECK(code({.usd = 1, .action = static_cast<ullm::BudgetAction>(5)}) ==
          "invalid_budget_action");
    // A model without a price cannot be held to a budget.
    auto unpriced = std::make_shared<ullm::ScriptedProvider>("unpriced");
    const ullm::Client client({.providers = {unpriced}});
    auto request = short_request();
    request.model = "unpriced/model";
    CHECK(error_code_of([&] { (void)client.complete(request, {}, {.usd = 1}); }) ==
          "unknown_model_pricing");
    CHECK(error_code_of([&] { (void)client.stream(request, {}, {.usd = 1}); }) ==
          "unknown_model_pricing");
    CHECK(p.provider->requests().empty());
    CHECK(unpriced->requests().empty());
}

namespace {

// Collects what ClientOptions::on_usage is told; the first call throws, which must not matter.
struct UsageLog {
    std::mutex mutex;
    std::vector<ullm::UsageReport> reports;

    std::function<void(const ullm::UsageReport&)> callback() {
        return [this](const ullm::UsageReport& report) {
            std::lock_guard lock(mutex);
            reports.push_back(report);
            if (reports.size() == 1) throw std::runtime_error("ignored");
        };
    }
};

}  // namespace

TEST_CASE("on_usage hears of every finished request once, and of a skipped direct call",
          "[budget][client]") {
    UsageLog log;
    auto provider = std::make_shared<ullm::ScriptedProvider>("scripted");
    const ullm::Client client({.default_model = "scripted/model-a",
                               .providers = {provider},
                               .prices = ten_dollars(),
                               .on_usage = log.callback()});
    const ullm::Usage thousand{1000, 1000, 0, 0, 0, std::nullopt};

    provider->push_text("one", thousand);
    CHECK(client.complete(short_request()).text == "one");  // the callback's throw is dropped
    provider->push_text("two", thousand);
    auto stream = client.stream(short_request());
    for (const auto& event : stream) (void)event;
    provider->push_error(std::make_exception_ptr(
        ullm::ProviderError(ullm::ErrorCode::provider_overloaded, "Overloaded", 529, false)));
    CHECK(error_code_of([&] { (void)client.complete(short_request()); }) == "provider_overloaded");
    // A conversation's rounds are requests too: a tool round and the answer.
    provider->push_tool_call("echo", {{"value", 1}}, "", "", thousand);
    provider->push_text("three", thousand);
    auto conversation = client.conversation({.tools = {echo_tool()}});
    (void)conversation.send("go");
    // A skipped direct call: nothing sent, one zero-cost report.
    (void)client.complete(short_request(), {}, {.usd = 0.0005, .action = ullm::BudgetAction::skip});

    std::lock_guard lock(log.mutex);
    REQUIRE(log.reports.size() == 5);
    CHECK_FALSE(log.reports[0].streamed);
    CHECK(log.reports[0].usage.cost_usd == Approx(0.02));
    CHECK(log.reports[0].provider == "scripted");
    CHECK(log.reports[0].model == "model-a");
    CHECK(log.reports[1].streamed);
    CHECK(log.reports[1].usage.output_tokens == 1000);
    CHECK(log.reports[2].usage.input_tokens == 1000);  // the tool round
    CHECK(log.reports[3].usage.input_tokens == 1000);  // the answer
    for (std::size_t i = 0; i < 4; ++i) CHECK_FALSE(log.reports[i].budget_skipped);
    CHECK(log.reports[4].budget_skipped);
    CHECK(log.reports[4].usage.input_tokens == 0);
    CHECK(log.reports[4].usage.cost_usd == 0.0);
    CHECK(provider->requests().size() == 5);  // the failed one was sent, the skipped one not
}

TEST_CASE("a skipped direct stream reports one zero-cost usage", "[budget][client]") {
    UsageLog log;
    Priced p;
    const ullm::Client client({.default_model = "scripted/model-a",
                               .providers = {p.provider},
                               .prices = ten_dollars(),
                               .on_usage = log.callback()});
    auto stream =
        client.stream(short_request(), {}, {.usd = 0.0005, .action = ullm::BudgetAction::skip});
    for (const auto& event : stream) (void)event;
    std::lock_guard lock(log.mutex);
    REQUIRE(log.reports.size() == 1);
    CHECK(log.reports[0].streamed);
    CHECK(log.reports[0].budget_skipped);
    CHECK(log.reports[0].usage.cost_usd == 0.0);
    CHECK(p.provider->requests().empty());
}

}  // namespace conversation_budget_test
