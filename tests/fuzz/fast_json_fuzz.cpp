// Fuzz target: the fast JSON reader against nlohmann's. Whatever it accepts, nlohmann accepts
// too and builds the same value with the same types (`parse_json_fast`) and gives a SAX reader
// the same events (`sax_parse_fast`, also with the reader refusing an event part way); what
// nlohmann refuses, it declines; and `parse_json_exact` (fast parser, nlohmann behind it)
// always gives nlohmann's value.
//
// Options byte: which SAX event the refusing reader refuses (0: none).

#include <ullm/detail/json_checks.hpp>

#include "../../src/core/fast_json.hpp"
#include "../support/same_json.hpp"
#include "../support/sax_recorder.hpp"
#include "fuzz_support.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto input = ullm::fuzz::read_input(data, size);
    if (!input) return 0;
    const std::string text(input->payload);
    const ullm::json reference = ullm::json::parse(text, nullptr, false);
    const auto fast = ullm::detail::parse_json_fast(text);
    if (fast && reference.is_discarded()) {
        ullm::fuzz::finding("parse_json_fast accepted what nlohmann refuses",
                            ullm::fuzz::show(*fast));
    }
    if (fast && !ullm::test::same_json(*fast, reference)) {
        ullm::fuzz::finding("parse_json_fast differs from nlohmann",
                            ullm::fuzz::show(*fast) + "\nnlohmann: " + ullm::fuzz::show(reference));
    }
    for (const std::size_t refuse_at :
         {std::numeric_limits<std::size_t>::max(), static_cast<std::size_t>(input->options)}) {
        if (refuse_at == 0) continue;
        const std::string verdict = ullm::test::sax_verdict(text, refuse_at);
        if (verdict != "same" && verdict != "declined") {
            ullm::fuzz::finding("sax_parse_fast differs from nlohmann's sax_parse", verdict);
        }
    }
    if (text.find('\0') == std::string::npos) {
        const ullm::json exact = ullm::detail::parse_json_exact(text);
        if (exact.is_discarded() != reference.is_discarded() ||
            (!exact.is_discarded() && !ullm::test::same_json(exact, reference))) {
            ullm::fuzz::finding("parse_json_exact differs from nlohmann");
        }
    }
    return 0;
}
