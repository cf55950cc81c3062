// The background codec of the OpenAI Responses adapter: queued, running, cancelled and failed
// bodies; the retrieve, cancel and resume requests; and streams that are resumed, by the same
// decoder or by one that joins late, without an event repeated or lost.

#include <ullm/core/error.hpp>
#include <ullm/detail/redact.hpp>
#include <ullm/providers/openai_responses.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/fixtures.hpp"

namespace openai_responses_background_test {

using ullm::json;
using Type = ullm::StreamEvent::Type;
using ullm::test::error_code_of;

namespace {

ullm::ChatRequest request_for(std::string model = "gpt-4.1") {
    ullm::ChatRequest request;
    request.model = std::move(model);
    return request;
}

ullm::HttpResponse body_response(const json& body, int status = 200,
                                 ullm::HttpHeaders headers = {}) {
    ullm::HttpResponse response;
    response.status = status;
    response.headers = std::move(headers);
    response.body = body.dump();
    return response;
}

const json& openapi() {
    static const json spec =
        json::parse(ullm::test::read_file(ullm::test::fixtures_dir() / "specs" / "openapi.json"));
    return spec;
}

// The spec's own example of a cancelled background response (what `POST /cancel` returns),
// turned into one with `status`; unless finished, with no output and no usage yet.
json example_as(const std::string& status) {
    json body = json::parse(openapi()
                                .at("paths")
                                .at("/responses/{response_id}/cancel")
                                .at("post")
                                .at("x-oaiMeta")
                                .at("examples")
                                .at("response")
                                .get<std::string>());
    body["status"] = status;
    if (status == "queued" || status == "in_progress") body["output"] = json::array();
    if (status == "completed") {
        body["usage"] = {{"input_tokens", 36},
                         {"input_tokens_details", {{"cached_tokens", 0}}},
                         {"output_tokens", 22},
                         {"output_tokens_details", {{"reasoning_tokens", 0}}},
                         {"total_tokens", 58}};
    }
    return body;
}

const ullm::OpenAiResponsesProvider& provider() {
    static const ullm::OpenAiResponsesProvider instance(
        ullm::OpenAiResponsesOptions{.api_key = "sk-bg-secret-0123456789",
                                     .base_url = "https://api.example.test/v1/",
                                     .organization = "org-1"});
    return instance;
}

// One background stream: each event numbered by its place, framed as the API frames them.
const std::vector<json>& background_events() {
    static const std::vector<json> events = [] {
        const json message = {{"id", "msg_1"},
                              {"type", "message"},
                              {"status", "completed"},
                              {"role", "assistant"},
                              {"content",
                               {{{"type", "output_text"},
                                 {"text", "Hello, world"},
                                 {"annotations", json::array()}}}}};
        const json call = {{"id", "fc_1"},          {"type", "function_call"},
                           {"status", "completed"}, {"call_id", "call_1"},
                           {"name", "weather"},     {"arguments", R"({"city":"Paris"})"}};
        json running = {{"id", "resp_bg"},    {"object", "response"}, {"status", "queued"},
                        {"background", true}, {"model", "gpt-4.1"},   {"output", json::array()},
                        {"usage", nullptr}};
        json in_progress = running;
        in_progress["status"] = "in_progress";
        json added_call = call;
        added_call["arguments"] = "";
        added_call["status"] = "in_progress";
        json completed = running;
        completed["status"] = "completed";
        completed["output"] = {message, call};
        completed["usage"] = {{"input_tokens", 12}, {"output_tokens", 9}};
        const json part = {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}};
        std::vector<json> list = {
            {{"type", "response.created"}, {"response", running}},
            {{"type", "response.queued"}, {"response", running}},
            {{"type", "response.in_progress"}, {"response", in_progress}},
            {{"type", "response.output_item.added"},
             {"output_index", 0},
             {"item",
              {{"id", "msg_1"},
               {"type", "message"},
               {"status", "in_progress"},
               {"role", "assistant"},
               {"content", json::array()}}}},
            {{"type", "response.content_part.added"},
             {"item_id", "msg_1"},
             {"output_index", 0},
             {"content_index", 0},
             {"part", part}},
            {{"type", "response.output_text.delta"},
             {"item_id", "msg_1"},
             {"output_index", 0},
             {"content_index", 0},
             {"delta", "Hel"}},
            {{"type", "response.output_text.delta"},
             {"item_id", "msg_1"},
             {"output_index", 0},
             {"content_index", 0},
             {"delta", "lo, "}},
            {{"type", "response.output_text.delta"},
             {"item_id", "msg_1"},
             {"output_index", 0},
             {"content_index", 0},
             {"delta", "world"}},
            {{"type", "response.output_text.done"},
             {"item_id", "msg_1"},
             {"output_index", 0},
             {"content_index", 0},
             {"text", "Hello, world"}},
            {{"type", "response.content_part.done"},
             {"item_id", "msg_1"},
             {"output_index", 0},
             {"content_index", 0},
             {"part", message["content"][0]}},
            {{"type", "response.output_item.done"}, {"output_index", 0}, {"item", message}},
            {{"type", "response.output_item.added"}, {"output_index", 1}, {"item", added_call}},
            {{"type", "response.function_call_arguments.delta"},
             {"item_id", "fc_1"},
             {"output_index", 1},
             {"delta", R"({"city":)"}},
            {{"type", "response.function_call_arguments.delta"},
             {"item_id", "fc_1"},
             {"output_index", 1},
             {"delta", R"("Paris"})"}},
            {{"type", "response.function_call_arguments.done"},
             {"item_id", "fc_1"},
             {"output_index", 1},
             {"arguments", R"({"city":"Paris"})"}},
            {{"type", "response.output_item.done"}, {"output_index", 1}, {"item", call}},
            {{"type", "response.completed"}, {"response", completed}},
        };
        for (std::size_t i = 0; i < list.size(); ++i) list[i]["sequence_number"] = i;
        return list;
    }();
    return events;
}

std::string frame(const json& event) {
    return "event: " + event["type"].get<std::string>() + "\ndata: " + event.dump() + "\n\n";
}

// The wire bytes of the events numbered after `after` (all when negative).
std::string wire_after(std::int64_t after) {
    std::string wire;
    for (const auto& event : background_events()) {
        if (event["sequence_number"].get<std::int64_t>() > after) wire += frame(event);
    }
    return wire;
}

std::vector<ullm::StreamEvent> decode_whole(const ullm::ChatRequest& request = request_for()) {
    auto decoder = provider().stream_decoder(request);
    std::vector<ullm::StreamEvent> events;
    decoder->feed(wire_after(-1), events);
    decoder->finish(events);
    return events;
}

std::string joined(const std::vector<ullm::StreamEvent>& events, Type type) {
    std::string out;
    for (const auto& event : events) {
        if (event.type == type) out += event.delta;
    }
    return out;
}

// The tool-call rules the client holds every stream to: a call starts once, its deltas and end
// follow its start, and `done` holds exactly the calls that ended.
void check_call_order(const std::vector<ullm::StreamEvent>& events) {
    std::set<std::string> open;
    std::set<std::string> ended;
    for (const auto& event : events) {
        if (event.type == Type::tool_call_start) {
            CHECK(open.insert(event.tool_call_id).second);
            CHECK(ended.count(event.tool_call_id) == 0);
        } else if (event.type == Type::tool_call_delta) {
            CHECK(open.count(event.tool_call_id) == 1);
        } else if (event.type == Type::tool_call_end) {
            CHECK(open.erase(event.tool_call_id) == 1);
            ended.insert(event.tool_call_id);
        } else if (event.type == Type::done) {
            CHECK(open.empty());
            std::set<std::string> final_calls;
            for (const auto& call : event.response->tool_calls) final_calls.insert(call.id);
            CHECK(final_calls == ended);
        }
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Bodies

TEST_CASE("a queued or running background response decodes as unfinished, without content",
          "[openai_responses][background]") {
    for (const std::string status : {"queued", "in_progress"}) {
        INFO(status);
        const json body = example_as(status);
        const auto response =
            provider().decode(body_response(body, 200, {{"x-request-id", "req_9"}}), request_for());
        CHECK(response.status == (status == "queued" ? ullm::ResponseStatus::queued
                                                     : ullm::ResponseStatus::in_progress));
        CHECK_FALSE(response.finished());
        CHECK(response.response_id == body["id"]);
        CHECK(response.request_id == "req_9");
        CHECK(response.text.empty());
        CHECK(response.message.parts.empty());
        CHECK(response.message.role == ullm::Role::assistant);
        CHECK(response.tool_calls.empty());
        CHECK(response.usage == ullm::Usage{});
        CHECK(response.raw_finish_reason == status);
        CHECK(response.model == body["model"]);
        CHECK(response.provider == "openai");
        CHECK(ullm::to_string(response.status) == status);
        json null_usage = body;
        null_usage["usage"] = nullptr;
        CHECK(provider().decode(body_response(null_usage), request_for()).usage == ullm::Usage{});
    }
    // What a running response already holds is not final: it is not shown, nor is its usage.
    json running = example_as("completed");
    running["status"] = "in_progress";
    const auto partial = provider().decode(body_response(running), request_for());
    CHECK(partial.status == ullm::ResponseStatus::in_progress);
    CHECK(partial.text.empty());
    CHECK(partial.usage == ullm::Usage{});
    // Without output at all (a server that leaves it out while queued).
    CHECK(provider()
              .decode(body_response({{"id", "resp_q"}, {"status", "queued"}}), request_for())
              .status == ullm::ResponseStatus::queued);
    // Without an id it could never be polled.
    CHECK(error_code_of([&] {
              (void)provider().decode(
                  body_response({{"status", "queued"}, {"output", json::array()}}), request_for());
          }) == "invalid_provider_response");
}

TEST_CASE("a finished background response carries its id and status; cancelled and failed ones",
          "[openai_responses][background]") {
    const json completed = example_as("completed");
    const auto finished = provider().decode_retrieved(body_response(completed), request_for());
    CHECK(finished.finished());
    CHECK(finished.response_id == completed["id"]);
    CHECK(finished.text.find("Digital dawn breaks.") != std::string::npos);
    CHECK(finished.usage.input_tokens > 0);

    // Cancelled: the content it had, its status, finish reason `error`.
    json cancelled = example_as("cancelled");
    const auto stopped = provider().decode_retrieved(body_response(cancelled), request_for());
    CHECK(stopped.status == ullm::ResponseStatus::cancelled);
    CHECK_FALSE(stopped.finished());
    CHECK(stopped.text == finished.text);
    CHECK(stopped.finish_reason == ullm::FinishReason::error);
    CHECK(stopped.raw_finish_reason == "cancelled");
    cancelled.erase("output");
    CHECK(provider().decode_retrieved(body_response(cancelled), request_for()).status ==
          ullm::ResponseStatus::cancelled);

    // Failed: the mapped error of the response's error.
    json failed = example_as("failed");
    failed["error"] = {{"code", "server_error"}, {"message", "The model crashed"}};
    CHECK(error_code_of([&] {
              (void)provider().decode_retrieved(body_response(failed), request_for());
          }) == "provider_error");
    failed["error"] = {{"code", "rate_limit_exceeded"}, {"message", "slow down"}};
    CHECK(error_code_of([&] {
              (void)provider().decode_retrieved(body_response(failed), request_for());
          }) == "rate_limited");
    // An id the server does not know, and an error status.
    const json missing = {{"error",
                           {{"message", "Response with id 'resp_x' not found."},
                            {"type", "invalid_request_error"},
                            {"code", nullptr}}}};
    CHECK(error_code_of([&] {
              (void)provider().decode_retrieved(body_response(missing, 404), request_for());
          }) == "invalid_request");
    CHECK(error_code_of([&] {
              (void)provider().decode_retrieved(body_response(missing, 503), request_for());
          }) == "provider_error");
}

// ---------------------------------------------------------------------------------------
// Requests

TEST_CASE("retrieve, cancel and resume requests are the documented endpoints",
          "[openai_responses][background][encode]") {
    const json& paths = openapi().at("paths");
    std::set<std::string> query;
    for (const auto& parameter : paths.at("/responses/{response_id}").at("get").at("parameters")) {
        if (parameter.at("in") == "query") query.insert(parameter.at("name"));
    }
    CHECK(query.count("stream") == 1);
    CHECK(query.count("starting_after") == 1);
    CHECK(query.count("include") == 1);
    CHECK(paths.at("/responses/{response_id}/cancel").contains("post"));

    const auto request = request_for();
    const auto retrieve = provider().encode_retrieve(request, "resp_123");
    CHECK(retrieve.method == "GET");
    CHECK(retrieve.url == "https://api.example.test/v1/responses/resp_123");
    CHECK(retrieve.body.empty());
    CHECK(ullm::find_header(retrieve.headers, "authorization") == "Bearer sk-bg-secret-0123456789");
    CHECK(ullm::find_header(retrieve.headers, "openai-organization") == "org-1");
    CHECK_FALSE(ullm::find_header(retrieve.headers, "content-type"));
    CHECK_FALSE(ullm::find_header(retrieve.headers, "accept"));
    const auto secrets = ullm::detail::request_secrets(retrieve);
    CHECK(std::find(secrets.begin(), secrets.end(), "sk-bg-secret-0123456789") != secrets.end());

    // A reasoning model's response is fetched with its encrypted reasoning, as it was asked for.
    CHECK(
        provider().encode_retrieve(request_for("o4-mini"), "resp_123").url ==
        "https://api.example.test/v1/responses/resp_123?include%5B%5D=reasoning.encrypted_content");

    const auto cancel = provider().encode_cancel(request, "resp_123");
    CHECK(cancel.method == "POST");
    CHECK(cancel.url == "https://api.example.test/v1/responses/resp_123/cancel");
    CHECK(cancel.body.empty());
    CHECK(ullm::find_header(cancel.headers, "authorization") == "Bearer sk-bg-secret-0123456789");

    const auto resume = provider().encode_resume(request, {"resp_123", 41});
    CHECK(resume.method == "GET");
    CHECK(resume.url ==
          "https://api.example.test/v1/responses/resp_123?stream=true&starting_after=41");
    CHECK(resume.body.empty());
    CHECK(ullm::find_header(resume.headers, "accept") == "text/event-stream");
    CHECK(provider().encode_resume(request, {"resp_123", -1}).url ==
          "https://api.example.test/v1/responses/resp_123?stream=true");
    CHECK(provider().encode_resume(request_for("gpt-5"), {"resp_123", 0}).url ==
          "https://api.example.test/v1/responses/"
          "resp_123?include%5B%5D=reasoning.encrypted_content&stream=true&starting_after=0");
}

TEST_CASE("a response id that could not be one is refused before anything is sent",
          "[openai_responses][background][encode]") {
    const auto request = request_for();
    for (const std::string& id :
         {std::string(), std::string("../files"), std::string("resp 1"), std::string("resp/1"),
          std::string("resp?x=1"), std::string("resp%2F"), std::string(257, 'a'),
          std::string("r\xc3\xa9sp")}) {
        INFO(id);
        CHECK(error_code_of([&] { (void)provider().encode_retrieve(request, id); }) ==
              "invalid_response_id");
        CHECK(error_code_of([&] { (void)provider().encode_cancel(request, id); }) ==
              "invalid_response_id");
        CHECK(error_code_of([&] {
                  (void)provider().encode_resume(request, {id, 3});
              }) == "invalid_response_id");
        CHECK(error_code_of([&] {
                  (void)provider().resumed_stream_decoder(request, {id, 3});
              }) == "invalid_response_id");
    }
    CHECK(error_code_of([&] {
              (void)provider().encode_retrieve(request, std::string(256, 'a'));
          }) == "no error");
    CHECK(provider().background() == &provider());
}

// ---------------------------------------------------------------------------------------
// Streams

TEST_CASE("a background stream numbers its events and knows where it can be resumed",
          "[openai_responses][background][stream]") {
    const auto events = decode_whole();
    CHECK(joined(events, Type::text_delta) == "Hello, world");
    for (const auto& event : events) {
        INFO(ullm::to_string(event.type));
        REQUIRE(event.sequence_number.has_value());
    }
    CHECK(events.front().sequence_number == 5);  // the first delta
    CHECK(events.back().sequence_number == 16);  // done, from response.completed
    CHECK(events.back().response->response_id == "resp_bg");
    check_call_order(events);

    auto decoder = provider().stream_decoder(request_for());
    std::vector<ullm::StreamEvent> out;
    CHECK_FALSE(decoder->resume_position());  // no id yet
    decoder->feed(wire_after(-1).substr(0, frame(background_events()[0]).size()), out);
    CHECK(decoder->resume_position() == ullm::StreamPosition{"resp_bg", 0});
    decoder->feed(frame(background_events()[1]), out);
    CHECK(decoder->resume_position() == ullm::StreamPosition{"resp_bg", 1});

    // A stream that is not a background one cannot be resumed...
    std::string foreground;
    for (auto event : background_events()) {
        if (event.contains("response")) event["response"]["background"] = false;
        foreground += frame(event);
    }
    auto plain = provider().stream_decoder(request_for());
    plain->feed(foreground.substr(0, foreground.size() / 2), out);
    CHECK_FALSE(plain->resume_position());
    CHECK_FALSE(plain->prepare_resume());
    // ...unless its request asked for the background.
    auto asked_request = request_for();
    asked_request.provider_options = {{"background", true}};
    auto asked = provider().stream_decoder(asked_request);
    asked->feed(foreground.substr(0, foreground.size() / 2), out);
    CHECK(asked->resume_position().has_value());
    // An event without a sequence number means a resumed stream could repeat it.
    auto unnumbered = provider().stream_decoder(request_for());
    json bare = background_events()[0];
    unnumbered->feed(frame(bare), out);
    bare.erase("sequence_number");
    bare["type"] = "response.in_progress";
    unnumbered->feed(frame(bare), out);
    CHECK_FALSE(unnumbered->resume_position());
    // Finished, it has nothing left to resume.
    auto whole = provider().stream_decoder(request_for());
    whole->feed(wire_after(-1), out);
    CHECK_FALSE(whole->resume_position());
}

TEST_CASE("a background stream cut at any byte and resumed yields every event exactly once",
          "[openai_responses][background][stream]") {
    const auto whole = decode_whole();
    const std::string wire = wire_after(-1);
    for (std::size_t cut = 1; cut < wire.size(); ++cut) {
        INFO("cut at byte " << cut);
        auto decoder = provider().stream_decoder(request_for());
        std::vector<ullm::StreamEvent> events;
        decoder->feed(std::string_view(wire).substr(0, cut), events);
        const auto position = decoder->resume_position();
        if (!position) {
            // Cut inside the first event: nothing says the response's id yet.
            CHECK(cut < frame(background_events()[0]).size());
            continue;
        }
        // Half the time the body stopped cleanly, half the time the connection dropped.
        if (cut % 2 == 0) {
            CHECK(error_code_of([&] { decoder->finish(events); }) == "stream_truncated");
        }
        REQUIRE(decoder->prepare_resume());
        // The server goes on after the position; repeating the event at it changes nothing.
        std::string resumed = wire_after(position->sequence_number);
        if (position->sequence_number >= 0) {
            resumed.insert(
                0, frame(background_events()[static_cast<std::size_t>(position->sequence_number)]));
        }
        decoder->feed(resumed, events);
        decoder->finish(events);
        REQUIRE(events.size() == whole.size());
        for (std::size_t i = 0; i < events.size(); ++i) {
            CHECK(events[i].type == whole[i].type);
            CHECK(events[i].delta == whole[i].delta);
            CHECK(events[i].tool_call_id == whole[i].tool_call_id);
            CHECK(events[i].sequence_number == whole[i].sequence_number);
        }
        CHECK(events.back().response->message == whole.back().response->message);
        CHECK(events.back().response->usage == whole.back().response->usage);
    }
}

TEST_CASE("a decoder that joins a background stream late yields what follows, and all at done",
          "[openai_responses][background][stream]") {
    const auto whole = decode_whole();
    const auto& final_response = *whole.back().response;
    for (std::int64_t after = -1; after < 16; ++after) {
        INFO("after event " << after);
        auto decoder = provider().resumed_stream_decoder(request_for(), {"resp_bg", after});
        CHECK(decoder->resume_position() == ullm::StreamPosition{"resp_bg", after});
        std::vector<ullm::StreamEvent> events;
        decoder->feed(wire_after(after), events);
        decoder->finish(events);
        REQUIRE_FALSE(events.empty());
        REQUIRE(events.back().type == Type::done);
        // The text that follows the position, never the text before it again.
        std::string expected_text;
        for (const auto& event : whole) {
            if (event.type == Type::text_delta && *event.sequence_number > after) {
                expected_text += event.delta;
            }
        }
        CHECK(joined(events, Type::text_delta) == expected_text);
        check_call_order(events);
        // The call arrives whole: started once, its arguments, ended, before `done`.
        std::string arguments;
        for (const auto& event : events) {
            if (event.type == Type::tool_call_delta) arguments += event.delta;
        }
        if (after < 15) CHECK(arguments.rfind(R"("Paris"})") != std::string::npos);
        CHECK(events.back().response->message == final_response.message);
        CHECK(events.back().response->usage == final_response.usage);
        CHECK(events.back().response->response_id == "resp_bg");
    }
}

TEST_CASE("a cancelled background stream and a bad sequence number fail with stable codes",
          "[openai_responses][background][stream]") {
    std::vector<ullm::StreamEvent> out;
    auto cancelled = provider().stream_decoder(request_for());
    json event = background_events()[2];
    event["type"] = "response.cancelled";
    event["response"]["status"] = "cancelled";
    CHECK(error_code_of([&] {
              cancelled->feed(frame(background_events()[0]) + frame(event), out);
          }) == "response_cancelled");

    auto terminal = provider().stream_decoder(request_for());
    event = background_events()[16];
    event["response"]["status"] = "cancelled";
    CHECK(error_code_of([&] { terminal->feed(frame(event), out); }) == "response_cancelled");

    for (const json& bad : {json(-1), json(std::uint64_t{1} << 60)}) {
        auto decoder = provider().stream_decoder(request_for());
        event = background_events()[0];
        event["sequence_number"] = bad;
        CHECK(error_code_of([&] { decoder->feed(frame(event), out); }) ==
              "invalid_provider_response");
    }
}

}  // namespace openai_responses_background_test
