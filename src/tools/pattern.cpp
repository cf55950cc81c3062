#include "pattern.hpp"

#include "../core/text.hpp"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <utility>

namespace ullm::detail {

namespace {

// What ECMAScript's `\s` matches (WhiteSpace and LineTerminator), as code point ranges. RE2's
// own `\s` is ASCII [\t\n\f\r ] only: without \v, NBSP, the Unicode spaces and BOM.
constexpr std::array<std::pair<char32_t, char32_t>, 10> ecma_space{{{0x09, 0x0D},
                                                                    {0x20, 0x20},
                                                                    {0xA0, 0xA0},
                                                                    {0x1680, 0x1680},
                                                                    {0x2000, 0x200A},
                                                                    {0x2028, 0x2029},
                                                                    {0x202F, 0x202F},
                                                                    {0x205F, 0x205F},
                                                                    {0x3000, 0x3000},
                                                                    {0xFEFF, 0xFEFF}}};

constexpr char32_t max_code_point = 0x10FFFF;

// ECMAScript's `.` matches anything but a LineTerminator; RE2's only excludes \n.
constexpr std::string_view ecma_dot = R"([^\n\r\x{2028}\x{2029}])";

std::string code_point(char32_t c) {
    return fmt::format("\\x{{{:X}}}", static_cast<std::uint32_t>(c));
}

std::string range(char32_t low, char32_t high) {
    return low == high ? code_point(low) : code_point(low) + "-" + code_point(high);
}

// The members of a character class for `\s` (or, `negated`, `\S`), without the brackets.
std::string space_members(bool negated) {
    std::string out;
    if (!negated) {
        for (const auto& [low, high] : ecma_space) out += range(low, high);
        return out;
    }
    char32_t next = 0;
    for (const auto& [low, high] : ecma_space) {
        if (low > next) out += range(next, low - 1);
        next = high + 1;
    }
    out += range(next, max_code_point);
    return out;
}

bool is_hex(char c) {
    return hex_digit_value(c) >= 0;
}

bool is_ascii_alnum(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// ECMAScript's long General_Category names that RE2 knows by their short ones.
std::string_view short_category(std::string_view name) {
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 19> names{{
        {"Letter", "L"},
        {"Cased_Letter", "LC"},
        {"Uppercase_Letter", "Lu"},
        {"Lowercase_Letter", "Ll"},
        {"Titlecase_Letter", "Lt"},
        {"Modifier_Letter", "Lm"},
        {"Other_Letter", "Lo"},
        {"Mark", "M"},
        {"Number", "N"},
        {"Decimal_Number", "Nd"},
        {"digit", "Nd"},
        {"Letter_Number", "Nl"},
        {"Other_Number", "No"},
        {"Punctuation", "P"},
        {"punct", "P"},
        {"Symbol", "S"},
        {"Separator", "Z"},
        {"Space_Separator", "Zs"},
        {"Control", "Cc"},
    }};
    for (const auto& [long_name, short_name] : names) {
        if (name == long_name) return short_name;
    }
    return name;
}

struct Translation {
    std::string re2;
    PatternProblem problem = PatternProblem::none;
    std::string reason;
};

class Translator {
public:
    explicit Translator(std::string_view source) : source_(source) {}

    Translation run() {
        while (at_ < source_.size() && result_.problem == PatternProblem::none) {
            const char c = source_[at_];
            if (c == '\\') {
                escape();
            } else if (in_class_) {
                class_member(c);
            } else {
                outside(c);
            }
        }
        return std::move(result_);
    }

private:
    void fail(PatternProblem problem, std::string reason) {
        result_.problem = problem;
        result_.reason = std::move(reason);
    }

    [[nodiscard]] bool next_is(std::string_view text) const {
        return source_.substr(at_, text.size()) == text;
    }

    void outside(char c) {
        std::string& out = result_.re2;
        if (c == '[') {
            // ECMAScript's "[]" matches nothing and "[^]" anything; RE2 would read the "]" as
            // a member of a class that goes on.
            if (next_is("[]")) {
                out += R"([^\x00-\x{10FFFF}])";
                at_ += 2;
                return;
            }
            if (next_is("[^]")) {
                out += R"([\x00-\x{10FFFF}])";
                at_ += 3;
                return;
            }
            out += '[';
            ++at_;
            if (next_is("^")) {
                out += '^';
                ++at_;
            }
            in_class_ = true;
            return;
        }
        if (c == '.') {
            out += ecma_dot;
            ++at_;
            return;
        }
        if (c == '(' && next_is("(?")) {
            group();
            return;
        }
        out += c;
        ++at_;
    }

    void group() {
        std::string& out = result_.re2;
        if (next_is("(?:")) {
            out += "(?:";
            at_ += 3;
        } else if (next_is("(?=") || next_is("(?!")) {
            fail(PatternProblem::unsupported,
                 "lookahead " + std::string(source_.substr(at_, 3)) +
                     " is not supported (RE2 matches in linear time and has no lookaround)");
        } else if (next_is("(?<=") || next_is("(?<!")) {
            fail(PatternProblem::unsupported,
                 "lookbehind " + std::string(source_.substr(at_, 4)) +
                     " is not supported (RE2 matches in linear time and has no lookaround)");
        } else if (next_is("(?<")) {
            out += "(?P<";  // a named group; RE2 20220601 spells it the Python way
            at_ += 3;
        } else {
            fail(PatternProblem::malformed,
                 std::string(source_.substr(at_, 3)) + " is not ECMAScript syntax");
        }
    }

    void class_member(char c) {
        std::string& out = result_.re2;
        if (c == ']') {
            in_class_ = false;
        } else if (c == '[') {
            out += '\\';  // a literal in ECMAScript; RE2 would read "[:alpha:]" as a POSIX class
        }
        out += c;
        ++at_;
    }

    void escape() {
        if (at_ + 1 >= source_.size()) {
            fail(PatternProblem::malformed, "it ends with a lone backslash");
            return;
        }
        const char e = source_[at_ + 1];
        at_ += 2;
        std::string& out = result_.re2;
        switch (e) {
            case 'd':
            case 'D':
            case 'w':
            case 'W':
            case 't':
            case 'n':
            case 'r':
            case 'f':
            case 'v':
                out += '\\';
                out += e;
                return;
            case 'b':
                out += in_class_ ? std::string(R"(\x08)") : std::string(R"(\b)");
                return;
            case 'B':
                if (in_class_) {
                    fail(PatternProblem::malformed, "\\B is not allowed in a character class");
                    return;
                }
                out += R"(\B)";
                return;
            case 's':
                out += in_class_ ? space_members(false) : fmt::format("[{}]", space_members(false));
                return;
            case 'S':
                out += in_class_ ? space_members(true) : "[^" + space_members(false) + "]";
                return;
            case '0':
                if (at_ < source_.size() && source_[at_] >= '0' && source_[at_] <= '9') {
                    fail(PatternProblem::unsupported, "legacy octal escapes such as \\0" +
                                                          std::string(1, source_[at_]) +
                                                          " are not supported; write \\xHH");
                    return;
                }
                out += R"(\x00)";
                return;
            case 'x':
                if (at_ + 1 < source_.size() && is_hex(source_[at_]) && is_hex(source_[at_ + 1])) {
                    out += "\\x";
                    out += source_.substr(at_, 2);
                    at_ += 2;
                    return;
                }
                fail(PatternProblem::malformed, "\\x must be followed by two hexadecimal digits");
                return;
            case 'u':
                unicode_escape();
                return;
            case 'c':
                if (at_ < source_.size() && ((source_[at_] >= 'a' && source_[at_] <= 'z') ||
                                             (source_[at_] >= 'A' && source_[at_] <= 'Z'))) {
                    out += code_point(static_cast<char32_t>(source_[at_]) % 32);
                    ++at_;
                    return;
                }
                fail(PatternProblem::malformed, "\\c must be followed by a letter");
                return;
            case 'p':
            case 'P':
                property(e);
                return;
            case 'k':
                if (next_is("<")) {
                    fail(PatternProblem::unsupported,
                         "backreferences such as \\k<name> are not supported (RE2 matches in "
                         "linear time and cannot refer back to a group)");
                    return;
                }
                break;
            default:
                break;
        }
        if (e >= '1' && e <= '9') {
            fail(PatternProblem::unsupported,
                 in_class_ ? "octal escapes such as \\" + std::string(1, e) + " are not supported"
                           : "backreferences such as \\" + std::string(1, e) +
                                 " are not supported (RE2 matches in linear time and cannot "
                                 "refer back to a group)");
            return;
        }
        if (is_ascii_alnum(e)) {
            fail(PatternProblem::malformed, fmt::format("\\{} is not an ECMAScript escape", e));
            return;
        }
        const auto byte = static_cast<unsigned char>(e);
        if (byte >= 0x80) {
            out += e;  // an identity escape of a non-ASCII character: the character itself
        } else if (byte <= 0x20 || byte == 0x7F) {
            out += code_point(byte);
        } else {
            out += '\\';  // punctuation, escaped the same way in both syntaxes
            out += e;
        }
    }

    // \uXXXX (a UTF-16 code unit: a surrogate pair becomes one code point) or \u{X...}.
    void unicode_escape() {
        const auto four_hex = [&](std::size_t from, char32_t& value) {
            if (from + 4 > source_.size()) return false;
            value = 0;
            for (std::size_t i = from; i < from + 4; ++i) {
                const int digit = hex_digit_value(source_[i]);
                if (digit < 0) return false;
                value = value * 16 + static_cast<char32_t>(digit);
            }
            return true;
        };
        char32_t value = 0;
        if (next_is("{")) {
            const auto close = source_.find('}', at_);
            const auto digits = close == std::string_view::npos ? 0 : close - at_ - 1;
            bool valid = digits >= 1 && digits <= 6;
            for (std::size_t i = at_ + 1; valid && i < close; ++i) {
                const int digit = hex_digit_value(source_[i]);
                valid = digit >= 0;
                if (valid) value = value * 16 + static_cast<char32_t>(digit);
            }
            if (!valid || value > max_code_point) {
                fail(PatternProblem::malformed, "\\u{...} must hold a code point in hexadecimal");
                return;
            }
            at_ = close + 1;
        } else if (four_hex(at_, value)) {
            at_ += 4;
            char32_t low = 0;
            if (value >= 0xD800 && value <= 0xDBFF && next_is("\\u") && four_hex(at_ + 2, low) &&
                low >= 0xDC00 && low <= 0xDFFF) {
                value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00);
                at_ += 6;
            }
        } else {
            fail(PatternProblem::malformed,
                 "\\u must be followed by four hexadecimal digits or {code point}");
            return;
        }
        if (value >= 0xD800 && value <= 0xDFFF) {
            fail(PatternProblem::unsupported,
                 "the lone surrogate " +
                     fmt::format("\\u{:04X}", static_cast<std::uint32_t>(value)) +
                     " cannot occur in UTF-8 text");
            return;
        }
        result_.re2 += code_point(value);
    }

    // \p{Name} / \P{Name}: General_Category and Script values, which RE2 knows by their short
    // names; the `gc=` / `sc=` forms are accepted.
    void property(char letter) {
        const auto close = next_is("{") ? source_.find('}', at_) : std::string_view::npos;
        if (close == std::string_view::npos) {
            fail(PatternProblem::malformed,
                 fmt::format("\\{} must be followed by {{property}}", letter));
            return;
        }
        std::string_view name = source_.substr(at_ + 1, close - at_ - 1);
        for (const std::string_view prefix :
             {std::string_view("General_Category="), std::string_view("gc="),
              std::string_view("Script="), std::string_view("sc=")}) {
            if (name.substr(0, prefix.size()) == prefix) {
                name.remove_prefix(prefix.size());
                break;
            }
        }
        name = short_category(name);
        const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
            return is_ascii_alnum(c) || c == '_';
        });
        if (!plain) {
            fail(PatternProblem::unsupported,
                 "the Unicode property " + std::string(source_.substr(at_ - 2, close + 3 - at_)) +
                     " is not supported");
            return;
        }
        result_.re2 += fmt::format("\\{}{{{}}}", letter, name);
        at_ = close + 1;
    }

