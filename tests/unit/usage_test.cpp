#include <ullm/core/error.hpp>
#include <ullm/core/usage.hpp>

#include <limits>

#include "support/catch.hpp"

namespace usage_test {

using ullm::json;

TEST_CASE("usage adds field by field and sums known costs", "[usage]") {
    ullm::Usage total;
    CHECK_FALSE(total.cost_usd.has_value());
    total += ullm::Usage{100, 20, 50, 10, 5, 0.01};
    total += ullm::Usage{10, 2, 0, 0, 0, std::nullopt};
    total += ullm::Usage{1, 1, 1, 1, 1, 0.02};
    CHECK(total.input_tokens == 111);
    CHECK(total.output_tokens == 23);
    CHECK(total.cached_read_tokens == 51);
    CHECK(total.cached_write_tokens == 11);
    CHECK(total.reasoning_tokens == 6);
    CHECK(total.total_tokens() == 134);
    REQUIRE(total.cost_usd.has_value());
    CHECK(*total.cost_usd == Approx(0.03));
}

TEST_CASE("usage counts saturate instead of overflowing", "[usage]") {
    ullm::Usage total{std::numeric_limits<std::int64_t>::max() - 1, 0, 0, 0, 0, std::nullopt};
    total += ullm::Usage{10, 0, 0, 0, 0, std::nullopt};
    CHECK(total.input_tokens == std::numeric_limits<std::int64_t>::max());
}

TEST_CASE("usage round-trips through JSON", "[usage]") {
    const ullm::Usage usage{1200, 300, 1000, 50, 120, 0.0042};
    CHECK(ullm::parse_usage(ullm::usage_to_json(usage)) == usage);
    const ullm::Usage no_cost{1, 2, 0, 0, 0, std::nullopt};
    CHECK(ullm::usage_to_json(no_cost)["cost_usd"].is_null());
    CHECK(json(no_cost).get<ullm::Usage>() == no_cost);
}

TEST_CASE("usage parsing is fail-closed", "[usage]") {
    auto path_of = [](const json& value) -> std::string {
        try {
            (void)ullm::parse_usage(value, "/totals");
        } catch (const ullm::InvalidMessageError& error) {
            return error.path();
        }
        return "accepted";
    };
    CHECK(path_of(json::array()) == "/totals");
    CHECK(path_of({{"input_tokens", -1}}) == "/totals/input_tokens");
    CHECK(path_of({{"output_tokens", 1.5}}) == "/totals/output_tokens");
    CHECK(path_of({{"reasoning_tokens", "3"}}) == "/totals/reasoning_tokens");
    CHECK(path_of({{"cost_usd", -0.5}}) == "/totals/cost_usd");
    CHECK(path_of({{"cost_usd", std::numeric_limits<double>::infinity()}}) == "/totals/cost_usd");
    CHECK(path_of({{"tokens", 1}}) == "/totals/tokens");
    CHECK(path_of({{"input_tokens", 18446744073709551615ULL}}) == "/totals/input_tokens");
    CHECK(path_of(json::object()) == "accepted");
}

}  // namespace usage_test
