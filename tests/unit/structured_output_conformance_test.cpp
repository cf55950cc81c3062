// Structured-output requests against the providers' published API descriptions: a nested schema
// (objects, arrays, enums, $defs/$ref, optional fields made nullable for strict mode) encoded by
// OpenAI Chat Completions, OpenAI Responses and Gemini, each body checked against the request
// schema of the OpenAPI document in ../shared/fixtures/specs, and the format checked to land in
// the field that document names.

#include <ullm/core/error.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>

#include <string>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/fixtures.hpp"
#include "support/openapi_checker.hpp"

namespace structured_output_conformance_test {

using ullm::json;
using ullm::test::error_code_of;
using ullm::test::spec;

namespace {

// Gemini's OpenAPI document, parsed once.
const ullm::test::SpecChecker& gemini_spec() {
    static const ullm::test::SpecChecker checker(ullm::test::fixtures_dir() / "specs" /
                                                 "gemini-native.openapi.json");
    return checker;
}

// A schema in the form OpenAI's strict mode takes: every object closed and every property
// required, the optional ones (summary, reviewer, email, word_count) made nullable, and the
// person shape shared through $defs.
const json article_schema = json::parse(R"({
  "type": "object",
  "properties": {
    "title": {"type": "string", "description": "A short title"},
    "status": {"type": "string", "enum": ["draft", "review", "published"]},
    "priority": {"type": "integer", "minimum": 1, "maximum": 5},
    "summary": {"type": ["string", "null"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "author": {"$ref": "#/$defs/person"},
    "reviewer": {"anyOf": [{"$ref": "#/$defs/person"}, {"type": "null"}]},
    "sections": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "heading": {"type": "string"},
          "kind": {"type": "string", "enum": ["text", "code", "table"]},
          "lines": {"type": "array", "items": {"type": "string"}},
          "word_count": {"type": ["integer", "null"]}
        },
        "required": ["heading", "kind", "lines", "word_count"],
        "additionalProperties": false
      }
    }
  },
  "required": ["title", "status", "priority", "summary", "tags", "author", "reviewer",
               "sections"],
  "additionalProperties": false,
  "$defs": {
    "person": {
      "type": "object",
      "properties": {"name": {"type": "string"}, "email": {"type": ["string", "null"]}},
      "required": ["name", "email"],
      "additionalProperties": false
    }
  }
})");

ullm::ChatRequest article_request(std::string model, bool strict) {
    ullm::ChatRequest request;
    request.model = std::move(model);
    request.system = "Extract the article.";
    request.messages = {ullm::Message::user("Structured outputs, by Ada (ada@example.com): ...")};
    request.max_tokens = 400;
    request.temperature = 0.2;
    request.response_format = ullm::ResponseFormat{"article", article_schema, strict};
    return request;
}

// The keys of `body` that `schema_name` does not declare at its top level.
std::string undeclared_keys(const ullm::test::SpecChecker& checker, const json& body,
                            const std::string& schema_name) {
    const auto declared = checker.properties(checker.schema(schema_name));
    std::string out;
    for (const auto& item : body.items()) {
        if (declared.count(item.key()) == 0) out += (out.empty() ? "" : ", ") + item.key();
    }
    return out;
}

}  // namespace

TEST_CASE("structured output conformance: the nested schema passes each provider's own checks",
          "[structured_output_conformance][structured_output][spec]") {
    // encode_body trusts a checked request: the bodies below are ones ullm would send.
    const ullm::OpenAiChatProvider chat;
    const ullm::OpenAiResponsesProvider responses;
    const ullm::GeminiProvider gemini;
    for (const bool strict : {true, false}) {
        INFO("strict " << strict);
        CHECK(error_code_of([&] {
                  ullm::check_request(article_request("gpt-4o", strict), chat, true);
              }) == "no error");
        CHECK(error_code_of([&] {
                  ullm::check_request(article_request("gpt-4.1", strict), responses, true);
              }) == "no error");
        CHECK(error_code_of([&] {
                  ullm::check_request(article_request("gemini-2.5-flash", strict), gemini, true);
              }) == "no error");
    }
    // Strict mode really is checked: a property left out of `required` is refused.
    auto loose = article_request("gpt-4o", true);
    loose.response_format->schema["required"].erase(3);  // "summary"
    CHECK(error_code_of([&] { ullm::check_request(loose, chat); }) == "unsupported_schema_keyword");
    CHECK(error_code_of([&] { ullm::check_request(loose, responses); }) ==
          "unsupported_schema_keyword");
}

