#include "json_readers.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace ullm::detail {

std::int64_t count_field(const json& object, std::string_view key) {
    if (!object.is_object()) return 0;
    const auto it = object.find(key);
    if (it == object.end()) return 0;
    if (it->is_number_unsigned()) {
        const auto value = it->get<std::uint64_t>();
        return value > static_cast<std::uint64_t>(INT64_MAX) ? INT64_MAX
                                                             : static_cast<std::int64_t>(value);
    }
    if (it->is_number_integer()) return std::max<std::int64_t>(0, it->get<std::int64_t>());
    if (it->is_number_float()) {
        const double value = it->get<double>();
        if (!std::isfinite(value) || value <= 0) return 0;
        return value >= 9.2e18 ? INT64_MAX : static_cast<std::int64_t>(value);
    }
    return 0;
}

std::string string_field(const json& object, std::string_view key) {
    if (!object.is_object()) return {};
    const auto it = object.find(key);
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string_view string_view_field(const json& object, std::string_view key) {
    if (!object.is_object()) return {};
    const auto it = object.find(key);
    return it != object.end() && it->is_string()
               ? std::string_view(it->get_ref<const std::string&>())
               : std::string_view();
}

std::string take_string_field(json& object, std::string_view key) {
    if (!object.is_object()) return {};
    const auto it = object.find(key);
    return it != object.end() && it->is_string() ? std::move(it->get_ref<std::string&>())
                                                 : std::string();
}

const json* array_field(const json& object, std::string_view key) {
    if (!object.is_object()) return nullptr;
    const auto it = object.find(key);
    return it != object.end() && it->is_array() ? &*it : nullptr;
}

const json* object_field(const json& object, std::string_view key) {
    if (!object.is_object()) return nullptr;
    const auto it = object.find(key);
    return it != object.end() && it->is_object() ? &*it : nullptr;
}

}  // namespace ullm::detail
