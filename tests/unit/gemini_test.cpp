#include <ullm/core/error.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/tools/schema.hpp>

#include <algorithm>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/fixtures.hpp"

namespace gemini_test {

using ullm::json;
namespace fs = std::filesystem;

using ullm::test::error_code_of;

namespace {

const std::string model = "gemini-3-pro-preview";

ullm::ChatRequest request_for(std::string name = model) {
    ullm::ChatRequest request;
    request.model = std::move(name);
    return request;
}

ullm::HttpResponse body_response(std::string body, int status = 200) {
    ullm::HttpResponse response;
    response.status = status;
    response.body = std::move(body);
    return response;
}

fs::path fixture(const std::string& relative) {
    return ullm::test::fixtures_dir() / "gemini" / relative;
}

std::string wire_of(const fs::path& path) {
    std::string text = ullm::test::read_file(path);
    if (ullm::test::looks_like_sse_wire(text)) return text;
    return ullm::test::frame_chunks_as_sse(text, ullm::test::Framing::data_only);
}

std::string sse_of(const std::vector<json>& chunks) {
    std::string wire;
    for (const auto& chunk : chunks) wire += "data: " + chunk.dump() + "\r\n\r\n";
    return wire;
}

std::vector<ullm::StreamEvent> stream_events(const ullm::Provider& provider, std::string_view wire,
                                             const ullm::ChatRequest& request = request_for(),
                                             std::size_t chunk = 3) {
    auto decoder = provider.stream_decoder(request);
    std::vector<ullm::StreamEvent> events;
    for (std::size_t at = 0; at < wire.size(); at += chunk)
        decoder->feed(wire.substr(at, chunk), events);
    decoder->finish(events);
    return events;
}

ullm::ChatResponse decode_stream(const ullm::Provider& provider, std::string_view wire,
                                 const ullm::ChatRequest& request = request_for()) {
    const auto events = stream_events(provider, wire, request);
    REQUIRE(std::count_if(events.begin(), events.end(), [](const auto& event) {
                return event.type == ullm::StreamEvent::Type::done;
            }) == 1);
    REQUIRE(events.back().type == ullm::StreamEvent::Type::done);
    return *events.back().response;
}

ullm::ChatResponse decode_body(const ullm::Provider& provider, const json& body,
                               const ullm::ChatRequest& request = request_for()) {
    return provider.decode(body_response(body.dump()), request);
}

json text_response(const json& parts, const std::string& finish = "STOP",
                   std::string id = "resp-1") {
    json candidate = {{"content", {{"role", "model"}, {"parts", parts}}}, {"index", 0}};
    if (!finish.empty()) candidate["finishReason"] = finish;
    return {{"candidates", json::array({candidate})},
            {"usageMetadata",
             {{"promptTokenCount", 10}, {"candidatesTokenCount", 5}, {"totalTokenCount", 15}}},
            {"modelVersion", model},
            {"responseId", std::move(id)}};
}

// A stream chunk: like a body, without a finishReason unless given.
json stream_chunk(const json& parts, const std::string& finish = "") {
    return text_response(parts, finish);
}

// The model turns of an encoded body.
std::vector<json> turns_of(const json& body, const std::string& role) {
    std::vector<json> out;
    for (const auto& content : body.at("contents"))
        if (content.at("role") == role) out.push_back(content);
    return out;
}

bool contains_text(const json& value, std::string_view needle) {
    return value.dump().find(needle) != std::string::npos;
}

ullm::Message tool_results_for(const std::vector<ullm::ToolCallPart>& calls) {
    std::vector<ullm::ToolResultPart> results;
    results.reserve(calls.size());
    for (const auto& call : calls)
        results.push_back({call.id, call.name, json{{"ok", call.name}}, false});
    return ullm::Message::tool_results(std::move(results));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The HTTP request.

TEST_CASE("gemini: requests go to generateContent with the key only in its header", "[gemini]") {
    const ullm::GeminiProvider provider({.api_key = "AIzaSyTESTKEY0123456789",
                                         .base_url = "https://example.test/v1beta/",
                                         .extra_headers = {{"X-Extra", "1"}}});
    auto request = request_for();
    request.messages = {ullm::Message::user("Hi")};

    const auto http = provider.encode(request, false);
    CHECK(http.method == "POST");
    CHECK(http.url == "https://example.test/v1beta/models/gemini-3-pro-preview:generateContent");
    CHECK(ullm::find_header(http.headers, "x-goog-api-key") == "AIzaSyTESTKEY0123456789");
    CHECK(ullm::find_header(http.headers, "Content-Type") == "application/json");
    CHECK(ullm::find_header(http.headers, "X-Extra") == "1");
    CHECK_FALSE(ullm::find_header(http.headers, "Authorization"));
    CHECK(std::find(http.secrets.begin(), http.secrets.end(), "AIzaSyTESTKEY0123456789") !=
          http.secrets.end());
    CHECK(http.url.find("AIza") == std::string::npos);
    CHECK(http.url.find("key=") == std::string::npos);
    CHECK(http.body.find("AIza") == std::string::npos);

    const auto streamed = provider.encode(request, true);
    CHECK(streamed.url ==
          "https://example.test/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse");
    CHECK(ullm::find_header(streamed.headers, "Accept") == "text/event-stream");

    request.model = "models/gemini-2.5-flash";
    CHECK(provider.encode(request, false).url ==
          "https://example.test/v1beta/models/gemini-2.5-flash:generateContent");
    request.model = "tunedModels/my-model-1";
    CHECK(provider.encode(request, false).url ==
          "https://example.test/v1beta/tunedModels/my-model-1:generateContent");

    const ullm::GeminiProvider keyless;
    CHECK_FALSE(ullm::find_header(keyless.encode(request, false).headers, "x-goog-api-key"));
    CHECK(keyless.options().base_url == "https://generativelanguage.googleapis.com/v1beta");
    CHECK(keyless.name() == "gemini");
}

TEST_CASE("gemini: the body has Gemini's documented shape", "[gemini]") {
    const ullm::GeminiProvider provider;
    auto request = request_for();
    request.system = "Be brief.";
    request.messages = {ullm::Message::system("Answer in French."), ullm::Message::user("Hello"),
                        ullm::Message::assistant("Bonjour"), ullm::Message::user("Weather?")};
    request.max_tokens = 256;
    request.temperature = 0.5;
    request.top_p = 0.9;
    request.stop = {"END", "STOP"};
    request.tools = {
        {"lookup_weather", "Look up weather by city name",
         ullm::schema::object({{"city", ullm::schema::string("The city")}}, {"city"})}};
    request.tool_choice = ullm::ToolChoice::automatic();

    const json body = provider.encode_body(request, false);
    CHECK(body.at("systemInstruction") ==
          json({{"parts", {{{"text", "Be brief."}}, {{"text", "Answer in French."}}}}}));
    CHECK(body.at("contents") ==
          json::array({{{"role", "user"}, {"parts", {{{"text", "Hello"}}}}},
                       {{"role", "model"}, {"parts", {{{"text", "Bonjour"}}}}},
                       {{"role", "user"}, {"parts", {{{"text", "Weather?"}}}}}}));
    CHECK(body.at("generationConfig") == json({{"maxOutputTokens", 256},
                                               {"temperature", 0.5},
                                               {"topP", 0.9},
                                               {"stopSequences", {"END", "STOP"}}}));
    const json& declaration = body.at("tools").at(0).at("functionDeclarations").at(0);
    CHECK(declaration.at("name") == "lookup_weather");
    CHECK(declaration.at("description") == "Look up weather by city name");
    CHECK(declaration.at("parametersJsonSchema") == request.tools[0].parameters);
    CHECK_FALSE(declaration.contains("parameters"));
    CHECK(body.at("toolConfig") == json({{"functionCallingConfig", {{"mode", "AUTO"}}}}));
    CHECK_FALSE(body.contains("model"));
    CHECK(provider.encode_body(request, true) == body);

    SECTION("tool choice modes") {
        request.tool_choice = ullm::ToolChoice::none();
        CHECK(provider.encode_body(request, false)["toolConfig"]["functionCallingConfig"] ==
              json({{"mode", "NONE"}}));
        request.tool_choice = ullm::ToolChoice::required();
        CHECK(provider.encode_body(request, false)["toolConfig"]["functionCallingConfig"] ==
              json({{"mode", "ANY"}}));
        request.tool_choice = ullm::ToolChoice::tool("lookup_weather");
        CHECK(provider.encode_body(request, false)["toolConfig"]["functionCallingConfig"] ==
              json({{"mode", "ANY"}, {"allowedFunctionNames", {"lookup_weather"}}}));
        request.tool_choice.reset();
        CHECK_FALSE(provider.encode_body(request, false).contains("toolConfig"));
    }
    SECTION("structured output") {
        request.response_format = ullm::ResponseFormat{
            "answer", ullm::schema::object({{"answer", ullm::schema::string()}}, {"answer"}), true};
        const json config = provider.encode_body(request, false).at("generationConfig");
        CHECK(config.at("responseMimeType") == "application/json");
        CHECK(config.at("responseJsonSchema") == request.response_format->schema);
        CHECK_FALSE(config.contains("responseSchema"));
    }
    SECTION("a request without options sends no generationConfig") {
        auto plain = request_for();
        plain.messages = {ullm::Message::user("Hi")};
        const json minimal = provider.encode_body(plain, false);
        CHECK(minimal == json({{"contents", {{{"role", "user"}, {"parts", {{{"text", "Hi"}}}}}}}}));
    }
}

TEST_CASE("gemini: before 2.5, the schema goes out as responseSchema in the OpenAPI subset",
          "[gemini][structured]") {
    const ullm::GeminiProvider provider;
    auto request = request_for("gemini-2.0-flash");
    request.messages = {ullm::Message::user("Describe the kettle")};
    const json schema = {
        {"type", "object"},
        {"$defs", {{"colour", {{"type", "string"}, {"enum", {"red", "blue"}}}}}},
        {"properties",
         {{"name", {{"type", "string"}, {"maxLength", 40}, {"description", "The name"}}},
          {"stars", {{"type", "integer"}, {"minimum", 1}, {"maximum", 5}}},
          {"colour", {{"$ref", "#/$defs/colour"}}},
          {"note", {{"anyOf", json::array({{{"type", "string"}}, {{"type", "null"}}})}}},
          {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}, {"maxItems", 3}}},
          {"weight", {{"type", json::array({"number", "null"})}, {"format", "double"}}},
          {"size", {{"type", "integer"}, {"enum", json::array({1, 2, 3})}}}}},
        {"required", json::array({"name", "stars"})},
        {"additionalProperties", false}};
    request.response_format = ullm::ResponseFormat{"kettle", schema, true};
    const json config = provider.encode_body(request, false).at("generationConfig");
    CHECK(config.at("responseMimeType") == "application/json");
    CHECK_FALSE(config.contains("responseJsonSchema"));
    const json sent = config.at("responseSchema");
    CHECK(sent.at("type") == "OBJECT");
    CHECK_FALSE(sent.contains("additionalProperties"));
    CHECK_FALSE(sent.contains("$defs"));
    CHECK(sent.at("required") == json::array({"name", "stars"}));
    CHECK(sent.at("propertyOrdering").size() == 7);
    const json& properties = sent.at("properties");
    CHECK(properties.at("name") ==
          json{{"type", "STRING"}, {"description", R"(The name ({"maxLength":40}))"}});
    CHECK(properties.at("stars") == json{{"type", "INTEGER"}, {"minimum", 1}, {"maximum", 5}});
    CHECK(properties.at("colour") == json{{"type", "STRING"}, {"enum", {"red", "blue"}}});
    CHECK(properties.at("note") == json{{"type", "STRING"}, {"nullable", true}});
    // The branch's description, bounds included, follows the schema's own.
    request.response_format->schema["properties"]["note"] = {
        {"description", "A note"},
        {"anyOf", json::array({{{"type", "string"}, {"maxLength", 20}}, {{"type", "null"}}})}};
    CHECK(provider.encode_body(request, false)
              .at("generationConfig")
              .at("responseSchema")
              .at("properties")
              .at("note")
              .at("description") == R"(A note ({"maxLength":20}))");
    CHECK(properties.at("tags") ==
          json{{"type", "ARRAY"}, {"items", {{"type", "STRING"}}}, {"maxItems", 3}});
    CHECK(properties.at("weight") ==
          json{{"type", "NUMBER"}, {"nullable", true}, {"format", "double"}});
    // Integer enums are not in the subset: said in words, still checked against the reply.
    CHECK(properties.at("size") ==
          json{{"type", "INTEGER"}, {"description", R"(({"enum":[1,2,3]}))"}});

