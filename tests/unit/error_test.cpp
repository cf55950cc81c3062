#include <ullm/core/error.hpp>

#include "support/catch.hpp"

namespace error_test {

TEST_CASE("errors carry a stable code, status and a prefixed message", "[error]") {
    const ullm::RateLimitError error("slow down", {"openai", "gpt-4o", "req_1"},
                                     std::chrono::milliseconds(1500));
    CHECK(error.code() == "rate_limited");
    CHECK(error.status() == 429);
    CHECK(error.retryable());
    CHECK(std::string(error.what()) == "[ullm.rate_limited] slow down");
    CHECK(error.message() == "slow down");
    CHECK(error.provider() == "openai");
    CHECK(error.model() == "gpt-4o");
    CHECK(error.request_id() == "req_1");
    REQUIRE(error.retry_after().has_value());
    CHECK(error.retry_after()->count() == 1500);
}

TEST_CASE("invalid message errors name the path and the constraint", "[error]") {
    const ullm::InvalidMessageError error("/parts/0/type", "must be one of text, image");
    CHECK(error.code() == "invalid_message");
    CHECK(error.status() == 400);
    CHECK_FALSE(error.retryable());
    CHECK(error.path() == "/parts/0/type");
    CHECK(std::string(error.what()) ==
          "[ullm.invalid_message] at /parts/0/type: must be one of text, image");
}

}  // namespace error_test
