// ullm structured output: extract a typed record from text, with the schema derived from the
// C++ type, the reply checked and decoded, one repair round, and the same call streamed with
// partial values.
//
// A real program talks to api.openai.com (or Anthropic, Gemini, a compatible server). This one
// runs offline: an in-process HTTP server on 127.0.0.1 plays the Chat Completions API. Its first
// answer leaves out a field, as models sometimes do when they are not held to a schema; ullm
// finds the gap, sends the problem back, and takes the second answer.

#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/tools/reflect.hpp>

#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/test_server.hpp"

namespace invoices {

enum class Currency { EUR, GBP, USD };
ULLM_REFLECT_ENUM(Currency, EUR, GBP, USD)

struct LineItem {
    std::string description;
    int quantity = 0;
    double unit_price = 0;
};
ULLM_REFLECT(LineItem, description, quantity, unit_price)

struct Invoice {
    std::string supplier;
    std::string date;  // YYYY-MM-DD
    Currency currency = Currency::EUR;
    std::vector<LineItem> items;
    std::optional<std::string> purchase_order;
};
ULLM_REFLECT(Invoice, supplier, date, currency, items, purchase_order)

// What the model reads about the type, beside the schema.
inline ullm::TypeDescription ullm_describe(ullm::schema_tag<Invoice>) {
    return {.description = "An invoice as printed",
            .fields = {{"date", "The invoice date, YYYY-MM-DD"},
                       {"purchase_order", "The buyer's PO number, or null when there is none"}}};
}

}  // namespace invoices

namespace {

using ullm::json;
using ullm::test::ScriptedResponse;

const std::string invoice_text =
    "INVOICE - Brightwater Supplies Ltd, 3 March 2026. 2 x Desk lamp at GBP 24.50, "
    "1 x Cable tray at GBP 12.00. PO 7741.";

const std::string complete_answer =
    R"({"supplier":"Brightwater Supplies Ltd","date":"2026-03-03","currency":"GBP",)"
    R"("items":[{"description":"Desk lamp","quantity":2,"unit_price":24.5},)"
    R"({"description":"Cable tray","quantity":1,"unit_price":12.0}],"purchase_order":"7741"})";

json completion(const std::string& content) {
    return {{"id", "chatcmpl-1"},
            {"object", "chat.completion"},
            {"model", "gpt-4o-mini-2024-07-18"},
            {"choices", json::array({{{"index", 0},
                                      {"message", {{"role", "assistant"}, {"content", content}}},
                                      {"finish_reason", "stop"}}})},
            {"usage", {{"prompt_tokens", 180}, {"completion_tokens", 60}, {"total_tokens", 240}}}};
}

// The same answer as a stream of small deltas.
std::string streamed(const std::string& content) {
    std::string wire;
    for (std::size_t at = 0; at < content.size(); at += 24) {
        const json chunk = {
            {"id", "chatcmpl-2"},
            {"object", "chat.completion.chunk"},
            {"model", "gpt-4o-mini-2024-07-18"},
            {"choices", json::array({{{"index", 0},
                                      {"delta", {{"content", content.substr(at, 24)}}},
                                      {"finish_reason", nullptr}}})}};
        wire += "data: " + chunk.dump() + "\n\n";
    }
    const json end = {
        {"id", "chatcmpl-2"},
        {"object", "chat.completion.chunk"},
        {"model", "gpt-4o-mini-2024-07-18"},
        {"choices",
         json::array({{{"index", 0}, {"delta", json::object()}, {"finish_reason", "stop"}}})},
        {"usage", {{"prompt_tokens", 180}, {"completion_tokens", 60}, {"total_tokens", 240}}}};
    return wire + "data: " + end.dump() + "\n\ndata: [DONE]\n\n";
}

void print_invoice(const invoices::Invoice& invoice) {
    fmt::print("supplier: {}\ndate: {}, currency: {}, PO: {}\n", invoice.supplier, invoice.date,
               json(invoice.currency).get<std::string>(), invoice.purchase_order.value_or("none"));
    double total = 0;
    for (const auto& item : invoice.items) {
        fmt::print("  {} x {} at {:.2f}\n", item.quantity, item.description, item.unit_price);
        total += item.quantity * item.unit_price;
    }
    fmt::print("total: {:.2f}\n", total);
}

int run() {
    ullm::test::TestServer server;
    // The first answer has no currency; the second is complete.
    json first = json::parse(complete_answer);
    first.erase("currency");
    server.enqueue(ScriptedResponse::json(200, completion(first.dump()).dump()));
    server.enqueue(ScriptedResponse::json(200, completion(complete_answer).dump()));
    server.enqueue(ScriptedResponse::sse(streamed(complete_answer), 0));

    ullm::Client client(ullm::ClientOptions{
        .providers = {std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
            .api_key = "sk-example", .base_url = server.base_url() + "/v1"})}});

    ullm::ChatRequest request;
    request.model = "gpt-4o-mini";
    request.system = "Extract the invoice.";
    request.messages.push_back(ullm::Message::user(invoice_text));

    // The schema comes from the type; the reply is checked, repaired once, and decoded.
    const auto extracted =
        client.complete_object<invoices::Invoice>(request, {.name = "invoice", .max_repairs = 1});
    print_invoice(extracted.get());
    fmt::print("repairs: {}, tokens: {} in, {} out\n", extracted.repairs,
               extracted.usage.input_tokens, extracted.usage.output_tokens);

    const json sent = json::parse(server.requests().at(0).body);
    fmt::print("schema sent: {} properties, strict = {}\n",
               sent["response_format"]["json_schema"]["schema"]["properties"].size(),
               sent["response_format"]["json_schema"]["strict"].dump());
    const json repair = json::parse(server.requests().at(1).body)["messages"].back();
    fmt::print("repair asked: {}\n", repair["content"].get<std::string>());

    // Streamed: the value as far as it has arrived, then the checked object.
    auto stream = client.stream_object<invoices::Invoice>(request);
    int partials = 0;
    bool shown = false;
    while (auto event = stream.next()) {
        if (event->type != ullm::ObjectStreamEvent::Type::partial) continue;
        ++partials;
        const json& so_far = *event->partial;
        if (!shown && so_far.contains("items") && so_far["items"].size() == 1 &&
            so_far["items"][0].contains("quantity")) {
            fmt::print("partial: {}\n", so_far.dump());
            shown = true;
        }
    }
    fmt::print("streamed: {} partial values, then {} items\n", partials,
               stream.result()->get().items.size());
    return 0;
}

}  // namespace

int main() {
    try {
        return run();
    } catch (const std::exception& error) {
        std::fprintf(stderr, "structured_output: %s\n", error.what());
        return 1;
    }
}
