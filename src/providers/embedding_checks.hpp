#pragma once

// Internal to the embedding codecs: what every provider's answer must satisfy before a vector
// of it is handed on.

#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/providers/embedding.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace ullm::detail {

/// Appends the numbers of the JSON array `values` to `out` as float; returns "" on success,
/// else why it is not a vector (not an array, an element that is not a number, a number that
/// is not finite as a float32). `out` is unchanged on failure.
[[nodiscard]] std::string decode_json_floats(const json& values, std::vector<float>& out);

/// Throws `ProviderError` `invalid_provider_response` unless `count` embeddings answer the
/// inputs of `request`, one each.
void check_embedding_count(std::size_t count, const EmbeddingRequest& request,
                           const ErrorOrigin& origin);

/// Throws `ProviderError` `invalid_provider_response` unless `vectors` holds one vector per
/// input of `request`, all of one non-zero length (`request.dimensions` when set), every value
/// finite.
void check_embedding_vectors(const std::vector<std::vector<float>>& vectors,
                             const EmbeddingRequest& request, const ErrorOrigin& origin);

}  // namespace ullm::detail
