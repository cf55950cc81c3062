// ullm budgets: cap what a conversation may spend, and choose what happens at the cap.
//
// Before every model request a conversation with `budget_usd` estimates the most the request
// could cost (its prompt plus `max_tokens` of output) and compares that with what the budget
// still allows. When it does not fit, `budget_action` decides: `throw` refuses the turn, `warn`
// tells a callback and sends anyway, `skip` answers with a synthetic reply instead of the
// model. The same three questions run under each action; then a cap on one turn, and on one
// direct call without a conversation. A scripted provider plays the model.

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/core/usage.hpp>
#include <ullm/providers/price_table.hpp>
#include <ullm/testing/scripted_provider.hpp>

#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <memory>

namespace {

using ullm::json;

// A budget needs a price for the model (else `unknown_model_pricing`): the shipped table, plus
// one for our model at $10 per million tokens in and out.
std::shared_ptr<const ullm::PriceTable> demo_prices() {
    return std::make_shared<const ullm::PriceTable>(ullm::PriceTable::builtin().with_overrides(
        json{{"models",
              {{"scripted/demo",
                {{"input", 10.0}, {"output", 10.0}, {"lastUpdated", "2025-11-01"}}}}}}));
}

void run_with(ullm::BudgetAction action) {
    fmt::print("== budget_action: {} ==\n", ullm::to_string(action));

    // Every answer uses 500 tokens in and 500 out: $0.01 at the price above.
    auto model = std::make_shared<ullm::ScriptedProvider>();
    const ullm::Usage usage{.input_tokens = 500, .output_tokens = 500};
    model->push_text("Lisbon.", usage);
    model->push_text("Porto.", usage);
    model->push_text("Coimbra.", usage);

    const ullm::Client client(
        {.default_model = "scripted/demo", .providers = {model}, .prices = demo_prices()});

    auto conversation = client.conversation(
        {.max_tokens = 500,  // Bounds the estimate: 500 output tokens cost at most $0.005.
         .budget_usd = 0.02,
         .budget_action = action,
         // Called at most once per turn, under `warn` only.
         .on_budget_warning = [](const ullm::BudgetWarning& warning) {
             fmt::print("  warning ({} budget): {}\n", warning.scope, warning.message);
         }});

    for (const char* question :
         {"Capital of Portugal?", "Its second city?", "And its oldest university?"}) {
        fmt::print("user> {}\n", question);
        try {
            const auto reply = conversation.send(question);
            if (reply.budget_skipped) {
                // Not the model: nothing was sent, nothing spent, no assistant message stored.
                fmt::print("  skipped: {}\n", reply.text);
            } else {
                fmt::print("assistant> {}\n", reply.text);
            }
        } catch (const ullm::BudgetExceededError& error) {
            // Thrown before the request: the turn left nothing in the history.
            fmt::print("  {} (status {}): {}\n", error.code(), error.status(), error.message());
        }
        fmt::print("  spent so far: ${:.2f} of $0.02\n", conversation.totals().cost_usd);
    }
    fmt::print("requests sent: {}, messages in history: {}\n\n", model->requests().size(),
               conversation.history().size());
}

// A cap on one turn: `SendOptions` overrides the conversation's settings for that turn only.
void per_turn() {
    fmt::print("== a cap on one turn ==\n");
    auto model = std::make_shared<ullm::ScriptedProvider>();
    model->push_text("Lisbon.", {.input_tokens = 20, .output_tokens = 100});
    const ullm::Client client(
        {.default_model = "scripted/demo", .providers = {model}, .prices = demo_prices()});
    auto conversation = client.conversation({.max_tokens = 500});  // No conversation cap.

    // 500 tokens of output could cost $0.005: more than the turn's $0.004.
    try {
        (void)conversation.send("Capital of Portugal?", {.budget_usd = 0.004});
    } catch (const ullm::BudgetExceededError& error) {
        fmt::print("  {}: {}\n", error.code(), error.message());
    }
    // With at most 100 tokens of output the same cap holds.
    const auto reply =
        conversation.send("Capital of Portugal?", {.budget_usd = 0.004, .max_tokens = 100});
    fmt::print("assistant> {}\n  the turn cost ${:.4f}\n", reply.text,
               reply.turn_usage.cost_usd.value_or(0.0));
}

// A cap on one direct call, without a conversation: the same check before the request.
void direct_call() {
    fmt::print("\n== a cap on one direct call ==\n");
    auto model = std::make_shared<ullm::ScriptedProvider>();
    model->push_text("Lisbon.", {.input_tokens = 20, .output_tokens = 100});
    const ullm::Client client(
        {.default_model = "scripted/demo", .providers = {model}, .prices = demo_prices()});
    ullm::ChatRequest request;
    request.messages = {ullm::Message::user("Capital of Portugal?")};
    request.max_tokens = 500;

    // Skipped: nothing is sent, and the reply says why.
    const auto skipped =
        client.complete(request, {}, {.usd = 0.004, .action = ullm::BudgetAction::skip});
    fmt::print("  skipped: {}\n", skipped.text);
    // Within the cap the request goes out.
    const auto sent = client.complete(request, {}, {.usd = 0.01});
    fmt::print("assistant> {}\n  requests sent: {}\n", sent.text, model->requests().size());
}

}  // namespace

int main() try {
    run_with(ullm::BudgetAction::throw_error);
    run_with(ullm::BudgetAction::warn);
    run_with(ullm::BudgetAction::skip);
    per_turn();
    direct_call();
    return 0;
} catch (const std::exception& error) {
    std::fprintf(stderr, "budgets example failed: %s\n", error.what());
    return 1;
}
