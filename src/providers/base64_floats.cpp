#include <ullm/detail/base64_floats.hpp>

#include <array>
#include <bit>
#include <cstdint>

namespace ullm::detail {

namespace {

constexpr std::string_view alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The 6-bit value of each byte of the alphabet; 64 for every other byte.
constexpr std::array<std::uint8_t, 256> sextets = [] {
    std::array<std::uint8_t, 256> table{};
    table.fill(64);
    for (std::size_t i = 0; i < alphabet.size(); ++i) {
        table[static_cast<unsigned char>(alphabet[i])] = static_cast<std::uint8_t>(i);
    }
    return table;
}();

float float_from_le(const unsigned char* bytes) {
    std::uint32_t bits = static_cast<std::uint32_t>(bytes[0]) |
                         (static_cast<std::uint32_t>(bytes[1]) << 8U) |
                         (static_cast<std::uint32_t>(bytes[2]) << 16U) |
                         (static_cast<std::uint32_t>(bytes[3]) << 24U);
    return std::bit_cast<float>(bits);
}

}  // namespace

std::string encode_base64_floats(std::span<const float> values) {
    std::string bytes;
    bytes.reserve(values.size() * 4);
    for (const float value : values) {
        const auto bits = std::bit_cast<std::uint32_t>(value);
        for (unsigned shift = 0; shift < 32; shift += 8) {
            bytes.push_back(static_cast<char>((bits >> shift) & 0xFFU));
        }
    }
    std::string text;
    text.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const auto triple =
            (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16U) |
            (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8U) |
            static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 2]));
        text.push_back(alphabet[(triple >> 18U) & 63U]);
        text.push_back(alphabet[(triple >> 12U) & 63U]);
        text.push_back(alphabet[(triple >> 6U) & 63U]);
        text.push_back(alphabet[triple & 63U]);
    }
    if (const std::size_t rest = bytes.size() - i; rest > 0) {
        std::uint32_t triple = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i]))
                               << 16U;
        if (rest == 2)
            triple |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8U;
        text.push_back(alphabet[(triple >> 18U) & 63U]);
        text.push_back(alphabet[(triple >> 12U) & 63U]);
        text.push_back(rest == 2 ? alphabet[(triple >> 6U) & 63U] : '=');
        text.push_back('=');
    }
    return text;
}

std::string decode_base64_floats(std::string_view text, std::vector<float>& out) {
    if (text.size() % 4 != 0) {
        return "its length (" + std::to_string(text.size()) + ") is not a multiple of 4";
    }
    std::size_t padding = 0;
    if (!text.empty() && text.back() == '=') padding = text[text.size() - 2] == '=' ? 2 : 1;
    const std::size_t byte_count = text.size() / 4 * 3 - padding;
    if (byte_count % 4 != 0) {
        return "it holds " + std::to_string(byte_count) +
               " bytes, which is not a whole number of float32 values";
    }
    std::string bytes(byte_count, '\0');
    std::size_t written = 0;
    const std::size_t data_end = text.size() - padding;
    for (std::size_t at = 0; at < text.size(); at += 4) {
        std::uint32_t group = 0;
        for (std::size_t k = 0; k < 4; ++k) {
            const std::size_t position = at + k;
            std::uint32_t sextet = 0;
            if (position < data_end) {
                sextet = sextets[static_cast<unsigned char>(text[position])];
                if (sextet == 64) {
                    return "byte " + std::to_string(position) + " is not a base64 character";
                }
            }
            group = (group << 6U) | sextet;
        }
        for (unsigned k = 0; k < 3 && written < byte_count; ++k) {
            bytes[written++] = static_cast<char>((group >> (16U - 8U * k)) & 0xFFU);
        }
        // The bits that padding leaves over must be zero, or the text is not canonical base64.
        if (at + 4 == text.size() && padding > 0) {
            const std::uint32_t spare = padding == 2 ? (group & 0xFFFFU) : (group & 0xFFU);
            if (spare != 0) return "its last group has non-zero bits under the padding";
        }
    }
    const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
    const std::size_t first = out.size();
    out.resize(first + byte_count / 4);
    for (std::size_t k = 0; k < byte_count / 4; ++k) out[first + k] = float_from_le(data + 4 * k);
    return {};
}

}  // namespace ullm::detail