TEST_CASE("structured output conformance: Chat Completions sends response_format.json_schema",
          "[structured_output_conformance][structured_output][openai_chat][spec]") {
    const ullm::OpenAiChatProvider provider;
    for (const bool strict : {true, false}) {
        for (const bool stream : {false, true}) {
            INFO("strict " << strict << ", stream " << stream);
            const auto request = article_request("gpt-4o", strict);
            const json body = provider.encode_body(request, stream);
            INFO(body.dump(2));
            CHECK(undeclared_keys(spec(), body, "CreateChatCompletionRequest").empty());
            const std::string why = spec().check(body, "CreateChatCompletionRequest");
            INFO(why);
            CHECK(why.empty());

            const json& format = body.at("response_format");
            CHECK(spec().check(format, "ResponseFormatJsonSchema").empty());
            CHECK(format.size() == 2);
            CHECK(format.at("type") == "json_schema");
            const json& json_schema = format.at("json_schema");
            CHECK(json_schema.at("name") == "article");
            CHECK(json_schema.at("schema") == article_schema);
            CHECK(json_schema.at("strict") == strict);
            CHECK(json_schema.size() == 3);
            // With json_schema the schema travels only there, not in the system prompt too.
            CHECK(body.at("messages").at(0).at("content") == "Extract the article.");
        }
    }

    // A server that only has JSON mode gets json_object, which the spec also lists, and the
    // schema in the system message.
    ullm::OpenAiChatOptions json_mode;
    json_mode.json_schema_output = false;
    const ullm::OpenAiChatProvider compatible(json_mode);
    const json body = compatible.encode_body(article_request("gpt-4o", true), false);
    CHECK(spec().check(body, "CreateChatCompletionRequest").empty());
    CHECK(body.at("response_format") == json({{"type", "json_object"}}));
    CHECK(spec().check(body.at("response_format"), "ResponseFormatJsonObject").empty());
    CHECK(body.at("messages").at(0).at("content").get<std::string>().find("\"sections\"") !=
          std::string::npos);

    // The checker looks inside response_format: a wrong type, a wrong strict and an invented
    // key are each refused.
    const json good = provider.encode_body(article_request("gpt-4o", true), false);
    json bogus = good;
    bogus["response_format"]["type"] = "json";
    CHECK_FALSE(spec().check(bogus, "CreateChatCompletionRequest").empty());
    bogus = good;
    bogus["response_format"]["json_schema"]["strict"] = "yes";
    CHECK_FALSE(spec().check(bogus, "CreateChatCompletionRequest").empty());
    bogus = good;
    bogus["response_format"]["json_schema"]["format"] = "strict";
    CHECK_FALSE(spec().check(bogus, "CreateChatCompletionRequest").empty());
    bogus = good;
    bogus["response_format"]["json_schema"].erase("name");
    CHECK_FALSE(spec().check(bogus, "CreateChatCompletionRequest").empty());
}

