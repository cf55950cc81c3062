// ullm example: testing your own code with the scripted provider.
//
// `plan_picnic` is application code: it asks a model, which may call a weather tool, whether
// a picnic is a good idea. The test below runs it offline against `ullm::ScriptedProvider`: it
// queues what the model will answer, runs the code, and checks both the code's result and
// what the code sent (the system prompt, the tool result the model got back). The same works
// inside any test framework; here plain checks keep the example self-contained.

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/providers/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>
#include <ullm/tools/tool.hpp>

#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <string>

namespace {

using ullm::json;

// --- The application code under test -------------------------------------------------------

ullm::Tool weather_tool() {
    return ullm::define_tool(
        {.name = "weather",
         .description = "Tomorrow's forecast for a city",
         .parameters = ullm::schema::object({{"city", ullm::schema::string()}}, {"city"}),
         .execute = [](const json& input, ullm::ToolContext&) -> json {
             return {{"city", input["city"]}, {"forecast", "sunny"}, {"high_c", 24}};
         }});
}

std::string plan_picnic(const ullm::Client& client, const std::string& city) {
    auto conversation = client.conversation(
        {.system = "You plan picnics. Check the weather first.", .tools = {weather_tool()}});
    return conversation.send("Should we have a picnic in " + city + " tomorrow?").text;
}

// --- The test ----------------------------------------------------------------------------

int failures = 0;

void check(bool ok, const char* what) {
    fmt::print("{} {}\n", ok ? "ok  " : "FAIL", what);
    if (!ok) ++failures;
}

}  // namespace

int main() try {
    // A client whose default model is served by the scripted provider: no network, no key.
    auto model = std::make_shared<ullm::ScriptedProvider>("scripted");
    const ullm::Client client({.default_model = "scripted/test-model", .providers = {model}});

    // What the model will do, one queued answer per request: call the tool, then answer.
    model->push_tool_call("weather", {{"city", "Lyon"}});
    model->push_text("Yes: sunny and 24 °C in Lyon tomorrow.");

    const std::string answer = plan_picnic(client, "Lyon");

    check(answer == "Yes: sunny and 24 °C in Lyon tomorrow.", "the code returns the answer");
    // Every request the code made is recorded, so the test can look at what was sent.
    const auto requests = model->requests();
    check(requests.size() == 2, "two requests: the question, then the tool result");
    check(requests[0].system == "You plan picnics. Check the weather first.",
          "the system prompt is sent");
    check(requests[0].tools.size() == 1 && requests[0].tools[0].name == "weather",
          "the weather tool is offered");
    const auto results = requests[1].messages.back().tool_results();
    check(results.size() == 1 && results[0].result["forecast"] == "sunny",
          "the model got the tool's result back");
    check(model->remaining() == 0, "every queued answer was used");

    // Failures are scripted the same way: the next request throws this error.
    model->push_error(
        std::make_exception_ptr(ullm::AuthenticationError("the key was revoked", 401)));
    try {
        (void)plan_picnic(client, "Lyon");
        check(false, "a provider error reaches the caller");
    } catch (const ullm::Error& error) {
        check(error.code() == "authentication_failed", "a provider error reaches the caller");
    }

    fmt::print("{}\n", failures == 0 ? "all checks passed" : "some checks FAILED");
    return failures == 0 ? 0 : 1;
} catch (const std::exception& error) {
    std::fprintf(stderr, "testing_with_scripted_provider failed: %s\n", error.what());
    return 1;
}
