#include "schema_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

namespace ullm::detail::validation {

std::size_t code_points(std::string_view text) {
    return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
        return (static_cast<unsigned char>(c) & 0xC0U) != 0x80U;
    }));
}

bool is_non_negative_integer(const json& value) {
    if (value.is_number_unsigned()) return true;
    if (value.is_number_integer()) return value.get<std::int64_t>() >= 0;
    if (value.is_number_float()) {
        const double number = value.get<double>();
        return std::isfinite(number) && number >= 0 && std::floor(number) == number &&
               number <= 9007199254740992.0;
    }
    return false;
}

int compare_numbers(const json& a, const json& b) {
    if (a.is_number_integer() && b.is_number_integer()) {
        const bool a_unsigned = a.is_number_unsigned();
        const bool b_unsigned = b.is_number_unsigned();
        if (a_unsigned && b_unsigned) {
            const auto x = a.get<std::uint64_t>();
            const auto y = b.get<std::uint64_t>();
            return x < y ? -1 : (x > y ? 1 : 0);
        }
        if (!a_unsigned && !b_unsigned) {
            const auto x = a.get<std::int64_t>();
            const auto y = b.get<std::int64_t>();
            return x < y ? -1 : (x > y ? 1 : 0);
        }
        if (a_unsigned) return -compare_numbers(b, a);
        const auto x = a.get<std::int64_t>();  // signed
        if (x < 0) return -1;
        const auto ux = static_cast<std::uint64_t>(x);
        const auto y = b.get<std::uint64_t>();
        return ux < y ? -1 : (ux > y ? 1 : 0);
    }
    const auto x = a.get<long double>();
    const auto y = b.get<long double>();
    return x < y ? -1 : (x > y ? 1 : 0);
}

bool is_integer_value(const json& value) {
    if (value.is_number_integer()) return true;
    if (!value.is_number_float()) return false;
    const double number = value.get<double>();
    return std::isfinite(number) && std::floor(number) == number &&
           std::fabs(number) <= max_safe_integer;
}

bool is_multiple_of(const json& value, const json& divisor) {
    if (value.is_number_integer() && divisor.is_number_integer()) {
        if (divisor.is_number_unsigned() || divisor.get<std::int64_t>() > 0) {
            const auto d = divisor.get<std::uint64_t>();
            if (value.is_number_unsigned()) return value.get<std::uint64_t>() % d == 0;
            const auto v = value.get<std::int64_t>();
            // The magnitude of INT64_MIN does not fit int64_t; compute it unsigned.
            const std::uint64_t magnitude =
                v < 0 ? static_cast<std::uint64_t>(-(v + 1)) + 1U : static_cast<std::uint64_t>(v);
            return magnitude % d == 0;
        }
        return true;  // unvalidated schema: a non-positive divisor constrains nothing
    }
    const double d = divisor.get<double>();
    if (!(d > 0) || !std::isfinite(d)) return true;
    const double quotient = value.get<double>() / d;
    if (!std::isfinite(quotient)) return false;
    return std::fabs(quotient - std::nearbyint(quotient)) <=
           1e-9 * std::max(1.0, std::fabs(quotient));
}

std::optional<RefTarget> parse_ref(std::string_view ref) {
    if (ref == "#") return RefTarget{};
    for (const std::string_view container :
         {std::string_view("$defs"), std::string_view("definitions")}) {
        const std::string prefix = "#/" + std::string(container) + "/";
        if (ref.substr(0, prefix.size()) != prefix) continue;
        const std::string_view token = ref.substr(prefix.size());
        if (token.empty() || token.find('/') != std::string_view::npos) return std::nullopt;
        std::string name;
        for (std::size_t i = 0; i < token.size(); ++i) {
            if (token[i] != '~') {
                name.push_back(token[i]);
                continue;
            }
            if (i + 1 >= token.size()) return std::nullopt;
            if (token[i + 1] == '0') {
                name.push_back('~');
            } else if (token[i + 1] == '1') {
                name.push_back('/');
            } else {
                return std::nullopt;
            }
            ++i;
        }
        return RefTarget{std::string(container), std::move(name)};
    }
    return std::nullopt;
}

const json* resolve(const json& root, const RefTarget& target) {
    if (target.container.empty()) return &root;
    if (!root.is_object()) return nullptr;
    const auto container = root.find(target.container);
    if (container == root.end() || !container->is_object()) return nullptr;
    const auto found = container->find(target.name);
    if (found == container->end()) return nullptr;
    return &*found;
}

}  // namespace ullm::detail::validation