    std::string_view source_;
    std::size_t at_ = 0;
    bool in_class_ = false;
    Translation result_;
};

// Why RE2 refused the translated pattern, in terms of the pattern the author wrote.
CompiledPattern refusal(const RE2& compiled, std::size_t max_memory) {
    const std::string& arg = compiled.error_arg();
    switch (compiled.error_code()) {
        case RE2::ErrorRepeatSize: {
            // "{n,m}" with n > m is malformed; anything else is over RE2's limit of 1000, for
            // one count or for nested counts multiplied.
            unsigned long low = 0;
            unsigned long high = 0;
            if (std::sscanf(arg.c_str(), "{%lu,%lu}", &low, &high) == 2 && low > high) {
                return {nullptr, PatternProblem::malformed,
                        "the repeat " + arg + " has its numbers out of order"};
            }
            return {nullptr, PatternProblem::unsupported,
                    "the repeat " + arg +
                        " is over RE2's limit of 1000 repetitions (nested repeats multiply)"};
        }
        case RE2::ErrorPatternTooLarge:
            return {nullptr, PatternProblem::unsupported,
                    "it compiles to a program larger than the " + std::to_string(max_memory) +
                        "-byte memory bound; use a smaller repeat count, or + or * with "
                        "maxLength"};
        case RE2::ErrorBadCharRange:
            if (arg.rfind("\\p", 0) == 0 || arg.rfind("\\P", 0) == 0) {
                return {nullptr, PatternProblem::unsupported,
                        "the Unicode property " + arg + " is not supported"};
            }
            return {nullptr, PatternProblem::malformed,
                    "the character class range " + arg + " is out of order"};
        case RE2::ErrorMissingParen:
            return {nullptr, PatternProblem::malformed, "a group is not closed"};
        case RE2::ErrorUnexpectedParen:
            return {nullptr, PatternProblem::malformed, "a \")\" closes no group"};
        case RE2::ErrorMissingBracket:
            return {nullptr, PatternProblem::malformed, "a character class \"[\" is not closed"};
        case RE2::ErrorRepeatArgument:
            return {nullptr, PatternProblem::malformed,
                    "the quantifier " + arg + " has nothing to repeat"};
        case RE2::ErrorRepeatOp:
            return {nullptr, PatternProblem::malformed, "the quantifier " + arg + " is malformed"};
        case RE2::ErrorBadNamedCapture:
            return {nullptr, PatternProblem::malformed, "the group name " + arg + " is invalid"};
        default:
            return {nullptr, PatternProblem::malformed,
                    "it is not a valid regular expression (" + compiled.error() + ")"};
    }
}

}  // namespace

CompiledPattern compile_pattern(std::string_view source, std::size_t max_memory) {
    Translation translation = Translator(source).run();
    if (translation.problem != PatternProblem::none) {
        return {nullptr, translation.problem, std::move(translation.reason)};
    }
    RE2::Options options;
    options.set_encoding(RE2::Options::EncodingUTF8);
    options.set_log_errors(false);
    options.set_max_mem(static_cast<std::int64_t>(max_memory));
    // Only "does it match" is asked: no group is ever read.
    options.set_never_capture(true);
    auto program = std::make_shared<const RE2>(translation.re2, options);
    if (!program->ok()) return refusal(*program, max_memory);
    return {std::move(program), PatternProblem::none, {}};
}

int pattern_program_size(const re2::RE2& program) {
    return program.ProgramSize();
}

bool pattern_search(const re2::RE2& program, std::string_view text) {
    return RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), program);
}

}  // namespace ullm::detail
