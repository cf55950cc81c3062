// ullm typed tools: arguments decoded into a C++ struct, checked strictly, and a model that
// learns from the error it is sent.
//
// `book_table` takes a `Booking`. Before the callback runs, the model's arguments are checked
// against the tool's JSON schema, then decoded with nlohmann's `from_json`, which adds a rule
// of its own. Each failure goes back to the model as the tool's error result, in words it can
// act on, and the model calls again. A second conversation shows the tool loop's other answers:
// a tool's own error text, an unknown tool, a call that times out, and a tool that ends the turn.
// A scripted provider plays the model, so the program needs no network and no API key.

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/testing/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>
#include <ullm/tools/tool.hpp>

#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <thread>

namespace {

using ullm::json;
namespace schema = ullm::schema;

// The arguments as the program uses them.
struct Booking {
    std::string restaurant;
    int party_size = 0;
    std::string time;  // "HH:MM", 24-hour clock.
};

// Decoding may enforce what a schema cannot say. A `ToolArgumentError` names the argument, and
// its message is what the model reads.
void from_json(const json& in, Booking& out) {
    in.at("restaurant").get_to(out.restaurant);
    in.at("party_size").get_to(out.party_size);
    in.at("time").get_to(out.time);
    if (out.time < "12:00" || out.time > "21:30") {
        throw ullm::ToolArgumentError("/time", "must be between 12:00 and 21:30 (opening hours)");
    }
}

// The tool loop's other answers. Each call below is a round of its own.
void other_answers() {
    const auto find_order = ullm::define_tool(
        {.name = "find_order",
         .description = "Find an order by its number",
         .parameters = schema::object({{"number", schema::integer()}}, {"number"}),
         .execute = [](const json& args, ullm::ToolContext&) -> json {
             // The model reads exactly this text; "not_found" is the outcome's code.
             throw ullm::ToolResultError(
                 fmt::format("There is no order {}.", args["number"].dump()), "not_found");
         }});
    const auto check_stock = ullm::define_tool(
        {.name = "check_stock",
         .description = "Check the stock of a product",
         .parameters = schema::object({{"product", schema::string()}}, {"product"}),
         .execute = [](const json&, ullm::ToolContext& context) -> json {
             // Slow work that polls its stop token, which a timeout signals.
             while (!context.stop_requested())
                 std::this_thread::sleep_for(std::chrono::milliseconds(5));
             return "stopped";
         }});
    const auto give_answer = ullm::define_tool(
        {.name = "give_answer",
         .description = "Give the user the final answer",
         .parameters = schema::object({{"text", schema::string("The answer")}}, {"text"}),
         .execute = [](const json& args, ullm::ToolContext& context) -> json {
             // This call is the answer: the turn ends after this round.
             context.end_turn = true;
             return args["text"];
         }});

    auto model = std::make_shared<ullm::ScriptedProvider>();
    model->push_tool_call("find_order", {{"number", 42}});
    model->push_tool_call("cancel_order", {{"number", 42}});
    model->push_tool_call("check_stock", {{"product", "tea"}});
    model->push_tool_call("give_answer", {{"text", "Order 42 does not exist."}});
    const ullm::Client client({.default_model = "scripted/demo", .providers = {model}});
    auto conversation =
        client.conversation({.tools = {find_order, check_stock, give_answer},
                             .tool_execution_timeout = std::chrono::milliseconds(500)});

    const auto reply = conversation.send("Where is order 42?");
    fmt::print("\nuser> Where is order 42?\n");
    for (const auto& message : conversation.history()) {
        for (const auto& result : message.tool_results()) {
            fmt::print("  {} -> {}{}\n", result.name, result.is_error ? "error: " : "",
                       result.result.is_string() ? result.result.get<std::string>()
                                                 : result.result.dump());
        }
    }
    fmt::print("tool rounds: {}, model rounds: {}, history ends with a {} message\n",
               reply.tool_rounds, reply.model_rounds,
               ullm::to_string(conversation.history().back().role));
}

}  // namespace

int main() try {
    int bookings_made = 0;
    const auto book_table = ullm::define_tool<Booking>(
        {.name = "book_table",
         .description = "Book a table at a restaurant",
         .parameters = schema::object(
             {{"restaurant", schema::string("The restaurant's name", {.min_length = 1})},
              {"party_size", schema::integer("How many people", {.minimum = 1, .maximum = 12})},
              {"time",
               schema::string("24-hour time, HH:MM", {.pattern = "^[0-2][0-9]:[0-5][0-9]$"})}},
             {"restaurant", "party_size", "time"}),
         // Runs only with arguments that passed the schema and decoded into a Booking.
         .execute = [&](const Booking& booking, ullm::ToolContext&) -> json {
             ++bookings_made;
             return {{"confirmed", true},
                     {"reference", fmt::format("{:.3}-{}", booking.restaurant, booking.party_size)},
                     {"time", booking.time}};
         }});

    // The model: a wrong type first, then a time outside opening hours, then a valid call.
    auto model = std::make_shared<ullm::ScriptedProvider>();
    model->push_tool_call("book_table",
                          {{"restaurant", "Luigi's"}, {"party_size", "4"}, {"time", "19:30"}},
                          "Booking that for you.");
    model->push_tool_call("book_table",
                          {{"restaurant", "Luigi's"}, {"party_size", 4}, {"time", "22:00"}});
    model->push_tool_call("book_table",
                          {{"restaurant", "Luigi's"}, {"party_size", 4}, {"time", "21:30"}});
    model->push_text("Done: a table for 4 at Luigi's at 21:30, reference Lui-4.");

    const ullm::Client client({.default_model = "scripted/demo", .providers = {model}});
    // Strict validation is the default (`tool_validation`); each failed call is a tool round.
    auto conversation = client.conversation({.tools = {book_table}, .max_tool_rounds = 4});

    const auto reply = conversation.send("Book Luigi's for four tonight, as late as they allow.");

    // The transcript: every call, what the tool answered, and the final answer.
    for (const auto& message : conversation.history()) {
        if (message.role == ullm::Role::user) fmt::print("user> {}\n", message.text());
        if (message.role == ullm::Role::assistant && !message.text().empty()) {
            fmt::print("assistant> {}\n", message.text());
        }
        for (const auto& call : message.tool_calls()) {
            fmt::print("  model calls {}({})\n", call.name, call.arguments.dump());
        }
        for (const auto& result : message.tool_results()) {
            if (result.is_error) {
                fmt::print("    -> error: {}\n", result.result.get<std::string>());
            } else {
                fmt::print("    -> {}\n", result.result.dump());
            }
        }
    }
    // The model saw each error: the request after a failed call ends with its error result.
    const auto retry = model->requests().at(1).messages.back();
    fmt::print("request 2 ends with a {} message, is_error = {}\n", ullm::to_string(retry.role),
               retry.tool_results().at(0).is_error);
    fmt::print("tool rounds: {}, model rounds: {}, bookings made: {}\n", reply.tool_rounds,
               reply.model_rounds, bookings_made);

    other_answers();
    return 0;
} catch (const std::exception& error) {
    std::fprintf(stderr, "typed tools example failed: %s\n", error.what());
    return 1;
}
