#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/providers/price_table.hpp>
#include <ullm/testing/scripted_provider.hpp>

#include <limits>

#include "support/catch.hpp"
#include "support/error_code.hpp"

namespace price_table_test {

using ullm::json;

using ullm::test::error_code_of;

namespace {

json one_model(json entry) {
    return {{"models", {{"acme/model-1", std::move(entry)}}}};
}

}  // namespace

TEST_CASE("the shipped price table parses and every model has a date", "[prices]") {
    const auto& table = ullm::PriceTable::builtin();
    CHECK(table.size() >= 20);
    const auto gpt4o = table.find("openai", "gpt-4o");
    REQUIRE(gpt4o.has_value());
    CHECK(gpt4o->input == Approx(2.50));
    CHECK(gpt4o->output == Approx(10.00));
    CHECK(gpt4o->last_updated.size() == 10);
}

TEST_CASE("snapshot ids take their base model's price; other suffixes do not", "[prices]") {
    const auto& table = ullm::PriceTable::builtin();
    CHECK(table.find("openai", "gpt-4o-2024-08-06") == table.find("openai", "gpt-4o"));
    CHECK(table.find("openai", "gpt-4o-mini-2024-07-18") == table.find("openai", "gpt-4o-mini"));
    CHECK(table.find("anthropic", "claude-sonnet-4-20250514") ==
          table.find("anthropic", "claude-sonnet-4"));
    CHECK(table.find("anthropic", "claude-sonnet-4-5-20250929") ==
          table.find("anthropic", "claude-sonnet-4-5"));
    CHECK(table.find("gemini", "models/gemini-2.5-pro") == table.find("gemini", "gemini-2.5-pro"));
    CHECK_FALSE(table.find("openai", "o3-pro").has_value());
    CHECK_FALSE(table.find("anthropic", "gpt-4o").has_value());
    CHECK(table.find("ollama", "llama3.2")->input == 0);
}

TEST_CASE("cost uses one meaning of usage: cached tokens are part of input", "[prices]") {
    const ullm::ModelPrice price{3.0, 15.0, 0.30, 3.75, "2025-01-01"};
    // 10,000 prompt tokens of which 6,000 read from cache and 1,000 written; 2,000 output.
    const ullm::Usage usage{10'000, 2'000, 6'000, 1'000, 500, std::nullopt};
    const double expected = (3'000 * 3.0 + 6'000 * 0.30 + 1'000 * 3.75 + 2'000 * 15.0) / 1e6;
    CHECK(ullm::PriceTable::cost(price, usage) == Approx(expected));
    const ullm::ModelPrice no_cache{1.0, 2.0, std::nullopt, std::nullopt, "2025-01-01"};
    CHECK(ullm::PriceTable::cost(no_cache, usage) == Approx((10'000 * 1.0 + 2'000 * 2.0) / 1e6));
}

TEST_CASE("price tables are validated, and overrides apply atomically", "[prices]") {
    const json good = {{"input", 1.0}, {"output", 2.0}, {"lastUpdated", "2025-10-01"}};
    CHECK(ullm::PriceTable::parse(one_model(good)).find("acme", "model-1")->output == 2.0);
    auto with = [&](const char* key, json value) {
        json entry = good;
        entry[key] = std::move(value);
        return one_model(entry);
    };
    CHECK(error_code_of([&] { (void)ullm::PriceTable::parse(with("input", -1)); }) ==
          "invalid_price_table");
    CHECK(error_code_of([&] {
              (void)ullm::PriceTable::parse(
                  with("output", std::numeric_limits<double>::infinity()));
          }) == "invalid_price_table");
    CHECK(error_code_of([&] { (void)ullm::PriceTable::parse(with("lastUpdated", "yesterday")); }) ==
          "invalid_price_table");
    CHECK(error_code_of([&] { (void)ullm::PriceTable::parse(with("cached_read", "0.1")); }) ==
          "invalid_price_table");
    CHECK(error_code_of([&] { (void)ullm::PriceTable::parse(with("discount", 1)); }) ==
          "invalid_price_table");
    CHECK(error_code_of([&] {
              (void)ullm::PriceTable::parse({{"models", {{"no-provider", good}}}});
          }) == "invalid_price_table");

    const auto& builtin = ullm::PriceTable::builtin();
    const json mixed = {
        {"models",
         {{"openai/gpt-4o", {{"input", 1}, {"output", 1}, {"lastUpdated", "2026-01-01"}}},
          {"openai/broken", {{"input", -5}, {"output", 1}, {"lastUpdated", "2026-01-01"}}}}}};
    CHECK(error_code_of([&] { (void)builtin.with_overrides(mixed); }) == "invalid_price_table");
    CHECK(builtin.find("openai", "gpt-4o")->input == Approx(2.50));
    const auto changed = builtin.with_overrides(
        {{"models",
          {{"openai/gpt-4o", {{"input", 1}, {"output", 1}, {"lastUpdated", "2026-01-01"}}}}}});
    CHECK(changed.find("openai", "gpt-4o")->input == 1);
    CHECK(changed.size() == builtin.size());
}

TEST_CASE("unknown pricing is a clear error where a price is required", "[prices]") {
    try {
        (void)ullm::PriceTable::builtin().require("openai", "gpt-99");
        FAIL("priced");
    } catch (const ullm::ProviderCapabilityError& error) {
        CHECK(error.code() == "unknown_model_pricing");
        CHECK(error.status() == 400);
        CHECK(error.message().find("openai/gpt-99") != std::string::npos);
    }
}

TEST_CASE("responses carry their cost and requests can be estimated", "[prices][client]") {
    auto scripted = std::make_shared<ullm::ScriptedProvider>("acme");
    scripted->push_text("hi", {1'000'000, 500'000, 0, 0, 0, std::nullopt});
    auto prices = std::make_shared<ullm::PriceTable>(ullm::PriceTable::parse(
        one_model({{"input", 1.0}, {"output", 4.0}, {"lastUpdated", "2025-10-01"}})));
    const ullm::Client client({.providers = {scripted}, .prices = prices});

    ullm::ChatRequest request;
    request.model = "acme/model-1";
    request.messages = {ullm::Message::user(std::string(4000, 'x'))};
    request.max_tokens = 1000;
    const auto estimate = client.estimate(request);
    CHECK(estimate.input_tokens >= 1000);
    CHECK(estimate.input_tokens < 1100);
    CHECK(estimate.max_output_tokens == 1000);
    CHECK(estimate.max_cost_usd ==
          Approx((static_cast<double>(estimate.input_tokens) * 1.0 + 1000 * 4.0) / 1e6));

    const auto response = client.complete(request);
    REQUIRE(response.usage.cost_usd.has_value());
    CHECK(*response.usage.cost_usd == Approx(1.0 + 2.0));

    request.model = "acme/unpriced";
    CHECK(error_code_of([&] { (void)client.estimate(request); }) == "unknown_model_pricing");
}

TEST_CASE("models served through the Responses API have OpenAI's prices", "[prices]") {
    const auto& table = ullm::PriceTable::builtin();
    const auto openai = table.find("openai", "gpt-4o-mini");
    REQUIRE(openai);
    const auto responses = table.find("openai-responses", "gpt-4o-mini-2024-07-18");
    REQUIRE(responses);
    CHECK(responses->input == openai->input);
    CHECK(responses->output == openai->output);
    CHECK_FALSE(table.find("openai-responses", "no-such-model"));
}

}  // namespace price_table_test
