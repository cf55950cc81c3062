#include <ullm/store/session_store.hpp>

#include <ullm/core/error.hpp>

namespace ullm {

namespace {

// Whether `text` is valid UTF-8 without control characters.
bool printable_utf8(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
        const auto byte = static_cast<unsigned char>(text[i]);
        if (byte < 0x20 || byte == 0x7f) return false;
        std::size_t length = 1;
        char32_t code = byte;
        if (byte >= 0x80) {
            if ((byte & 0xe0) == 0xc0) {
                length = 2;
                code = byte & 0x1fu;
            } else if ((byte & 0xf0) == 0xe0) {
                length = 3;
                code = byte & 0x0fu;
            } else if ((byte & 0xf8) == 0xf0) {
                length = 4;
                code = byte & 0x07u;
            } else {
                return false;
            }
            if (i + length > text.size()) return false;
            for (std::size_t k = 1; k < length; ++k) {
                const auto next = static_cast<unsigned char>(text[i + k]);
                if ((next & 0xc0) != 0x80) return false;
                code = (code << 6) | (next & 0x3fu);
            }
            const char32_t minimum[] = {0, 0, 0x80, 0x800, 0x10000};
            if (code < minimum[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff))
                return false;
        }
        i += length;
    }
    return true;
}

}  // namespace

void validate_session_key(std::string_view tenant, std::string_view session_id) {
    if (tenant.size() > 128 || !printable_utf8(tenant)) {
        throw ProviderCapabilityError(
            "invalid_tenant",
            "a tenant must be empty or 1..128 bytes of UTF-8 without control characters");
    }
    if (session_id.empty() || session_id.size() > 256 || !printable_utf8(session_id)) {
        throw ProviderCapabilityError(
            "invalid_session_id",
            "a session id must be 1..256 bytes of UTF-8 without control characters");
    }
}

}  // namespace ullm
