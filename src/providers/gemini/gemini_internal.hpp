#pragma once

// Internal to the Gemini adapter (gemini.cpp): what its components share, one source file each
// in this folder.

#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>
#include <ullm/http/http_types.hpp>
#include <ullm/providers/chat.hpp>
#include <ullm/providers/provider.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "../response_builder.hpp"

namespace ullm {
struct GeminiOptions;
}

namespace ullm::detail::gemini {

inline bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// The model id without the `models/` resource prefix: "models/gemini-2.5-flash" and
// "gemini-2.5-flash" name the same model.
inline std::string normalise_model(std::string_view model) {
    if (model.starts_with("models/")) model.remove_prefix(7);
    return std::string(model);
}

// The resource path of `model` in the URL: `models/<id>` or `tunedModels/<id>`. Throws
// `InvalidOptionError` (`invalid_model`) for ids that do not belong in a path segment
// (gemini.cpp).
std::string model_path(std::string_view model);

// A JSON POST of `body` to `url` with the API key header, the extra headers and the timeouts
// of `options` (gemini.cpp).
HttpRequest post_request(const GeminiOptions& options, std::string url, const json& body);

// The request id a response's headers carry (`x-request-id`, `x-goog-request-id`), or "".
std::string request_id_header(const HttpResponseHead& head);

// ---------------------------------------------------------------------------------------------
// Schemas (schema_translation.cpp): ullm's JSON Schema subset → what Gemini's
// `parametersJsonSchema` / `responseJsonSchema` accept.

// `schema` in the form Gemini's `parametersJsonSchema` / `responseJsonSchema` accept.
json translate_schema(const json& schema);

// Whether `model` takes `responseJsonSchema` (2.5 and later, and ids this version does not
// know); the older ones take `responseSchema` (openapi_schema.cpp).
bool takes_json_schema(std::string_view model);

// `schema` in the OpenAPI 3.0 subset of `responseSchema` (openapi_schema.cpp): references
// inlined, types upper-case, a "null" type or branch as `nullable`, a `propertyOrdering` per
// object, and the bounds the subset lacks said in the description. What it cannot say (a map,
// a schema without a type, a recursive reference, …) is refused with
// `unsupported_schema_keyword`, naming `provider`.
json openapi_schema(const json& schema, std::string_view provider);

// Whether a tool's parameters declare no argument at all (then the declaration goes without a
// schema, the form Gemini documents for argument-less functions).
bool declares_no_arguments(const json& schema);

// ---------------------------------------------------------------------------------------------
// Replay layout (replay_layout.cpp): how a model turn's Gemini parts map to canonical parts.

// One entry of a model turn's layout (see the header): a canonical part or a verbatim part.
struct LayoutEntry {
    std::optional<std::size_t> part;  // canonical part index
    json raw;                         // the Gemini part, when `part` is empty
    std::string signature;            // thoughtSignature that came on this part
    std::string provider_id;          // the functionCall id Gemini gave
};

json layout_to_json(const std::vector<LayoutEntry>& layout);

// The layout in `data` when it matches `message` exactly; nullopt otherwise (then the message
// goes out without replay state).
std::optional<std::vector<LayoutEntry>> layout_from_json(const json& data, const Message& message);

// ---------------------------------------------------------------------------------------------
// Encoding (contents_encoder.cpp): canonical messages → `contents` and `systemInstruction`.

// What the encoder knows about a call it sent, to answer it with a functionResponse.
struct SentCall {
    std::string name;
    std::string provider_id;  // empty: send no id
};

class ContentsEncoder {
public:
    ContentsEncoder(std::string_view provider, std::string model)
        : provider_(provider), model_(std::move(model)) {}

    void add(const Message& message);

    void add_system(const std::string& system);

    json& contents() { return contents_; }
    json& system_parts() { return system_parts_; }

private:
    void append(const char* role, json parts);

    json canonical_model_part(const Part& part, const LayoutEntry* entry);

    json encode_model_parts(const Message& message);

    json encode_results(const Message& message);

