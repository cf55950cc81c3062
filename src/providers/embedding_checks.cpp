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
        // A double past float's range would become an infinity.
        if (!value.is_number() || !std::isfinite(number) ||
            std::fabs(number) > static_cast<double>(std::numeric_limits<float>::max())) {
            out.resize(first);
            return "element " + std::to_string(i) + " is not a finite float32 number";
        }
        out.push_back(static_cast<float>(number));
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
