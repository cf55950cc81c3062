#include <ullm/detail/redact.hpp>

#include "support/catch.hpp"

namespace redact_test {

TEST_CASE("credential headers and listed secrets are redacted from text", "[redact]") {
    ullm::HttpRequest request;
    request.headers = {{"Authorization", "Bearer sk-live-1234567890"},
                       {"x-goog-api-key", "AIzaSecretKey"},
                       {"Content-Type", "application/json"}};
    request.secrets = {"extra-secret-value"};
    const auto secrets = ullm::detail::request_secrets(request);
    const std::string text =
        "failed: Bearer sk-live-1234567890 / sk-live-1234567890 / AIzaSecretKey / "
        "extra-secret-value / application/json";
    const auto clean = ullm::detail::redact(text, secrets);
    CHECK(clean.find("sk-live") == std::string::npos);
    CHECK(clean.find("AIzaSecretKey") == std::string::npos);
    CHECK(clean.find("extra-secret-value") == std::string::npos);
    CHECK(clean.find("application/json") != std::string::npos);
}

TEST_CASE("key query parameters in URLs are redacted", "[redact]") {
    const auto clean = ullm::detail::redact(
        "could not reach https://x.test/v1?alt=sse&key=AIzaXYZ and ?api_key=abc123 monkey=ok", {});
    CHECK(clean ==
          "could not reach https://x.test/v1?alt=sse&key=[redacted] and ?api_key=[redacted] "
          "monkey=ok");
}

}  // namespace redact_test
