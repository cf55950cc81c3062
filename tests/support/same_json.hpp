#pragma once

/// Whether two JSON values are equal with equal types all the way down: nlohmann's `==` takes
/// `1u` and `1` (or `1.0`) as equal, which a parser that must build exactly nlohmann's value may
/// not do. Floats compare bit for bit (the same rounding; -0.0 stays negative).

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstring>

namespace ullm::test {

inline bool same_json(const nlohmann::json& a, const nlohmann::json& b) {
    if (a.type() != b.type()) return false;
    if (a.is_object()) {
        if (a.size() != b.size()) return false;
        for (auto x = a.begin(), y = b.begin(); x != a.end(); ++x, ++y) {
            if (x.key() != y.key() || !same_json(*x, *y)) return false;
        }
        return true;
    }
    if (a.is_array()) {
        if (a.size() != b.size()) return false;
        for (std::size_t i = 0; i < a.size(); ++i) {
            if (!same_json(a[i], b[i])) return false;
        }
        return true;
    }
    if (a.is_number_float()) {
        const double x = a.get<double>();
        const double y = b.get<double>();
        return std::memcmp(&x, &y, sizeof x) == 0;
    }
    return a == b;
}

}  // namespace ullm::test