TEST_CASE("structured output conformance: Responses sends text.format",
          "[structured_output_conformance][structured_output][openai_responses][spec]") {
    const ullm::OpenAiResponsesProvider provider;
    for (const bool strict : {true, false}) {
        for (const bool stream : {false, true}) {
            INFO("strict " << strict << ", stream " << stream);
            const auto request = article_request("gpt-4.1", strict);
            const json body = provider.encode_body(request, stream);
            INFO(body.dump(2));
            CHECK(undeclared_keys(spec(), body, "CreateResponse").empty());
            const std::string why = spec().check(body, "CreateResponse");
            INFO(why);
            CHECK(why.empty());

            // Responses has no response_format: the format is text.format, flat.
            CHECK_FALSE(body.contains("response_format"));
            REQUIRE(body.contains("text"));
            CHECK(spec().check(body.at("text"), "ResponseTextParam").empty());
            const json& format = body.at("text").at("format");
            CHECK(spec().check(format, "TextResponseFormatJsonSchema").empty());
            CHECK(format.at("type") == "json_schema");
            CHECK(format.at("name") == "article");
            CHECK(format.at("schema") == article_schema);
            CHECK(format.at("strict") == strict);
            CHECK(format.size() == 4);
            CHECK_FALSE(format.contains("json_schema"));
        }
    }

    // The checker looks inside text.format: the Chat form nested in it, a missing name and a
    // wrong type are each refused.
    const json good = provider.encode_body(article_request("gpt-4.1", true), false);
    json bogus = good;
    bogus["text"]["format"] = {{"type", "json_schema"},
                               {"json_schema", {{"name", "article"}, {"schema", article_schema}}}};
    CHECK_FALSE(spec().check(bogus, "CreateResponse").empty());
    bogus = good;
    bogus["text"]["format"].erase("name");
    CHECK_FALSE(spec().check(bogus, "CreateResponse").empty());
    bogus = good;
    bogus["text"]["format"]["type"] = "json";
    CHECK_FALSE(spec().check(bogus, "CreateResponse").empty());
}

TEST_CASE("structured output conformance: Gemini sends responseMimeType and responseJsonSchema",
          "[structured_output_conformance][structured_output][gemini][spec]") {
    const ullm::GeminiProvider provider;
    for (const bool strict : {true, false}) {
        for (const bool stream : {false, true}) {
            INFO("strict " << strict << ", stream " << stream);
            const auto request = article_request("gemini-2.5-flash", strict);
            const json body = provider.encode_body(request, stream);
            INFO(body.dump(2));
            CHECK(undeclared_keys(gemini_spec(), body, "GenerateContentRequest").empty());
            const std::string why = gemini_spec().check(body, "GenerateContentRequest");
            INFO(why);
            CHECK(why.empty());

            const json& config = body.at("generationConfig");
            CHECK(gemini_spec().check(config, "GenerationConfig").empty());
            CHECK(config.at("responseMimeType") == "application/json");
            // The schema is already in the form Gemini's JSON Schema field takes ($defs, $ref
            // alone, type lists), so it goes unchanged.
            CHECK(config.at("responseJsonSchema") == article_schema);
            // Not the OpenAPI-subset field, which would refuse $defs and type lists.
            CHECK_FALSE(config.contains("responseSchema"));
            CHECK(config.at("maxOutputTokens") == 400);
            CHECK_FALSE(body.contains("response_format"));
        }
    }

    // The checker is not vacuous here either: a misspelt field and a wrong type are refused.
    const json good = provider.encode_body(article_request("gemini-2.5-flash", true), false);
    json bogus = good;
    bogus["generationConfig"]["responseJsonSchemas"] = article_schema;
    CHECK_FALSE(gemini_spec().check(bogus, "GenerateContentRequest").empty());
    bogus = good;
    bogus["generationConfig"]["responseMimeType"] = 1;
    CHECK_FALSE(gemini_spec().check(bogus, "GenerateContentRequest").empty());
    bogus = good;
    bogus["generationConfig"]["responseJsonSchema"] = "article";
    CHECK_FALSE(gemini_spec().check(bogus, "GenerateContentRequest").empty());
    bogus = good;
    bogus["response_format"] = {{"type", "json_schema"}};
    CHECK_FALSE(gemini_spec().check(bogus, "GenerateContentRequest").empty());
}

}  // namespace structured_output_conformance_test
