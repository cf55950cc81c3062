// A tiny program that uses ullm the way an application would: it must compile, link (libcurl,
// SQLite and RE2 included) and run through each way of consuming the package.
#include <ullm/core/message.hpp>
#include <ullm/http/curl_transport.hpp>
#include <ullm/store/sqlite_session_store.hpp>
#include <ullm/tools/validator.hpp>
#include <ullm/version.hpp>

#include <cstdio>

int main() {
    const auto message = ullm::parse_message(ullm::message_to_json(ullm::Message::user("hi")));
    ullm::CurlTransport transport;
    const auto store = ullm::SqliteSessionStore::open(":memory:");
    const auto version = store->put("", "consumer", "{}", 0);
    // A schema pattern is compiled by RE2.
    ullm::validate_arguments(
        {{"type", "object"}, {"properties", {{"city", {{"type", "string"}, {"pattern", "^B"}}}}}},
        {{"city", "Berlin"}});
    std::printf("ullm %s: %s\n", std::string(ullm::version()).c_str(), message.text().c_str());
    return message.text() == "hi" && version == 1 ? 0 : 1;
}