    // 1.5 likewise; 2.5 and ids it does not know take JSON Schema.
    request.model = "gemini-1.5-pro";
    CHECK(provider.encode_body(request, false).at("generationConfig").contains("responseSchema"));
    for (const char* id : {"gemini-2.5-flash", "models/gemini-3-pro-preview", "my-tuned"}) {
        request.model = id;
        CHECK(provider.encode_body(request, false)
                  .at("generationConfig")
                  .contains("responseJsonSchema"));
    }
}

TEST_CASE("gemini: what responseSchema cannot say is refused before sending, by keyword",
          "[gemini][structured]") {
    const ullm::GeminiProvider provider;
    const auto code = [&](const json& schema) {
        auto request = request_for("gemini-2.0-flash");
        request.messages = {ullm::Message::user("Hi")};
        request.response_format = ullm::ResponseFormat{"answer", schema, false};
        return error_code_of([&] { (void)provider.encode_body(request, false); });
    };
    const json map = {
        {"type", "object"},
        {"properties",
         {{"scores", {{"type", "object"}, {"additionalProperties", {{"type", "integer"}}}}}}}};
    CHECK(code(map) == "unsupported_schema_keyword");
    CHECK(code({{"type", "object"}, {"properties", {{"any", json::object()}}}}) ==
          "unsupported_schema_keyword");
    CHECK(code({{"type", "object"}}) == "unsupported_schema_keyword");  // no properties
    CHECK(code({{"type", "object"},
                {"properties", {{"a", {{"type", "string"}}}}},
                {"required", json::array({"a", "b"})}}) == "unsupported_schema_keyword");
    CHECK(code({{"type", 5}}) == "unsupported_schema_keyword");
    CHECK(code({{"type", "object"}, {"properties", {{"a", {{"anyOf", "x"}}}}}}) ==
          "unsupported_schema_keyword");
    CHECK(code({{"type", json::array({"string", "integer"})}}) == "unsupported_schema_keyword");
    CHECK(code({{"type", "object"}, {"properties", {{"a", {{"not", {{"type", "string"}}}}}}}}) ==
          "unsupported_schema_keyword");
    const json recursive = {
        {"$defs",
         {{"node", {{"type", "object"}, {"properties", {{"next", {{"$ref", "#/$defs/node"}}}}}}}}},
        {"$ref", "#/$defs/node"}};
    CHECK(code(recursive) == "unsupported_schema_keyword");
    // The message names the keyword and where it is.
    auto request = request_for("gemini-2.0-flash");
    request.messages = {ullm::Message::user("Hi")};
    request.response_format = ullm::ResponseFormat{"answer", map, false};
    try {
        (void)provider.encode_body(request, false);
        FAIL("a map must be refused");
    } catch (const ullm::ProviderCapabilityError& error) {
        CHECK(error.message().find("`additionalProperties` at #/properties/scores") !=
              std::string::npos);
    }
}

TEST_CASE("gemini: images and documents become inlineData or fileData", "[gemini]") {
    const ullm::GeminiProvider provider;
    auto request = request_for();
    ullm::Message user;
    user.role = ullm::Role::user;
    user.parts = {ullm::TextPart{"Describe"},
                  ullm::ImagePart{"", "iVBORw0KGgo=", "image/png"},
                  ullm::ImagePart{"data:image/jpeg;base64,/9j/4AAQ", "", ""},
                  ullm::ImagePart{"https://example.test/cat.JPG?size=2", "", ""},
                  ullm::DocumentPart{"", "JVBERi0=", "application/pdf", "report.pdf"},
                  ullm::DocumentPart{"https://generativelanguage.googleapis.com/v1beta/files/abc",
                                     "", "application/pdf", ""},
                  ullm::DocumentPart{"gs://bucket/notes", "", "", ""}};
    request.messages = {user};
    const json parts = provider.encode_body(request, false).at("contents").at(0).at("parts");
    CHECK(parts ==
          json::array(
              {{{"text", "Describe"}},
               {{"inlineData", {{"mimeType", "image/png"}, {"data", "iVBORw0KGgo="}}}},
               {{"inlineData", {{"mimeType", "image/jpeg"}, {"data", "/9j/4AAQ"}}}},
               {{"fileData",
                 {{"fileUri", "https://example.test/cat.JPG?size=2"}, {"mimeType", "image/jpeg"}}}},
               {{"inlineData", {{"mimeType", "application/pdf"}, {"data", "JVBERi0="}}}},
               {{"fileData",
                 {{"fileUri", "https://generativelanguage.googleapis.com/v1beta/files/abc"},
                  {"mimeType", "application/pdf"}}}},
               {{"fileData", {{"fileUri", "gs://bucket/notes"}}}}}));
    CHECK(provider.capabilities(model).documents);
    CHECK(provider.capabilities(model).images);
}

TEST_CASE("gemini: tool schemas are sent in a form Gemini accepts", "[gemini]") {
    const ullm::GeminiProvider provider;
    auto request = request_for();
    request.messages = {ullm::Message::user("Go")};
    const json address = ullm::schema::object({{"street", ullm::schema::string()}}, {"street"});
    request.tools = {
        {"ship", "Ship a parcel",
         ullm::schema::with_defs(
             ullm::schema::object(
                 {{"to", json{{"$ref", "#/$defs/address"}, {"description", "Where to"}}},
                  {"from", ullm::schema::ref("address")},
                  {"speed", ullm::schema::constant("express")},
                  {"count", ullm::schema::constant(2)},
                  {"fragile", ullm::schema::constant(true)},
                  {"note", ullm::schema::nullable(ullm::schema::string())}},
                 {"to", "speed"}),
             {{"address", address}})},
        {"legacy", "Draft-07 definitions",
         json{{"type", "object"},
              {"properties", {{"item", {{"$ref", "#/definitions/item"}}}}},
              {"definitions", {{"item", {{"type", "string"}}}}}}},
        {"ping", "No arguments", ullm::schema::object()},
        {"bare", "No schema at all", json{{"type", "object"}}},
        {"tags", "Free-form string arguments",
         json{{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}},
    };
    const json declarations =
        provider.encode_body(request, false).at("tools").at(0).at("functionDeclarations");
    REQUIRE(declarations.size() == 5);

    const json& ship = declarations[0].at("parametersJsonSchema");
    // $ref may have only `$` siblings in Gemini's dialect: the description moves beside a
    // one-branch anyOf, which means the same thing.
    CHECK(ship.at("properties").at("to") ==
          json({{"anyOf", {{{"$ref", "#/$defs/address"}}}}, {"description", "Where to"}}));
    CHECK(ship.at("properties").at("from") == json({{"$ref", "#/$defs/address"}}));
    CHECK(ship.at("properties").at("speed") == json({{"enum", {"express"}}}));
    CHECK(ship.at("properties").at("count") == json({{"enum", {2}}}));
    CHECK(ship.at("properties").at("fragile") == json({{"const", true}}));
    CHECK(ship.at("properties").at("note") == request.tools[0].parameters["properties"]["note"]);
    CHECK(ship.at("$defs").at("address") == address);
    CHECK(ship.at("additionalProperties") == false);
    CHECK(ship.at("required") == json({"to", "speed"}));

    const json& legacy = declarations[1].at("parametersJsonSchema");
    CHECK_FALSE(legacy.contains("definitions"));
    CHECK(legacy.at("$defs") == json({{"item", {{"type", "string"}}}}));
    CHECK(legacy.at("properties").at("item") == json({{"$ref", "#/$defs/item"}}));

    // With both `$defs` and `definitions` at the root, nothing is renamed.
    auto both = request_for();
    both.messages = {ullm::Message::user("Go")};
    both.tools = {{"both", "Both kinds of definitions",
                   json{{"type", "object"},
                        {"properties",
                         {{"a", {{"$ref", "#/definitions/x"}}}, {"b", {{"$ref", "#/$defs/y"}}}}},
                        {"definitions", {{"x", {{"type", "string"}}}}},
                        {"$defs", {{"y", {{"type", "integer"}}}}}}}};
    CHECK(provider.encode_body(both, false)
              .at("/tools/0/functionDeclarations/0/parametersJsonSchema"_json_pointer) ==
          both.tools[0].parameters);

    // Argument-less functions are declared without a schema, as Gemini documents them.
    CHECK(declarations[2] == json({{"name", "ping"}, {"description", "No arguments"}}));
    CHECK(declarations[3] == json({{"name", "bare"}, {"description", "No schema at all"}}));
    CHECK(declarations[4].at("parametersJsonSchema") == request.tools[4].parameters);
}

TEST_CASE("gemini: provider_options are merged; generationConfig deeply", "[gemini]") {
    const ullm::GeminiProvider provider;
    auto request = request_for();
    request.messages = {ullm::Message::user("Hi")};
    request.max_tokens = 64;
    request.temperature = 0.2;
    request.tools = {{"ping", "Ping", ullm::schema::object()}};
    request.tool_choice = ullm::ToolChoice::required();
    request.provider_options = {
        {"generationConfig",
         {{"thinkingConfig", {{"thinkingLevel", "low"}, {"includeThoughts", true}}},
          {"temperature", nullptr},
          {"seed", 7}}},
        {"toolConfig", {{"functionCallingConfig", {{"allowedFunctionNames", {"ping"}}}}}},
        {"tools", {{{"googleSearch", json::object()}}}},
        {"safetySettings",
         {{{"category", "HARM_CATEGORY_HATE_SPEECH"}, {"threshold", "BLOCK_NONE"}}}},
    };
    const json body = provider.encode_body(request, false);
    CHECK(body.at("generationConfig") ==
          json({{"maxOutputTokens", 64},
                {"seed", 7},
                {"thinkingConfig", {{"thinkingLevel", "low"}, {"includeThoughts", true}}}}));
    CHECK(body.at("toolConfig") ==
          json({{"functionCallingConfig", {{"mode", "ANY"}, {"allowedFunctionNames", {"ping"}}}}}));
    REQUIRE(body.at("tools").size() == 2);
    CHECK(body.at("tools")[0].contains("functionDeclarations"));
    CHECK(body.at("tools")[1] == json({{"googleSearch", json::object()}}));
    CHECK(body.at("safetySettings") == request.provider_options["safetySettings"]);

    SECTION("other top-level keys replace what the adapter wrote") {
        request.provider_options = {{"systemInstruction", {{"parts", {{{"text", "X"}}}}}}};
        CHECK(provider.encode_body(request, false).at("systemInstruction") ==
              request.provider_options["systemInstruction"]);
    }
    SECTION("a generationConfig on a request that had none") {
        auto plain = request_for();
        plain.messages = {ullm::Message::user("Hi")};
        plain.provider_options = {
            {"generationConfig", {{"thinkingConfig", {{"thinkingBudget", 0}}}}}};
        CHECK(provider.encode_body(plain, false).at("generationConfig") ==
              json({{"thinkingConfig", {{"thinkingBudget", 0}}}}));
    }
}

TEST_CASE("gemini: each capability refusal has its code", "[gemini]") {
    const ullm::GeminiProvider provider;
    // What the client checks once (check_request), then what only the encoder can tell.
    const auto code_for = [&](const ullm::ChatRequest& request) {
        return error_code_of([&] {
            ullm::check_request(request, provider);
            (void)provider.encode(request, false);
        });
    };
    auto base = request_for();
    base.messages = {ullm::Message::user("Hi")};
    const ullm::ToolSpec ping{"ping", "Ping", ullm::schema::object()};
    CHECK(code_for(base) == "no error");

    auto request = base;
    request.model = "";
    CHECK(code_for(request) == "invalid_model");
    for (const char* bad : {"gemini-2.5-flash:generateContent?key=x", "gemini 2.5", "../models/x",
                            "models/", "gemini/../../x"}) {
        INFO(bad);
        request.model = bad;
        CHECK(code_for(request) == "invalid_model");
    }

    request = base;
    request.model = "gemma-3-27b-it";
    request.tools = {ping};
    CHECK(code_for(request) == "unsupported_option");
    request.tools.clear();
    request.response_format = ullm::ResponseFormat{};
    request.response_format->schema = ullm::schema::object({{"a", ullm::schema::string()}}, {"a"});
    CHECK(code_for(request) == "unsupported_option");
    request.model = "gemma-4-26b-a4b-it";
    CHECK(code_for(request) == "no error");

    request = base;
    request.stop = {"a", "b", "c", "d", "e", "f"};
    CHECK(code_for(request) == "unsupported_option");
    request.stop.pop_back();
    CHECK(code_for(request) == "no error");

    request = base;
    request.tool_choice = ullm::ToolChoice::required();
    CHECK(code_for(request) == "invalid_tool_choice");
    request.tools = {ping};
    request.tool_choice = ullm::ToolChoice::tool("pong");
    CHECK(code_for(request) == "invalid_tool_choice");

    request = base;
    request.max_tokens = 0;
    CHECK(code_for(request) == "invalid_max_tokens");

    request = base;
    request.provider_options = json::array();
    CHECK(code_for(request) == "invalid_provider_options");
    request.provider_options = {{"generationConfig", "fast"}};
    CHECK(code_for(request) == "invalid_provider_options");
    request.provider_options = {{"toolConfig", 1}};
    CHECK(code_for(request) == "invalid_provider_options");
    request.provider_options = {{"tools", {{"googleSearch", json::object()}}}};
    CHECK(code_for(request) == "invalid_provider_options");

    request = base;
    ullm::Message user;
    user.role = ullm::Role::user;
    user.parts = {ullm::ImagePart{"data:image/svg+xml,<svg/>", "", ""}};
    request.messages = {user};
    CHECK(code_for(request) == "unsupported_option");

    request = base;
    request.tools = {{"bad name!", "Bad", ullm::schema::object()}};
    CHECK(code_for(request) == "invalid_tool_name");
    request.tools = {{"tool", "Uses an unknown keyword",
                      json{{"type", "object"}, {"patternProperties", json::object()}}}};
    CHECK(code_for(request) == "unsupported_schema_keyword");

    const auto capabilities = provider.capabilities("models/gemma-3-12b-it");
    CHECK_FALSE(capabilities.tools);
    CHECK_FALSE(capabilities.structured_output);
    CHECK(provider.capabilities("gemini-2.5-pro").reasoning);
    CHECK(provider.capabilities("gemini-3-flash-preview").reasoning);
    CHECK_FALSE(provider.capabilities("gemini-2.0-flash").reasoning);
    CHECK(provider.capabilities("gemini-2.0-flash").tools);
}

// ---------------------------------------------------------------------------------------------
// Tool calls, ids and results.

TEST_CASE("gemini: tool results become functionResponse parts matched to their calls", "[gemini]") {
    const ullm::GeminiProvider provider;
    ullm::Message assistant;
    assistant.role = ullm::Role::assistant;
    assistant.parts = {ullm::TextPart{"Checking."},
                       ullm::ToolCallPart{"call_a", "lookup", {{"city", "Paris"}}},
                       ullm::ToolCallPart{"call_b", "convert", {{"amount", 3}}},
                       ullm::ToolCallPart{"call_c", "broken", json("{not json")}};
    auto request = request_for();
    request.messages = {
        ullm::Message::user("Go"), assistant,
        // Results in another order than the calls, with a name the call does not confirm.
        ullm::Message::tool_results({{"call_c", "broken", json("bad arguments"), true},
                                     {"call_b", "convert", json(42), false},
                                     {"call_a", "lookup_alias", json{{"temp", 21}}, false}}),
        ullm::Message::user("And now?")};
    const json body = provider.encode_body(request, false);
    REQUIRE(body.at("contents").size() == 3);
    CHECK(body["contents"][1] ==
          json({{"role", "model"},
                {"parts",
                 {{{"text", "Checking."}},
                  {{"functionCall", {{"name", "lookup"}, {"args", {{"city", "Paris"}}}}}},
                  {{"functionCall", {{"name", "convert"}, {"args", {{"amount", 3}}}}}},
                  {{"functionCall",
                    {{"name", "broken"}, {"args", {{"arguments", "{not json"}}}}}}}}}));
    // One user turn: the responses in the calls' order, then the next user text.
    CHECK(body["contents"][2] ==
          json({{"role", "user"},
                {"parts",
                 {{{"functionResponse", {{"name", "lookup"}, {"response", {{"temp", 21}}}}}},
                  {{"functionResponse", {{"name", "convert"}, {"response", {{"output", 42}}}}}},
                  {{"functionResponse",
                    {{"name", "broken"}, {"response", {{"error", "bad arguments"}}}}}},
                  {{"text", "And now?"}}}}}));
    CHECK_FALSE(contains_text(body, "call_a"));
    CHECK_FALSE(contains_text(body, "\"id\""));
}

TEST_CASE("gemini: synthesised call ids are unique in the conversation and never sent",
          "[gemini]") {
    const ullm::GeminiProvider provider;
    const json calls =
        json::array({{{"functionCall", {{"name", "lookup"}, {"args", {{"q", 1}}}}}},
                     {{"functionCall", {{"name", "lookup"}, {"args", {{"q", 2}}}}}}});
    auto request = request_for();
    request.messages = {ullm::Message::user("Go")};

    const auto first = decode_body(provider, text_response(calls, "STOP", "resp-A"), request);
    REQUIRE(first.tool_calls.size() == 2);
    CHECK(first.tool_calls[0].id != first.tool_calls[1].id);
    CHECK(first.tool_calls[0].id.rfind("gemini_call_", 0) == 0);
    CHECK(first.finish_reason == ullm::FinishReason::tool_call);
    CHECK(first.raw_finish_reason == "STOP");
    // Decoding is deterministic: the same response gets the same ids.
    CHECK(decode_body(provider, text_response(calls, "STOP", "resp-A"), request).tool_calls ==
          first.tool_calls);

    // The next round, even with the same (or no) responseId, gets fresh ids.
    request.messages.push_back(first.message);
    request.messages.push_back(tool_results_for(first.tool_calls));
    for (const char* response_id : {"resp-A", "resp-B", ""}) {
        INFO(response_id);
        const auto second =
            decode_body(provider, text_response(calls, "STOP", response_id), request);
        REQUIRE(second.tool_calls.size() == 2);
        for (const auto& call : second.tool_calls) {
            CHECK(call.id != first.tool_calls[0].id);
            CHECK(call.id != first.tool_calls[1].id);
        }
        CHECK(second.tool_calls[0].id != second.tool_calls[1].id);
        // Streamed, the same response gets the same ids.
        const auto streamed =
            decode_stream(provider, sse_of({text_response(calls, "STOP", response_id)}), request);
        CHECK(streamed.tool_calls == second.tool_calls);
    }

    // Sent back: no id on the calls or on the responses (Gemini matches by name and order).
    const json body = provider.encode_body(request, false);
    CHECK_FALSE(contains_text(body, "gemini_call_"));
    CHECK_FALSE(contains_text(body, "\"id\""));
    const auto responses = turns_of(body, "user").back().at("parts");
    REQUIRE(responses.size() == 2);
    CHECK(responses[0].at("functionResponse").at("name") == "lookup");
}

TEST_CASE("gemini: Gemini's own call ids are kept and sent back on call and response", "[gemini]") {
    const ullm::GeminiProvider provider;
    auto request = request_for("gemini-3.1-pro-preview");
    request.messages = {ullm::Message::user("Weather in SF?")};
    const auto response =
        decode_stream(provider, wire_of(fixture("issue-10781.1.chunks.txt")), request);
    REQUIRE(response.tool_calls.size() == 1);
    CHECK(response.tool_calls[0].id == "g1bmv6il");

    request.messages.push_back(response.message);
    request.messages.push_back(tool_results_for(response.tool_calls));
    const json body = provider.encode_body(request, false);
    const json model_turn = turns_of(body, "model").at(0);
    REQUIRE(model_turn.at("parts").size() == 2);
    CHECK(model_turn["parts"][0] == json({{"text", "Let me check."}}));
    CHECK(
        model_turn["parts"][1].at("functionCall") ==
        json({{"id", "g1bmv6il"}, {"name", "get_weather"}, {"args", {{"city", "San Francisco"}}}}));
    const std::string signature =
        json::parse(
            ullm::test::chunk_lines(ullm::test::read_file(fixture("issue-10781.1.chunks.txt")))[1])
            .at("/candidates/0/content/parts/0/thoughtSignature"_json_pointer);
    CHECK(model_turn["parts"][1].at("thoughtSignature") == signature);
    CHECK(
        turns_of(body, "user").back().at("parts").at(0).at("functionResponse") ==
        json({{"id", "g1bmv6il"}, {"name", "get_weather"}, {"response", {{"ok", "get_weather"}}}}));

    SECTION("a provider id that collides with the history gets a fresh canonical id") {
        auto next = request;
        const auto again =
            decode_stream(provider, wire_of(fixture("issue-10781.1.chunks.txt")), next);
        REQUIRE(again.tool_calls.size() == 1);
        CHECK(again.tool_calls[0].id != "g1bmv6il");
        next.messages.push_back(again.message);
        next.messages.push_back(tool_results_for(again.tool_calls));
        const json second = provider.encode_body(next, false);
        // …while Gemini still gets its own id back on both sides.
        CHECK(turns_of(second, "model").at(1)["parts"][1]["functionCall"]["id"] == "g1bmv6il");
        CHECK(turns_of(second, "user").back()["parts"][0]["functionResponse"]["id"] == "g1bmv6il");
    }
}

// ---------------------------------------------------------------------------------------------
// Thought signatures.

TEST_CASE("gemini: parallel calls: the signature is replayed on the first call only", "[gemini]") {
    const ullm::GeminiProvider provider;
    auto request = request_for("gemini-3.1-pro-preview");
    request.messages = {ullm::Message::user("Weather in Boston and SF?")};
    const std::string text =
        ullm::test::read_file(fixture("google-stream-tool-call-arguments.chunks.txt"));
    const std::string signature =
        json::parse(ullm::test::chunk_lines(text)[0])
            .at("/candidates/0/content/parts/0/thoughtSignature"_json_pointer);
    const auto response = decode_stream(
        provider, wire_of(fixture("google-stream-tool-call-arguments.chunks.txt")), request);
    REQUIRE(response.tool_calls.size() == 2);

    // Nothing of the signature is visible in canonical form.
    CHECK_FALSE(contains_text(ullm::message_to_json(response.message, false), signature));
    for (const auto& event : stream_events(
             provider, wire_of(fixture("google-stream-tool-call-arguments.chunks.txt")), request)) {
        CHECK(event.delta.find(signature) == std::string::npos);
        if (event.tool_call) CHECK_FALSE(contains_text(event.tool_call->arguments, signature));
    }

    request.messages.push_back(response.message);
    request.messages.push_back(tool_results_for(response.tool_calls));
    const json body = provider.encode_body(request, false);
    const json parts = turns_of(body, "model").at(0).at("parts");
    REQUIRE(parts.size() == 2);
    CHECK(parts[0] ==
          json({{"functionCall", {{"name", "getWeather"}, {"args", {{"location", "Boston"}}}}},
                {"thoughtSignature", signature}}));
    CHECK(parts[1] ==
          json({{"functionCall",
                 {{"name", "getWeather"}, {"args", {{"location", "San Francisco"}}}}}}));
    // Responses answer both calls, in order.
    const json responses = turns_of(body, "user").back().at("parts");
    REQUIRE(responses.size() == 2);

    SECTION("another model gets no signatures") {
        for (const char* other : {"gemini-3-pro-preview", "gemini-3.1-pro-preview-2"}) {
            request.model = other;
            const json foreign = provider.encode_body(request, false);
            CHECK_FALSE(contains_text(foreign, "thoughtSignature"));
            CHECK_FALSE(contains_text(foreign, signature));
            CHECK(turns_of(foreign, "model").at(0).at("parts").size() == 2);
        }
    }
    SECTION("the same model named with its models/ prefix gets them") {
        request.model = "models/gemini-3.1-pro-preview";
        CHECK(contains_text(provider.encode_body(request, false), signature));
    }
    SECTION("another provider name gets no signatures") {
        const ullm::GeminiProvider vertex({.provider_name = "vertex"});
        CHECK_FALSE(contains_text(vertex.encode_body(request, false), "thoughtSignature"));
    }
    SECTION("a layout that no longer matches the parts is ignored") {
        request.messages[1].parts.pop_back();
        const json edited = provider.encode_body(request, false);
        CHECK_FALSE(contains_text(edited, "thoughtSignature"));
        CHECK(turns_of(edited, "model").at(0).at("parts").size() == 1);
    }
}

TEST_CASE("gemini: a signature in a later empty-text chunk is merged onto its text part",
          "[gemini]") {
    const ullm::GeminiProvider provider;
    for (const char* file :
         {"google-text.chunks.txt", "issue-18073-empty-text-thought-signature.chunks.txt",
          "issue-10781.2.chunks.txt"}) {
        INFO(file);
        const std::string text = ullm::test::read_file(fixture(file));
        const auto lines = ullm::test::chunk_lines(text);
        const json last = json::parse(lines.back());
        REQUIRE(last.at("/candidates/0/content/parts/0/text"_json_pointer) == "");
        const std::string signature =
            last.at("/candidates/0/content/parts/0/thoughtSignature"_json_pointer);

        auto request = request_for();
        request.messages = {ullm::Message::user("Q")};
        const auto response = decode_stream(provider, wire_of(fixture(file)), request);
        REQUIRE(response.message.parts.size() == 1);
        request.messages.push_back(response.message);
        request.messages.push_back(ullm::Message::user("Thanks"));
        const json parts =
            turns_of(provider.encode_body(request, false), "model").at(0).at("parts");
        // One text part carrying the whole text and the signature, as a generateContent body has.
        CHECK(parts == json::array({{{"text", response.text}, {"thoughtSignature", signature}}}));
    }
}

TEST_CASE("gemini: signatures stay on the exact part they came with", "[gemini]") {
    const ullm::GeminiProvider provider;
    auto request = request_for();
    request.messages = {ullm::Message::user("Q")};

    SECTION("streamed text with a signature on its first piece") {
        const auto response = decode_stream(
            provider,
            sse_of({stream_chunk({{{"text", "Hel"}, {"thoughtSignature", "SIG1"}}}),
                    stream_chunk({{{"text", "lo"}}}), stream_chunk({{{"text", ""}}}, "STOP")}),
            request);
        CHECK(response.text == "Hello");
        request.messages.push_back(response.message);
        CHECK(turns_of(provider.encode_body(request, false), "model")[0]["parts"] ==
              json::array({{{"text", "Hello"}, {"thoughtSignature", "SIG1"}}}));
    }
    SECTION("a signature-only part after a call stays its own part") {
        const auto response = decode_stream(
            provider,
            sse_of({stream_chunk({{{"functionCall", {{"name", "f"}, {"args", json::object()}}},
                                   {"thoughtSignature", "SIG1"}}}),
                    stream_chunk({{{"text", ""}, {"thoughtSignature", "SIG2"}}}, "STOP")}),
            request);
        REQUIRE(response.message.parts.size() == 1);
        request.messages.push_back(response.message);
        request.messages.push_back(tool_results_for(response.tool_calls));
        CHECK(turns_of(provider.encode_body(request, false), "model")[0]["parts"] ==
              json::array({{{"functionCall", {{"name", "f"}, {"args", json::object()}}},
                            {"thoughtSignature", "SIG1"}},
                           {{"text", ""}, {"thoughtSignature", "SIG2"}}}));
    }
    SECTION("two text parts with their own signatures stay two parts") {
        const auto response =
            decode_body(provider,
                        text_response({{{"text", "A"}, {"thoughtSignature", "S1"}},
                                       {{"text", "B"}, {"thoughtSignature", "S2"}}}),
                        request);
        CHECK(response.text == "AB");
        request.messages.push_back(response.message);
        CHECK(turns_of(provider.encode_body(request, false), "model")[0]["parts"] ==
              json::array({{{"text", "A"}, {"thoughtSignature", "S1"}},
                           {{"text", "B"}, {"thoughtSignature", "S2"}}}));
    }
    SECTION("thought summaries are reasoning, replayed as thoughts only to the same model") {
        const auto response =
            decode_body(provider,
                        text_response({{{"text", "Let me think."}, {"thought", true}},
                                       {{"text", "Answer."}, {"thoughtSignature", "S1"}}}),
                        request);
        CHECK(response.reasoning_text == "Let me think.");
        CHECK(response.text == "Answer.");
        REQUIRE(response.message.parts.size() == 2);
        CHECK(std::holds_alternative<ullm::ReasoningPart>(response.message.parts[0]));
        request.messages.push_back(response.message);
        CHECK(turns_of(provider.encode_body(request, false), "model")[0]["parts"] ==
              json::array({{{"text", "Let me think."}, {"thought", true}},
                           {{"text", "Answer."}, {"thoughtSignature", "S1"}}}));
        request.model = "gemini-2.5-flash";
        CHECK(turns_of(provider.encode_body(request, false), "model")[0]["parts"] ==
              json::array({{{"text", "Answer."}}}));
    }
    SECTION("code execution parts are replayed verbatim, in place") {
        const json body = json::parse(
            ullm::test::read_file(fixture("google-code-execution-multiple-results.json")));
        const auto response = decode_body(provider, body, request);
        REQUIRE(response.message.parts.size() == 1);
        CHECK(response.text.find("```python") != std::string::npos);
        request.messages.push_back(response.message);
        CHECK(turns_of(provider.encode_body(request, false), "model")[0]["parts"] ==
              body.at("/candidates/0/content/parts"_json_pointer));
        request.model = "gemini-3-flash-preview";
        CHECK(turns_of(provider.encode_body(request, false), "model")[0]["parts"] ==
              json::array({{{"text", response.text}}}));
    }
    SECTION("generated images are replayed with their signature") {
        const auto response = decode_stream(
            provider, wire_of(fixture("issue-10660-image-thought-signature.chunks.txt")), request);
        CHECK(response.message.parts.empty());
        request.messages.push_back(response.message);
        request.messages.push_back(ullm::Message::user("Make it blue"));
        CHECK(turns_of(provider.encode_body(request, false), "model")[0]["parts"] ==
              json::array({{{"inlineData", {{"mimeType", "image/jpeg"}, {"data", "AA=="}}},
                            {"thoughtSignature", "live-image-thought-signature"}}}));
    }
    SECTION("text pieces on either side of a raw part stay separate") {
        const auto response = decode_body(
            provider,
            text_response({{{"text", "Before"}},
                           {{"inlineData", {{"mimeType", "image/png"}, {"data", "AA=="}}}},
                           {{"text", "After"}}}),
            request);
        CHECK(response.text == "BeforeAfter");
        CHECK(response.message.parts.size() == 2);
        request.messages.push_back(response.message);
        CHECK(turns_of(provider.encode_body(request, false), "model")[0]["parts"].size() == 3);
    }
    SECTION("a plain response carries no replay state") {
        const auto response = decode_body(provider, text_response({{{"text", "Hi"}}}), request);
        CHECK_FALSE(response.message.replay);
    }
}

TEST_CASE("gemini: a whole body and a stream of the same response agree exactly", "[gemini]") {
    // Each recorded body is re-sent as Gemini streams it: texts in pieces, the signature in a
    // last empty-text chunk, calls whole, usage on every chunk.
    const ullm::GeminiProvider provider;
    std::size_t compared = 0;
    std::size_t split_texts = 0;
    for (const auto& path : ullm::test::fixture_files("gemini", ".json")) {
        const json body = json::parse(ullm::test::read_file(path));
        if (!body.contains("candidates")) continue;
        INFO(path.string());
        const json& parts = body.at("/candidates/0/content/parts"_json_pointer);
        std::vector<json> chunks;
        const auto chunk_of = [&](json chunk_parts) {
            json chunk = body;
            chunk["candidates"][0]["content"]["parts"] = std::move(chunk_parts);
            chunk["candidates"][0].erase("finishReason");
            chunk["candidates"][0].erase("finishMessage");
            return chunk;
        };
        for (const auto& part : parts) {
            if (part.contains("text") && part.size() <= 3 &&
                part.at("text").get_ref<const std::string&>().size() > 3) {
                const std::string text = part.at("text");
                json first = part;
                json second = part;
                first["text"] = text.substr(0, text.size() / 2);
                first.erase("thoughtSignature");
                second["text"] = text.substr(text.size() / 2);
                second.erase("thoughtSignature");
                chunks.push_back(chunk_of(json::array({first})));
                chunks.push_back(chunk_of(json::array({second})));
                ++split_texts;
                if (part.contains("thoughtSignature")) {
                    json tail = {{"text", ""}, {"thoughtSignature", part["thoughtSignature"]}};
                    chunks.push_back(chunk_of(json::array({tail})));
                }
            } else {
                chunks.push_back(chunk_of(json::array({part})));
            }
        }
        json last = body;
        last["candidates"][0]["content"]["parts"] = json::array({{{"text", ""}}});
        chunks.push_back(last);

        const auto whole = provider.decode(body_response(body.dump()), request_for());
        const auto streamed = decode_stream(provider, sse_of(chunks));
        CHECK(ullm::message_to_json(streamed.message) == ullm::message_to_json(whole.message));
        CHECK(streamed.text == whole.text);
        CHECK(streamed.tool_calls == whole.tool_calls);
        CHECK(streamed.finish_reason == whole.finish_reason);
        CHECK(streamed.usage == whole.usage);
        CHECK(streamed.model == whole.model);
        CHECK(streamed.request_id == whole.request_id);
        ++compared;
    }
    CHECK(compared >= 15);
    CHECK(split_texts >= 8);
}

// ---------------------------------------------------------------------------------------------
// Decoding details.

TEST_CASE("gemini: finish reasons and prompt blocks map to canonical reasons", "[gemini]") {
    const ullm::GeminiProvider provider;
    const std::vector<std::pair<std::string, ullm::FinishReason>> cases = {
        {"STOP", ullm::FinishReason::stop},
        {"MAX_TOKENS", ullm::FinishReason::length},
        {"SAFETY", ullm::FinishReason::content_filter},
        {"RECITATION", ullm::FinishReason::content_filter},
        {"BLOCKLIST", ullm::FinishReason::content_filter},
        {"PROHIBITED_CONTENT", ullm::FinishReason::content_filter},
        {"SPII", ullm::FinishReason::content_filter},
        {"MALFORMED_FUNCTION_CALL", ullm::FinishReason::error},
        {"OTHER", ullm::FinishReason::error},
    };
    for (const auto& [raw, reason] : cases) {
        INFO(raw);
        const auto response = decode_body(provider, text_response({{{"text", "x"}}}, raw));
        CHECK(response.finish_reason == reason);
        CHECK(response.raw_finish_reason == raw);
        const auto streamed =
            decode_stream(provider, sse_of({stream_chunk({{{"text", "x"}}}, raw)}));
        CHECK(streamed.finish_reason == reason);
    }
    // A call cut short by the output limit stays `length`.
    CHECK(decode_body(provider,
                      text_response({{{"functionCall", {{"name", "f"}, {"args", json::object()}}}}},
                                    "MAX_TOKENS"))
              .finish_reason == ullm::FinishReason::length);

    const json blocked = {{"promptFeedback", {{"blockReason", "SAFETY"}}},
                          {"usageMetadata", {{"promptTokenCount", 7}, {"totalTokenCount", 7}}},
                          {"modelVersion", "gemini-2.5-flash"}};
    const auto response = decode_body(provider, blocked);
    CHECK(response.finish_reason == ullm::FinishReason::content_filter);
    CHECK(response.raw_finish_reason == "SAFETY");
    CHECK(response.text.empty());
    CHECK(response.usage.input_tokens == 7);
    const auto streamed = decode_stream(provider, sse_of({blocked}));
    CHECK(streamed.finish_reason == ullm::FinishReason::content_filter);
}

TEST_CASE("gemini: usage follows ullm's single meaning", "[gemini]") {
    const ullm::GeminiProvider provider;
    json body = text_response({{{"text", "x"}}});
    body["usageMetadata"] = {{"promptTokenCount", 1000},      {"cachedContentTokenCount", 800},
                             {"candidatesTokenCount", 50},    {"thoughtsTokenCount", 120},
                             {"toolUsePromptTokenCount", 30}, {"totalTokenCount", 1200}};
    const auto usage = decode_body(provider, body).usage;
    CHECK(usage.input_tokens == 1030);
    CHECK(usage.cached_read_tokens == 800);
    CHECK(usage.output_tokens == 170);
    CHECK(usage.reasoning_tokens == 120);
    CHECK(usage.cached_write_tokens == 0);
    CHECK(usage.total_tokens() == 1200);

    body["usageMetadata"] = {{"promptTokenCount", 9223372036854775807LL},
                             {"toolUsePromptTokenCount", 10}};
    CHECK(decode_body(provider, body).usage.input_tokens == 9223372036854775807LL);
}

TEST_CASE("gemini: stream events: deltas, calls, usage, exactly one done", "[gemini]") {
    const ullm::GeminiProvider provider;
    const auto events = stream_events(provider, wire_of(fixture("issue-10781.1.chunks.txt")),
                                      request_for("gemini-3.1-pro-preview"), 1);
    std::vector<std::string> types;
    types.reserve(events.size());
    for (const auto& event : events) types.emplace_back(ullm::to_string(event.type));
    CHECK(types == std::vector<std::string>{"text-delta", "usage-update", "tool-call-start",
                                            "tool-call-delta", "tool-call-end", "usage-update",
                                            "done"});
    CHECK(events[0].delta == "Let me check.");
    CHECK(events[2].tool_call_id == "g1bmv6il");
    CHECK(events[2].tool_name == "get_weather");
    CHECK(json::parse(events[3].delta) == json({{"city", "San Francisco"}}));
    CHECK(events[3].tool_call_id == "g1bmv6il");
    REQUIRE(events[4].tool_call);
    CHECK(events[4].tool_call->arguments == json({{"city", "San Francisco"}}));
    CHECK(events[1].usage->input_tokens == 83);
    CHECK(events[5].usage->output_tokens == 21 + 178);
    CHECK(events.back().usage == events.back().response->usage);

    auto decoder = provider.stream_decoder(request_for());
    std::vector<ullm::StreamEvent> out;
    CHECK_FALSE(decoder->produced_visible_event());
    decoder->feed("data: " + stream_chunk({{{"text", ""}}}).dump() + "\n\n", out);
    CHECK_FALSE(decoder->produced_visible_event());  // usage only
    decoder->feed("data: " + stream_chunk({{{"text", "a"}}}).dump() + "\n\n", out);
    CHECK(decoder->produced_visible_event());
}

TEST_CASE("gemini: an OpenAI-style [DONE] terminator from a proxy is ignored", "[gemini]") {
    const ullm::GeminiProvider provider;
    const std::string wire = wire_of(fixture("google-text.chunks.txt"));
    CHECK(decode_stream(provider, wire + "data: [DONE]\n\n").text ==
          decode_stream(provider, wire).text);
}

TEST_CASE("gemini: a stream without a finishReason is truncated", "[gemini]") {
    const ullm::GeminiProvider provider;
    const std::string text = ullm::test::read_file(fixture("google-text.chunks.txt"));
    const auto lines = ullm::test::chunk_lines(text);
    std::string wire;
    for (std::size_t i = 0; i + 1 < lines.size(); ++i)
        wire += "data: " + std::string(lines[i]) + "\n\n";
    CHECK(error_code_of([&] { (void)stream_events(provider, wire); }) == "stream_truncated");
    // Cut inside the final event.
    const std::string full = wire_of(fixture("google-text.chunks.txt"));
    CHECK(error_code_of([&] { (void)stream_events(provider, full.substr(0, full.size() - 30)); }) ==
          "stream_truncated");
    CHECK(error_code_of([&] { (void)stream_events(provider, ""); }) == "stream_truncated");
    CHECK(error_code_of([&] { (void)stream_events(provider, "  \n"); }) == "stream_truncated");
    // A JSON-array stream cut short.
    CHECK(error_code_of([&] {
              (void)stream_events(provider, "[" + stream_chunk({{{"text", "a"}}}).dump());
          }) == "stream_truncated");
    try {
        (void)stream_events(provider, wire);
    } catch (const ullm::StreamTruncatedError& error) {
        CHECK(error.retryable());
        CHECK(error.provider() == "gemini");
        CHECK(error.request_id() == "bH6LaZW8Fp_3nsEPqtaSwQ4");
    }
}

TEST_CASE("gemini: errors map to the error hierarchy", "[gemini]") {
    const ullm::GeminiProvider provider;
    const auto error_body = [](int code, const std::string& status, const std::string& message,
                               json details = json::array()) {
        return json{
            {"error",
             {{"code", code}, {"message", message}, {"status", status}, {"details", details}}}}
            .dump();
    };
    const auto decode_error = [&](const std::string& body, int status) {
        try {
            (void)provider.decode(body_response(body, status), request_for());
        } catch (const ullm::Error& error) {
            return std::make_tuple(error.code(), error.status(), error.retryable());
        }
        return std::make_tuple(std::string("no error"), 0, false);
    };
    CHECK(decode_error(error_body(503, "UNAVAILABLE", "The model is overloaded."), 503) ==
          std::make_tuple(std::string("provider_error"), 503, true));
    CHECK(decode_error(error_body(500, "INTERNAL", "An internal error has occurred."), 500) ==
          std::make_tuple(std::string("provider_error"), 500, true));
    CHECK(decode_error(error_body(403, "PERMISSION_DENIED", "denied"), 403) ==
          std::make_tuple(std::string("authentication_failed"), 403, false));
    CHECK(decode_error(error_body(401, "UNAUTHENTICATED", "no"), 401) ==
          std::make_tuple(std::string("authentication_failed"), 401, false));
    CHECK(decode_error(
              error_body(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
                         {{{"@type", "type.googleapis.com/google.rpc.ErrorInfo"},
                           {"reason", "API_KEY_INVALID"},
                           {"domain", "googleapis.com"}}}),
              400) == std::make_tuple(std::string("authentication_failed"), 401, false));
    CHECK(decode_error(error_body(400, "INVALID_ARGUMENT",
                                  "The input token count (1200000) exceeds the maximum number of "
                                  "tokens allowed (1048576)."),
                       400) == std::make_tuple(std::string("context_length_exceeded"), 400, false));
    CHECK(decode_error("<html>Bad Gateway</html>", 502) ==
          std::make_tuple(std::string("provider_error"), 502, true));
    CHECK(decode_error("[" + error_body(429, "RESOURCE_EXHAUSTED", "slow down") + "]", 429) ==
          std::make_tuple(std::string("rate_limited"), 429, true));
    // An error body with a 200 status maps by what it says.
    CHECK(decode_error(error_body(503, "UNAVAILABLE", "busy"), 200) ==
          std::make_tuple(std::string("provider_error"), 503, true));
    CHECK(decode_error(json{{"error", {{"status", "RESOURCE_EXHAUSTED"}, {"message", "x"}}}}.dump(),
                       200) == std::make_tuple(std::string("rate_limited"), 429, true));
    // Malformed bodies.
    CHECK(decode_error("not json", 200) ==
          std::make_tuple(std::string("invalid_provider_response"), 502, false));
    CHECK(decode_error("[]", 200) ==
          std::make_tuple(std::string("invalid_provider_response"), 502, false));
    CHECK(decode_error(R"({"candidates": 5})", 200) ==
          std::make_tuple(std::string("invalid_provider_response"), 502, false));
    CHECK(decode_error(R"({"candidates": []})", 200) ==
          std::make_tuple(std::string("invalid_provider_response"), 502, false));
    // The key never leaks into an error.
    try {
        (void)provider.decode(
            body_response(
                error_body(400, "INVALID_ARGUMENT", "bad key AIzaSyABCDEFGHIJKLMNOP12345"), 400),
            request_for());
    } catch (const ullm::Error& error) {
        CHECK(std::string(error.what()).find("AIzaSyABCDEFGHIJKLMNOP12345") == std::string::npos);
    }
}

TEST_CASE("gemini: an error inside a stream is thrown as the mapped error", "[gemini]") {
    const ullm::GeminiProvider provider;
    const json quota = json::parse(ullm::test::read_file(fixture("google-429-retry-info.json")));
    std::vector<ullm::StreamEvent> events;
    auto decoder = provider.stream_decoder(request_for());
    decoder->feed("data: " + stream_chunk({{{"text", "partial"}}}).dump() + "\n\n", events);
    try {
        decoder->feed("data: " + quota.dump() + "\n\n", events);
        FAIL("no error");
    } catch (const ullm::RateLimitError& error) {
        REQUIRE(error.retry_after());
        CHECK(error.retry_after()->count() == 34400);
        CHECK(error.request_id() == "resp-1");
    }
    CHECK(events.front().delta == "partial");

    CHECK(error_code_of([&] {
              (void)stream_events(provider,
                                  "data: " +
                                      json{{"error",
                                            {{"code", 500},
                                             {"status", "INTERNAL"},
                                             {"message", "An internal error has occurred."}}}}
                                          .dump() +
                                      "\n\n");
          }) == "provider_error");
    CHECK(error_code_of([&] { (void)stream_events(provider, "data: {oops\n\n"); }) ==
          "invalid_provider_response");
    CHECK(error_code_of([&] { (void)stream_events(provider, "data: [1,2]\n\n"); }) ==
          "invalid_provider_response");
    CHECK(error_code_of([&] { (void)stream_events(provider, "[1, 2]"); }) ==
          "invalid_provider_response");
    CHECK(error_code_of([&] {
              (void)stream_events(provider, "data: {\"candidates\": {\"a\": 1}}\n\n");
          }) == "invalid_provider_response");
}

TEST_CASE("gemini: streamed arguments: paths, values and malformed input", "[gemini]") {
    const ullm::GeminiProvider provider;
    const auto call_chunk = [](json call) {
        return stream_chunk({{{"functionCall", std::move(call)}}});
    };
    const auto partial = [](std::string path, const json& value_field, bool more = false) {
        json argument = {{"jsonPath", std::move(path)}};
        argument.update(value_field);
        if (more) argument["willContinue"] = true;
        return json{{"partialArgs", {argument}}, {"willContinue", true}};
    };
    const auto response = decode_stream(
        provider, sse_of({call_chunk({{"name", "f"}, {"willContinue", true}}),
                          call_chunk(partial("$.text", {{"stringValue", "Hel"}}, true)),
                          call_chunk(partial("$.text", {{"stringValue", "lo"}}, true)),
                          call_chunk(partial("$.text", {{"stringValue", ""}})),
                          call_chunk(partial("$['odd.key']", {{"boolValue", true}})),
                          call_chunk(partial("$.list[1]", {{"numberValue", 2}})),
                          call_chunk(partial("$.list[0]", {{"nullValue", nullptr}})),
                          call_chunk(partial("$.text2", {{"stringValue", "new"}})),
                          call_chunk(partial("$.text2", {{"stringValue", "replaced"}})),
                          call_chunk(json::object()), stream_chunk({{{"text", ""}}}, "STOP")}));
    REQUIRE(response.tool_calls.size() == 1);
    CHECK(
        response.tool_calls[0].arguments ==
        json(
            {{"text", "Hello"}, {"odd.key", true}, {"list", {nullptr, 2}}, {"text2", "replaced"}}));
    std::string deep = "$";
    for (int i = 0; i < 65; ++i) deep += ".a";
    for (const std::string& path : {std::string("text"), std::string("$."), std::string("$[x]"),
                                    std::string("$[99999]"), std::string("$..a"), deep}) {
        INFO(path);
        CHECK(error_code_of([&] {
                  (void)stream_events(provider,
                                      sse_of({call_chunk({{"name", "f"}, {"willContinue", true}}),
                                              call_chunk(partial(path, {{"numberValue", 1}}))}));
              }) == "invalid_provider_response");
    }
    // A call still streaming when the stream finishes is completed then.
    const auto open =
        decode_stream(provider, sse_of({call_chunk({{"name", "g"}, {"willContinue", true}}),
                                        call_chunk(partial("$.a", {{"numberValue", 1}})),
                                        stream_chunk({{{"text", ""}}}, "STOP")}));
    REQUIRE(open.tool_calls.size() == 1);
    CHECK(open.tool_calls[0].arguments == json({{"a", 1}}));
}

TEST_CASE("gemini: a response without modelVersion names the requested model", "[gemini]") {
    const ullm::GeminiProvider provider;
    json body = text_response({{{"text", "x"}}});
    body.erase("modelVersion");
    body.erase("responseId");
    auto response = decode_body(provider, body, request_for("models/gemini-2.5-flash"));
    CHECK(response.model == "gemini-2.5-flash");
    CHECK(response.request_id.empty());
    auto http = body_response(body.dump());
    http.headers.emplace_back("x-request-id", "req-42");
    CHECK(provider.decode(http, request_for()).request_id == "req-42");
}

}  // namespace gemini_test
