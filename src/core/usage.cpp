#include <ullm/core/usage.hpp>

#include <ullm/core/error.hpp>

#include "arithmetic.hpp"

#include <cmath>
#include <limits>

namespace ullm {

namespace {

std::int64_t parse_count(const json& object, const char* key, const std::string& path) {
    const auto it = object.find(key);
    if (it == object.end()) return 0;
    const std::string where = path + "/" + key;
    if (!it->is_number_integer()) {
        throw InvalidMessageError(where, "must be a non-negative integer");
    }
    if (it->is_number_unsigned()) {
        const auto value = it->get<std::uint64_t>();
        if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            throw InvalidMessageError(where, "is too large");
        }
        return static_cast<std::int64_t>(value);
    }
    const auto value = it->get<std::int64_t>();
    if (value < 0) throw InvalidMessageError(where, "must be a non-negative integer");
    return value;
}

}  // namespace

Usage& Usage::operator+=(const Usage& other) noexcept {
    input_tokens = detail::saturating_add(input_tokens, other.input_tokens);
    output_tokens = detail::saturating_add(output_tokens, other.output_tokens);
    cached_read_tokens = detail::saturating_add(cached_read_tokens, other.cached_read_tokens);
    cached_write_tokens = detail::saturating_add(cached_write_tokens, other.cached_write_tokens);
    reasoning_tokens = detail::saturating_add(reasoning_tokens, other.reasoning_tokens);
    if (other.cost_usd) cost_usd = cost_usd.value_or(0.0) + *other.cost_usd;
    return *this;
}

json usage_to_json(const Usage& usage) {
    json out = {{"input_tokens", usage.input_tokens},
                {"output_tokens", usage.output_tokens},
                {"cached_read_tokens", usage.cached_read_tokens},
                {"cached_write_tokens", usage.cached_write_tokens},
                {"reasoning_tokens", usage.reasoning_tokens}};
    out["cost_usd"] = usage.cost_usd ? json(*usage.cost_usd) : json(nullptr);
    return out;
}

Usage parse_usage(const json& value, const std::string& path) {
    if (!value.is_object()) throw InvalidMessageError(path, "usage must be an object");
    for (const auto& [key, _] : value.items()) {
        if (key != "input_tokens" && key != "output_tokens" && key != "cached_read_tokens" &&
            key != "cached_write_tokens" && key != "reasoning_tokens" && key != "cost_usd") {
            throw InvalidMessageError(path + "/" + key, "is not a usage field");
        }
    }
    Usage usage;
    usage.input_tokens = parse_count(value, "input_tokens", path);
    usage.output_tokens = parse_count(value, "output_tokens", path);
    usage.cached_read_tokens = parse_count(value, "cached_read_tokens", path);
    usage.cached_write_tokens = parse_count(value, "cached_write_tokens", path);
    usage.reasoning_tokens = parse_count(value, "reasoning_tokens", path);
    if (const auto it = value.find("cost_usd"); it != value.end() && !it->is_null()) {
        if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
            throw InvalidMessageError(path + "/cost_usd", "must be a finite non-negative number");
        }
        usage.cost_usd = it->get<double>();
    }
    return usage;
}

void to_json(json& out, const Usage& usage) {
    out = usage_to_json(usage);
}
void from_json(const json& in, Usage& usage) {
    usage = parse_usage(in);
}

}  // namespace ullm