    std::string_view provider_;
    std::string model_;
    json contents_ = json::array();
    json system_parts_ = json::array();
    std::map<std::string, SentCall> calls_;  // canonical call id → what was sent
    std::vector<std::string> turn_calls_;    // canonical ids of the last model turn's calls
};

// ---------------------------------------------------------------------------------------------
// Errors (error_mapping.cpp).

// What an `{"error": …}` value says. `http_status` is the response status (2xx inside a body or
// stream that arrived with 200).
ProviderFailure failure_from_error(const json& error, int http_status,
                                   const HttpResponseHead* head);

// The error value of a body: `{"error": …}`, or the first element's in the array form.
const json* error_of(const json& body);

// Throws the mapped error of a response with a non-2xx status.
[[noreturn]] void throw_status_failure(const HttpResponse& response, const ErrorOrigin& origin);

// ---------------------------------------------------------------------------------------------
// Embeddings (embedding_codec.cpp): `embedContent` and `batchEmbedContents`.

std::shared_ptr<const EmbeddingCodec> make_embedding_codec(const GeminiOptions& options);

// ---------------------------------------------------------------------------------------------
// Decoding (turn_assembler.cpp, response_reader.cpp, stream_decoder.cpp).

// Hands out canonical ids for the calls of one response.
class CallIds {
public:
    explicit CallIds(const ChatRequest& request);

    /// Gemini's own id when it gave one that is still free; otherwise a synthesised one.
    std::string assign(const std::string& provider_id, const std::string& response_id);

private:
    std::set<std::string> used_;
    std::size_t prior_calls_ = 0;
    std::size_t synthesised_ = 0;
};

// Where streamed events go; `out == nullptr` for whole bodies.
struct EventSink {
    std::vector<StreamEvent>* out = nullptr;
    detail::VisibleEvents* visible = nullptr;

    void push(StreamEvent event) const {
        if (out != nullptr) visible->push(*out, std::move(event));
    }
};

// A call whose arguments are still streaming (`willContinue`).
struct PendingCall {
    std::size_t part = 0;
    json args = json::object();
    std::string open_string_path;  // a string value that continues in the next partial arg
};

// Turns Gemini parts into canonical parts plus the layout that replays them.
class TurnAssembler {
public:
    TurnAssembler(const ChatRequest& request, ErrorOrigin origin)
        : ids_(request), origin_(std::move(origin)) {}

    void set_response_id(const std::string& id);

    void add(const json& part, const EventSink& sink);

    /// Completes a call whose arguments were streaming.
    void close_call(const EventSink& sink);

    [[nodiscard]] const std::vector<Part>& parts() const noexcept { return parts_; }

    /// The replay data, or nullopt when the layout says nothing the parts do not.
    [[nodiscard]] std::optional<json> replay_data() const;

private:
    template <class PartType>
    static PartType* as(std::vector<Part>& parts, const LayoutEntry& entry) {
        return entry.part ? std::get_if<PartType>(&parts[*entry.part]) : nullptr;
    }

    void add_text(bool thought, const std::string& text, const std::string& signature,
                  const EventSink& sink);

    void add_call(const json& call, const std::string& signature, const EventSink& sink);

    static bool continues(const json& call);

    std::size_t layout_index_of(std::size_t part) const;

    void apply_arguments(const json& call);

    void apply_partial_argument(const json& argument);

    CallIds ids_;
    ErrorOrigin origin_;
    std::string response_id_;
    std::vector<Part> parts_;
    std::vector<LayoutEntry> layout_;
    std::optional<PendingCall> pending_;
};

// Reads GenerateContentResponse objects (a whole body, or the chunks of a stream) into one
// canonical response.
class ResponseReader {
public:
    ResponseReader(std::string provider, const ChatRequest& request, std::string request_id)
        : provider_(std::move(provider)),
          model_(normalise_model(request.model)),
          origin_{provider_, request.model, std::move(request_id)},
          assembler_(request, origin_) {}

    /// Reads one response object. `whole` is true for a generateContent body (which must
    /// carry candidates or a prompt block); `sink` gets the stream events.
    void read(const json& chunk, bool whole, const EventSink& sink);

    [[nodiscard]] bool finished() const noexcept { return builder_.has_finish(); }
    [[nodiscard]] ErrorOrigin origin() const { return origin_; }

    /// Completes any call still streaming (pushing its events to `sink`).
    void close(const EventSink& sink) { assembler_.close_call(sink); }

    [[nodiscard]] ChatResponse build();

private:
    void read_candidate(const json& candidate, const EventSink& sink);

    std::string provider_;
    std::string model_;
    ErrorOrigin origin_;
    TurnAssembler assembler_;
    detail::ResponseBuilder builder_;
};

/// The decoder of a `streamGenerateContent` stream (SSE, or the JSON-array form).
std::unique_ptr<StreamDecoder> make_stream_decoder(std::string provider,
                                                   const ChatRequest& request);

}  // namespace ullm::detail::gemini
