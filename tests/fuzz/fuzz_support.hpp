#pragma once

// Shared pieces of ullm's libFuzzer targets: the input header, chunk plans derived from it,
// capturing the one exception type the library may throw, and reporting a finding.
//
// Every target reads its input as a 4-byte header followed by the payload:
//
//   byte 0   options: target-specific switches (see each target's comment)
//   byte 1   chunking: how the payload is cut for the split run (see `chunk_plan`)
//   byte 2-3 seed: a little-endian seed for the chunk sizes
//
// Inputs shorter than the header are ignored. `run.sh` builds seed corpora by prepending
// headers to recorded provider traffic.

#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

namespace ullm::fuzz {

inline constexpr std::size_t header_size = 4;

/// A fuzz input split into its header fields and its payload.
struct Input {
    std::uint8_t options = 0;
    std::uint8_t chunking = 0;
    std::uint16_t seed = 0;
    std::string_view payload;
};

/// The header and payload of a fuzz input, or nothing when it is shorter than the header.
inline std::optional<Input> read_input(const std::uint8_t* data, std::size_t size) {
    if (size < header_size) return std::nullopt;
    Input input;
    input.options = data[0];
    input.chunking = data[1];
    input.seed = static_cast<std::uint16_t>(data[2] | (data[3] << 8));
    input.payload =
        std::string_view(reinterpret_cast<const char*>(data) + header_size, size - header_size);
    return input;
}

/// Prints a finding to stderr and aborts, so that libFuzzer saves the input.
[[noreturn]] inline void finding(std::string_view what, std::string_view detail = {}) {
    std::fprintf(stderr, "\n==ullm-fuzz== FINDING: %.*s\n", static_cast<int>(what.size()),
                 what.data());
    if (!detail.empty()) {
        std::fprintf(stderr, "%.*s\n", static_cast<int>(detail.size()), detail.data());
    }
    std::fflush(stderr);
    std::abort();
}

/// The lengths of the consecutive chunks the split run feeds, summing to `size`. Zero-length
/// chunks are included on purpose: feeding nothing must change nothing.
///
/// `chunking % 8` picks the plan: 0 one byte at a time; 1 two pieces cut at `seed`; 2 three
/// pieces; 3..6 pseudo-random lengths of 1..4, 1..32, 1..512 and 0..16 bytes; 7 lengths that
/// cycle through the seed's nibbles. Bit 3 of `chunking` adds an empty chunk between chunks.
inline std::vector<std::size_t> chunk_plan(std::size_t size, std::uint8_t chunking,
                                           std::uint16_t seed) {
    std::vector<std::size_t> lengths;
    std::uint32_t state = 0x9E3779B9u ^ (std::uint32_t{seed} << 8) ^ chunking;
    const auto next = [&state]() {
        // xorshift32: cheap, deterministic and never stuck at zero (state starts non-zero).
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        return state;
    };
    const auto random_lengths = [&](std::uint32_t min, std::uint32_t max) {
        std::size_t left = size;
        while (left > 0) {
            const std::size_t length = min + next() % (max - min + 1);
            const std::size_t taken = length < left ? length : left;
            lengths.push_back(taken);
            left -= taken;
        }
    };
    switch (chunking % 8) {
        case 0:
            lengths.assign(size, 1);
            break;
        case 1: {
            const std::size_t cut = size == 0 ? 0 : seed % (size + 1);
            lengths = {cut, size - cut};
            break;
        }
        case 2: {
            std::size_t a = size == 0 ? 0 : next() % (size + 1);
            std::size_t b = size == 0 ? 0 : next() % (size + 1);
            if (a > b) std::swap(a, b);
            lengths = {a, b - a, size - b};
            break;
        }
        case 3:
            random_lengths(1, 4);
            break;
        case 4:
            random_lengths(1, 32);
            break;
        case 5:
            random_lengths(1, 512);
            break;
        case 6:
            random_lengths(0, 16);
            break;
        default: {
            std::size_t left = size;
            for (unsigned nibble = 0; left > 0; nibble = (nibble + 1) % 4) {
                const std::size_t length = 1 + ((seed >> (4 * nibble)) & 0xFu);
                const std::size_t taken = length < left ? length : left;
                lengths.push_back(taken);
                left -= taken;
            }
            break;
        }
    }
    if ((chunking & 0x08) != 0) {
        std::vector<std::size_t> spaced;
        spaced.reserve(lengths.size() * 2);
        for (const std::size_t length : lengths) {
            spaced.push_back(length);
            spaced.push_back(0);
        }
        lengths = std::move(spaced);
    }
    return lengths;
}

/// The chunks of `payload` under `chunk_plan`, as views into it.
inline std::vector<std::string_view> chunks_of(const Input& input) {
    std::vector<std::string_view> chunks;
    std::size_t at = 0;
    for (const std::size_t length : chunk_plan(input.payload.size(), input.chunking, input.seed)) {
        chunks.push_back(input.payload.substr(at, length));
        at += length;
    }
    return chunks;
}

/// A `ullm::Error` caught while running the code under test.
struct Failure {
    std::string code;
    std::string what;
    int status = 0;
    friend bool operator==(const Failure&, const Failure&) = default;
};

/// Runs `body`; returns the `ullm::Error` it threw, if any. Any other exception is a finding:
/// only `ullm::Error` may leave the library.
template <class Body>
std::optional<Failure> capture(Body&& body) {
    try {
        std::forward<Body>(body)();
        return std::nullopt;
    } catch (const Error& error) {
        return Failure{error.code(), error.what(), error.status()};
    } catch (const std::exception& error) {
        finding("an exception that is not a ullm::Error escaped the library",
                std::string(typeid(error).name()) + ": " + error.what());
    } catch (...) {
        finding("an exception of unknown type escaped the library");
    }
}

/// The failure as text, for reports.
inline std::string describe(const std::optional<Failure>& failure) {
    if (!failure) return "no error";
    return "error " + failure->code + " (" + std::to_string(failure->status) +
           "): " + failure->what;
}

/// JSON text for reports: never throws on invalid UTF-8.
inline std::string show(const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

/// A string for reports: JSON-quoted, invalid UTF-8 replaced.
inline std::string quote(std::string_view text) {
    return show(json(std::string(text)));
}

/// Whether `text` is one complete JSON text: nlohmann treats a NUL byte as the end of the
/// input, so a NUL (never valid in JSON text, not even inside strings) is checked apart.
inline bool is_whole_json(std::string_view text) {
    return text.find('\0') == std::string_view::npos && json::accept(text);
}

}  // namespace ullm::fuzz
