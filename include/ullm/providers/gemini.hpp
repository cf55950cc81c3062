#pragma once

/// The Google Gemini adapter (Gemini Developer API, `models/{model}:generateContent` and
/// `models/{model}:streamGenerateContent?alt=sse`).
///
/// How canonical requests and responses map onto Gemini:
/// - The system prompt and any system messages become `systemInstruction` (one text part
///   each, in order); user and tool messages become `user` turns, assistant messages `model`
///   turns; adjacent turns of the same role are merged, as Gemini wants roles to alternate.
/// - Tool results become `functionResponse` parts (`name`, `response`, and `id` only when the
///   call came with a Gemini id), ordered like the calls of the model turn they answer, since
///   Gemini matches them by name and order. An object result is sent as the `response`; any
///   other result as `{"output": result}`; an error result as `{"error": result}` (Gemini's
///   documented `output` / `error` keys). Call arguments that are not a JSON object (a model
///   that produced malformed arguments) go back as `args: {"arguments": <as received>}`.
/// - Images and documents: base64 data (or a `data:` URL) become `inlineData`; other URLs
///   (`https://`, `gs://`, Files API URIs) become `fileData`. A document's `name` is not sent.
/// - Tools are declared as `functionDeclarations` with `parametersJsonSchema` (JSON Schema,
///   not the OpenAPI-subset `parameters`), so every schema ullm's validator accepts keeps its
///   meaning. Gemini's documented limits are bridged: a `$ref` with sibling keywords is
///   wrapped as `{"anyOf": [{"$ref": …}], …siblings}`; `definitions` are renamed `$defs`;
///   `const` becomes a one-value `enum`. Keywords Gemini ignores (e.g. `pattern`) are still
///   enforced on the arguments by ullm's validator. Structured output uses the same
///   translation in `generationConfig.responseJsonSchema` with `responseMimeType:
///   application/json`; `ResponseFormat::name` and `strict` are not sent (Gemini always
///   constrains the output).
/// - `ToolChoice` → `toolConfig.functionCallingConfig.mode`: automatic `AUTO`, none `NONE`,
///   required `ANY`, a named tool `ANY` with `allowedFunctionNames`.
/// - `provider_options` are merged into the body: `generationConfig` and `toolConfig` are
///   deep-merged (objects merge key by key, the option wins at the leaves, a `null` removes a
///   key, so `{"generationConfig": {"thinkingConfig": {…}}}` keeps `maxOutputTokens`); `tools` are
///   appended (e.g. `[{"googleSearch": {}}]` beside the function declarations); any other key
///   replaces what the adapter wrote.
///
/// Responses:
/// - `text` parts → text, `thought: true` parts → reasoning (visible thought summaries),
///   `functionCall` → tool calls. Tool calls are detected by content: Gemini says `STOP` when
///   the model calls a tool, which becomes `tool_call`. `MAX_TOKENS` → `length`; `SAFETY`,
///   `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`, `LANGUAGE` and the image
///   variants, and a `promptFeedback.blockReason` → `content_filter`; `MALFORMED_FUNCTION_CALL`
///   and any other reason → `error`.
/// - Code execution (`executableCode`, `codeExecutionResult`), generated media (`inlineData`,
///   `fileData`) and other part kinds have no canonical form: they are not in the message's
///   parts or text, but are kept verbatim in the replay state (below) so that the same model
///   sees them again.
/// - Gemini often gives a call no id. Such a call gets a synthesised id,
///   `gemini_call_<hash of responseId>_<n>` (`gemini_call_<n>` without a responseId, `n`
///   counting past the calls already in the request), never equal to an id already in the
///   request's history. When the result goes back, the `functionResponse` carries the
///   original Gemini id if there was one, and no id otherwise.
/// - Usage: input = `promptTokenCount` (cached tokens included) + `toolUsePromptTokenCount`;
///   cached read = `cachedContentTokenCount`; output = `candidatesTokenCount` +
///   `thoughtsTokenCount` (thoughts are billed as output); reasoning = `thoughtsTokenCount`.
///   `modelVersion` → model; `responseId` → request id.
///
/// Replay state (`Message::replay`, provider = the provider name, model = the requested model
/// without a `models/` prefix) records how the model turn was laid out, so that it can be sent
/// back exactly: `data = {"parts": [entry…]}` with one entry per Gemini part, in order —
/// `{"part": i}` for canonical part `i` of the message, or `{"raw": {…}}` for a part with no
/// canonical form, kept verbatim — each entry optionally with the `thoughtSignature` that came
/// on that part and, for a call, the Gemini `id`. Streamed pieces of one text are one part: a
/// signature that arrives on a later piece, or alone on an empty-text part, belongs to the text
/// part it follows (and is kept as its own empty part when it follows no text). Signatures are
/// sent back verbatim on exactly their parts, only when the same provider and exact model
/// receive the message again; any other model gets the canonical parts only (no signatures,
/// no thought parts, no raw parts, no call ids). A layout that no longer matches the message's
/// parts (e.g. parts were removed) is ignored the same way. Signatures never appear in
/// canonical parts, text, deltas or tool arguments; only the replay sidecar of the message
/// (also in the `done` event's response, so that it can be committed) holds them.
///
/// Streams: each SSE event is a whole `GenerateContentResponse` chunk. Calls usually arrive
/// whole (`tool_call_start`, one `tool_call_delta` with the arguments' JSON text,
/// `tool_call_end`); Vertex-style streamed arguments (`partialArgs` with `jsonPath`,
/// `willContinue`) are assembled and emitted the same way when the call completes. A stream is
/// complete once a chunk carried a `finishReason` (or a prompt block); it ends with exactly one
/// `done`, or `StreamTruncatedError` when no chunk finished it. An `error` object in the stream
/// throws the mapped error. A body that starts with `[` is read as the JSON-array stream form
/// (`streamGenerateContent` without `alt=sse`); `decode` accepts that form as a whole body too.
///
/// Errors: `{"error": {"code", "message", "status", "details"}}` maps through
/// `throw_provider_failure`: the HTTP status (or, inside a 200 body or stream, the `code`, else
/// the status the gRPC `status` implies: RESOURCE_EXHAUSTED 429, INVALID_ARGUMENT 400,
/// UNAVAILABLE 503, INTERNAL 500, PERMISSION_DENIED 403, UNAUTHENTICATED 401, …); an invalid
/// API key (`ErrorInfo.reason` `API_KEY_INVALID`, sent as HTTP 400) is an authentication
/// failure; `retry_after` comes from `Retry-After`, else from `RetryInfo.retryDelay`.

