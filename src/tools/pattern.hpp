#pragma once

// Internal to src/tools: the `pattern` of a JSON Schema (an ECMA-262 regular expression)
// translated to RE2, which matches in time linear in the subject, and compiled with a memory
// bound. RE2 stays out of every public header; this one is not installed.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}  // namespace re2

namespace ullm::detail {

/// Why a pattern has no program.
enum class PatternProblem {
    none,
    /// Not a valid ECMAScript regular expression (an unclosed group, `a{2,1}`, `\q`, ...).
    malformed,
    /// Valid ECMAScript that RE2 cannot run: a lookaround, a backreference, a repeat count
    /// over 1000, a program over the memory bound, ...
    unsupported,
};

/// A compiled pattern, or why there is none. Immutable: `program` may be shared and searched
/// from many threads at once.
struct CompiledPattern {
    std::shared_ptr<const re2::RE2> program;  ///< Set when `problem` is `none`.
    PatternProblem problem = PatternProblem::none;
    std::string reason;  ///< Why, as a clause: "lookahead (?= is not supported ...".
};

/// Translates `source`, an ECMA-262 pattern, into RE2's syntax with ECMAScript's meaning
/// (`.`, `\s`, `\S`, `\uXXXX`, `\cX`, `(?<name>`, `[]` and `[^]` are rewritten) and compiles
/// it for an unanchored search over UTF-8 text within RE2's memory budget `max_memory` bytes.
/// Does not throw except `bad_alloc`; thread-safe.
CompiledPattern compile_pattern(std::string_view source, std::size_t max_memory);

/// RE2's size of the compiled program (its own measure of cost, about one instruction per
/// simple step).
int pattern_program_size(const re2::RE2& program);

/// Whether `program` matches anywhere in `text` (a search, as JSON Schema's `pattern` is not
/// anchored). Does not throw except `bad_alloc`; thread-safe.
bool pattern_search(const re2::RE2& program, std::string_view text);

}  // namespace ullm::detail
