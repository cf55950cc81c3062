#pragma once

/// Internal: vectors of little-endian IEEE-754 float32 as base64 text, the form OpenAI's
/// `encoding_format: "base64"` returns embeddings in.

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ullm::detail {

/// `values` as base64 (RFC 4648, standard alphabet, padded) of their little-endian float32
/// bytes.
[[nodiscard]] std::string encode_base64_floats(std::span<const float> values);

/// Decodes `text` (RFC 4648 base64, standard alphabet, padded) into little-endian float32
/// values, appended to `out` bit for bit. Returns an empty string on success, else why `text`
/// is not such a vector (its length is not a multiple of 4, a character outside the alphabet,
/// padding before the end, a byte count that is not a multiple of 4); `out` is then unchanged.
[[nodiscard]] std::string decode_base64_floats(std::string_view text, std::vector<float>& out);

}  // namespace ullm::detail