#include <ullm/http/http_types.hpp>
#include <ullm/providers/provider.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

namespace ullm {

/// Settings of a `GeminiProvider`. A value type.
struct GeminiOptions {
    /// Sent in the `x-goog-api-key` header (never in the URL) when not empty.
    std::string api_key;
    /// Everything before `/models/…`. The adapter targets `v1beta`, where
    /// `parametersJsonSchema` and `responseJsonSchema` exist.
    std::string base_url = "https://generativelanguage.googleapis.com/v1beta";
    /// The provider name used in routing, errors and replay binding.
    std::string provider_name = "gemini";
    HttpHeaders extra_headers;  ///< Sent with every request.
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
    std::chrono::milliseconds idle_timeout{std::chrono::seconds(120)};
};

/// The Gemini `generateContent` API: encodes canonical requests, decodes bodies and streams.
/// Immutable and thread-safe.
class GeminiProvider final : public Provider {
public:
    explicit GeminiProvider(GeminiOptions options = {});

    [[nodiscard]] std::string_view name() const noexcept override;
    /// Every Gemini model streams and takes images and documents; Gemma 1–3 models take no
    /// tools and no structured output; Gemini 2.5 and later (and the `-latest` aliases) report
    /// reasoning.
    [[nodiscard]] ProviderCapabilities capabilities(std::string_view model) const override;
    /// Throws `ProviderCapabilityError`: `invalid_model` for an empty model or one with
    /// characters that do not belong in a URL path segment; `invalid_tool_choice` for a forced
    /// tool call without tools or naming an unknown tool; `unsupported_option` for more than 5
    /// stop sequences, a `data:` URL that is not base64, and what `capabilities` rules out;
    /// `invalid_provider_options` when `provider_options` (or its `generationConfig`,
    /// `toolConfig`, `tools`) has the wrong type; `invalid_max_tokens`, `invalid_temperature`
    /// as every adapter. Throws `ToolDefinitionError` for invalid tools.
    [[nodiscard]] HttpRequest encode(const ChatRequest& request, bool stream) const override;
    /// Decodes a `generateContent` body (or the JSON-array form of a streamed one). Throws the
    /// mapped `Error` for an error status or error body, and `ProviderError`
    /// (`invalid_provider_response`) for a body that is not a `GenerateContentResponse`.
    [[nodiscard]] ChatResponse decode(const HttpResponse& response,
                                      const ChatRequest& request) const override;
    [[nodiscard]] std::unique_ptr<StreamDecoder> stream_decoder(
        const ChatRequest& request) const override;
    /// Embeddings: one input through `models/{model}:embedContent`, more (at most 100 a
    /// request) through `:batchEmbedContents`; `dimensions` as `outputDimensionality`, the task
    /// as `taskType` (`RETRIEVAL_QUERY`, …). Gemini returns JSON numbers (no base64 form); usage is
    /// `usageMetadata.promptTokenCount` when the answer carries it, else zero (and unpriced).
    /// Its `check` throws `invalid_model` as `encode` does.
    [[nodiscard]] const EmbeddingCodec* embeddings() const noexcept override;

    /// The request body alone (what `encode` sends), for inspection and tests. Throws as
    /// `encode` does.
    [[nodiscard]] json encode_body(const ChatRequest& request, bool stream) const;

    [[nodiscard]] const GeminiOptions& options() const noexcept { return options_; }

private:
    GeminiOptions options_;
    std::shared_ptr<const EmbeddingCodec> embeddings_;
};

}  // namespace ullm
