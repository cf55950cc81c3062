#include "embedding_checks.hpp"

#include <ullm/providers/provider_errors.hpp>

#include <cmath>
#include <limits>

namespace ullm::detail {

std::string decode_json_floats(const json& values, std::vector<float>& out) {
    if (!values.is_array()) return "is not an array of numbers";
    const std::size_t first = out.size();
    out.reserve(first + values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
        const json& value = values[i];
        const double number =
            value.is_number() ? value.get<double>() : std::numeric_limits<double>::quiet_NaN();
        // Past float32's largest value by half a step (2^103) or more, a double would round
        // to an infinity; below that it rounds to the largest value, which the short form
        // float32 printers write (3.4028235e+38) lands just above as a double.
        constexpr double largest = std::numeric_limits<float>::max();
        constexpr double rounds_down_below = largest + 0x1p103;
        if (!value.is_number() || !std::isfinite(number) ||
            std::fabs(number) >= rounds_down_below) {
            out.resize(first);
            return "element " + std::to_string(i) + " is not a finite float32 number";
        }
        // (Casting a double beyond float's range is undefined, so the edge is set explicitly.)
        const float edge = std::numeric_limits<float>::max();
        out.push_back(std::fabs(number) <= largest ? static_cast<float>(number)
                                                   : (number < 0 ? -edge : edge));
    }
    return {};
}

void check_embedding_count(std::size_t count, const EmbeddingRequest& request,
                           const ErrorOrigin& origin) {
    if (count != request.inputs.size()) {
        throw_invalid_response("the response holds " + std::to_string(count) + " embeddings for " +
                                   std::to_string(request.inputs.size()) + " inputs",
                               origin);
    }
}

void check_embedding_vectors(const std::vector<std::vector<float>>& vectors,
                             const EmbeddingRequest& request, const ErrorOrigin& origin) {
    check_embedding_count(vectors.size(), request, origin);
    for (std::size_t i = 0; i < vectors.size(); ++i) {
        const auto& vector = vectors[i];
        if (vector.empty()) {
            throw_invalid_response("embedding " + std::to_string(i) + " is empty", origin);
        }
        if (request.dimensions && vector.size() != static_cast<std::size_t>(*request.dimensions)) {
            throw_invalid_response("embedding " + std::to_string(i) + " has " +
                                       std::to_string(vector.size()) + " dimensions, not the " +
                                       std::to_string(*request.dimensions) + " asked for",
                                   origin);
        }
        if (vector.size() != vectors.front().size()) {
            throw_invalid_response(
                "embedding " + std::to_string(i) + " has " + std::to_string(vector.size()) +
                    " dimensions where embedding 0 has " + std::to_string(vectors.front().size()),
                origin);
        }
        for (std::size_t k = 0; k < vector.size(); ++k) {
            if (!std::isfinite(vector[k])) {
                throw_invalid_response("embedding " + std::to_string(i) + " holds a value that " +
                                           "is not finite at " + std::to_string(k),
                                       origin);
            }
        }
    }
}

}  // namespace ullm::detail
