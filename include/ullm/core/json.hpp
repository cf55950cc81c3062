#pragma once

/// The JSON type used throughout ullm: nlohmann::json with its default (insertion-unordered)
/// object map. Every public API that takes or returns JSON uses `ullm::json`.

#include <nlohmann/json.hpp>

namespace ullm {

/// The JSON value type of every public ullm API.
using json = nlohmann::json;

/// An ordered JSON value, used where key order is part of the wire format.
using ordered_json = nlohmann::ordered_json;

}  // namespace ullm
