#pragma once

/// Typed schemas: the JSON Schema of a C++ type, derived from the type, shared by typed tools
/// (`define_tool` with `TypedToolDefinition<Args>` and no `parameters`) and structured output
/// (`Client::complete_object<T>`, `Conversation::send_object<T>`).
///
/// `json_schema_of<T>()` knows `bool`, the integer and floating-point types, `std::string`,
/// `ullm::json` (any value), `std::optional<T>` (the value or null), `std::vector`, `std::deque`,
/// `std::list`, `std::set` (unique items), `std::array<T, N>` (exactly N items), maps from
/// `std::string` (an object with any keys), and every type described with a macro:
///
/// ```
/// struct Person { std::string name; int age = 0; std::optional<std::string> email; };
/// ULLM_REFLECT(Person, name, age, email)          // schema, to_json and from_json
/// enum class Mood { happy, sad };
/// ULLM_REFLECT_ENUM(Mood, happy, sad)             // "happy" / "sad", and their schema
/// ```
///
/// A described struct is an object with every field listed and required and
/// `additionalProperties: false` (what OpenAI's strict mode asks for); an optional field is
/// required but may be null, and decodes from null or a missing key. For any other type, or to
/// write the schema by hand, define `ullm::json ullm_json_schema(ullm::schema_tag<T>)` beside
/// the type (found by argument-dependent lookup); `ullm_describe(ullm::schema_tag<T>)`,
/// returning `ullm::TypeDescription`, adds descriptions for the model to a described struct.
/// Use the macros at namespace scope, in the namespace of the type.

#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ullm {

/// Names a type in the customisation functions `ullm_json_schema` and `ullm_describe`.
template <class T>
// NOLINTNEXTLINE(readability-identifier-naming): named like the standard's tags
struct schema_tag {};

/// Descriptions the model reads for a described struct and its fields.
struct TypeDescription {
    std::string description;  ///< Of the type itself; empty for none.
    /// Field name → description; every name must be a described field.
    std::vector<std::pair<std::string, std::string>> fields;
};

namespace detail {

/// One described field of a struct: its JSON name, its schema and whether it may be null.
struct ReflectedField {
    std::string name;
    json schema;
};

/// The object schema of a described struct: every field required, no other property, and the
/// descriptions of `description` (a name that is not a field throws `ToolDefinitionError`
/// `invalid_tool_schema`). Defined in src/tools/reflect.cpp.
[[nodiscard]] json reflected_object(std::string_view type_name, std::vector<ReflectedField> fields,
                                    const TypeDescription* description);

/// The string schema of a described enum with `names` as its values.
[[nodiscard]] json reflected_enum(std::initializer_list<std::string_view> names);

/// Throws `ToolArgumentError` at `/` for a value of a described enum that is not one of its
/// names (`names` lists them).
[[noreturn]] void throw_unknown_enum_value(const json& value,
                                           std::initializer_list<std::string_view> names);

/// Throws `ToolDefinitionError` `invalid_tool_schema`: `json_schema_of` went deeper than
/// `max_schema_depth` (a type that contains itself through a container).
[[noreturn]] void throw_schema_too_deep();

/// Counts the nesting of `json_schema_of` calls on this thread, to refuse a recursive type.
class SchemaDepth {
public:
    SchemaDepth();
    ~SchemaDepth();
    SchemaDepth(const SchemaDepth&) = delete;
    SchemaDepth& operator=(const SchemaDepth&) = delete;
};

template <class T>
concept HasSchemaHook = requires {
    { ullm_json_schema(schema_tag<T>{}) } -> std::convertible_to<json>;
};

template <class T>
concept HasDescribeHook = requires {
    { ullm_describe(schema_tag<T>{}) } -> std::convertible_to<TypeDescription>;
};

template <class T>
// NOLINTNEXTLINE(readability-identifier-naming): named like the standard's traits
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

template <class T>
// NOLINTNEXTLINE(readability-identifier-naming): named like the standard's traits
struct sequence_of {
    static constexpr bool value = false;
};
template <class T, class A>
struct sequence_of<std::vector<T, A>> {
    static constexpr bool value = true;
    using element = T;
};
template <class T, class A>
struct sequence_of<std::deque<T, A>> {
    static constexpr bool value = true;
    using element = T;
};
template <class T, class A>
struct sequence_of<std::list<T, A>> {
    static constexpr bool value = true;
    using element = T;
};

template <class T>
// NOLINTNEXTLINE(readability-identifier-naming): named like the standard's traits
struct set_of {
    static constexpr bool value = false;
};
template <class T, class C, class A>
struct set_of<std::set<T, C, A>> {
    static constexpr bool value = true;
    using element = T;
};

template <class T>
// NOLINTNEXTLINE(readability-identifier-naming): named like the standard's traits
struct fixed_array_of {
    static constexpr bool value = false;
};
template <class T, std::size_t N>
struct fixed_array_of<std::array<T, N>> {
    static constexpr bool value = true;
    using element = T;
    static constexpr std::size_t size = N;
};

template <class T>
// NOLINTNEXTLINE(readability-identifier-naming): named like the standard's traits
struct string_map_of {
    static constexpr bool value = false;
};
template <class T, class C, class A>
struct string_map_of<std::map<std::string, T, C, A>> {
    static constexpr bool value = true;
    using element = T;
};
template <class T, class H, class E, class A>
struct string_map_of<std::unordered_map<std::string, T, H, E, A>> {
    static constexpr bool value = true;
    using element = T;
};

template <class T>
inline constexpr bool always_false = false;

}  // namespace detail

template <class T>
[[nodiscard]] json json_schema_of();

/// Types `json_schema_of` can describe: the built-in ones listed in this header and every type
/// with a `ullm_json_schema` function (which the macros define).
template <class T>
concept Reflectable = detail::HasSchemaHook<T> || std::is_same_v<T, bool> ||
    std::is_arithmetic_v<T> || std::is_same_v<T, std::string> || std::is_same_v<T, json> ||
    detail::is_optional<T>::value || detail::sequence_of<T>::value || detail::set_of<T>::value ||
    detail::fixed_array_of<T>::value || detail::string_map_of<T>::value;

/// The JSON Schema of `T` (see the top of this header). Throws `ToolDefinitionError`
/// `invalid_tool_schema` for a type that contains itself (nesting past `max_schema_depth`) or a
/// description that names no field; otherwise only what a hand-written `ullm_json_schema`
/// throws. Thread-safe.
template <class T>
[[nodiscard]] json json_schema_of() {
    using U = std::remove_cv_t<T>;
    const detail::SchemaDepth depth;
    if constexpr (detail::HasSchemaHook<U>) {
        return ullm_json_schema(schema_tag<U>{});
    } else if constexpr (std::is_same_v<U, bool>) {
        return {{"type", "boolean"}};
    } else if constexpr (std::is_integral_v<U>) {
        static_assert(!std::is_same_v<U, char> && !std::is_same_v<U, wchar_t> &&
                          !std::is_same_v<U, char8_t> && !std::is_same_v<U, char16_t> &&
                          !std::is_same_v<U, char32_t>,
                      "ullm::json_schema_of: a character type has no JSON schema; use "
                      "std::string or an integer type");
        json schema = {{"type", "integer"}};
        // Bounds the JSON integer range (2^53) does not already give.
        if constexpr (sizeof(U) < 8) {
            schema["minimum"] = static_cast<std::int64_t>(std::numeric_limits<U>::min());
            schema["maximum"] = static_cast<std::int64_t>(std::numeric_limits<U>::max());
        } else if constexpr (std::is_unsigned_v<U>) {
            schema["minimum"] = 0;
        }
        return schema;
    } else if constexpr (std::is_floating_point_v<U>) {
        return {{"type", "number"}};
    } else if constexpr (std::is_same_v<U, std::string>) {
        return {{"type", "string"}};
    } else if constexpr (std::is_same_v<U, json>) {
        return {{"type", json::array({"object", "array", "string", "number", "boolean", "null"})}};
    } else if constexpr (detail::is_optional<U>::value) {
        return {{"anyOf",
                 json::array({json_schema_of<typename U::value_type>(), json{{"type", "null"}}})}};
    } else if constexpr (detail::sequence_of<U>::value) {
        return {{"type", "array"},
                {"items", json_schema_of<typename detail::sequence_of<U>::element>()}};
    } else if constexpr (detail::set_of<U>::value) {
        return {{"type", "array"},
                {"items", json_schema_of<typename detail::set_of<U>::element>()},
                {"uniqueItems", true}};
    } else if constexpr (detail::fixed_array_of<U>::value) {
        constexpr std::size_t size = detail::fixed_array_of<U>::size;
        return {{"type", "array"},
                {"items", json_schema_of<typename detail::fixed_array_of<U>::element>()},
                {"minItems", size},
                {"maxItems", size}};
    } else if constexpr (detail::string_map_of<U>::value) {
        return {
            {"type", "object"},
            {"additionalProperties", json_schema_of<typename detail::string_map_of<U>::element>()}};
    } else {
        static_assert(detail::always_false<U>,
                      "ullm::json_schema_of: no schema for this type; describe it with "
                      "ULLM_REFLECT or define ullm_json_schema(ullm::schema_tag<T>)");
        return {};
    }
}

namespace detail {

/// The descriptions of a described struct, or nullopt when it has none.
template <class T>
[[nodiscard]] std::optional<TypeDescription> description_of() {
    if constexpr (HasDescribeHook<T>) {
        return TypeDescription(ullm_describe(schema_tag<T>{}));
    } else {
        return std::nullopt;
    }
}

/// Throws `ToolArgumentError` for field `name`: the nested `error` with its path below the
/// field, or any other decode failure (`std::current_exception()`) at the field.
[[noreturn]] void rethrow_field_error(const char* name);

/// Decodes `value` into `out`, naming field `name` in the error when it does not decode.
template <class F>
void decode_field(const json& value, const char* name, F& out) {
    try {
        value.get_to(out);
    } catch (const std::bad_alloc&) {
        throw;
    } catch (...) {
        rethrow_field_error(name);
    }
}

/// Writes field `name` of a described struct into `out`: an empty optional as null.
template <class F>
void write_field(json& out, const char* name, const F& value) {
    if constexpr (is_optional<F>::value) {
        if (value) {
            out[name] = *value;
        } else {
            out[name] = nullptr;
        }
    } else {
        out[name] = value;
    }
}

/// Reads field `name` of a described struct from `in` into `out`: an optional field takes
/// null or a missing key as empty; any other missing key is an error naming the field.
template <class F>
void read_field(const json& in, const char* name, F& out) {
    const auto found = in.find(name);
    if constexpr (is_optional<F>::value) {
        if (found == in.end() || found->is_null()) {
            out.reset();
            return;
        }
        decode_field(*found, name, out.emplace());
    } else {
        if (found == in.end()) {
            throw ToolArgumentError(std::string("/") + name, "is required but missing");
        }
        decode_field(*found, name, out);
    }
}

}  // namespace detail

}  // namespace ullm

// clang-format off
#define ULLM_DETAIL_FE_1(M, T, a) M(T, a)
#define ULLM_DETAIL_FE_2(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_1(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_3(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_2(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_4(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_3(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_5(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_4(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_6(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_5(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_7(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_6(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_8(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_7(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_9(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_8(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_10(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_9(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_11(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_10(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_12(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_11(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_13(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_12(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_14(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_13(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_15(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_14(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_16(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_15(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_17(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_16(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_18(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_17(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_19(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_18(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_20(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_19(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_21(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_20(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_22(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_21(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_23(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_22(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_24(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_23(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_25(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_24(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_26(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_25(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_27(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_26(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_28(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_27(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_29(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_28(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_30(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_29(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_31(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_30(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_32(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_31(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_33(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_32(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_34(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_33(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_35(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_34(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_36(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_35(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_37(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_36(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_38(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_37(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_39(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_38(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_40(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_39(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_41(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_40(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_42(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_41(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_43(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_42(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_44(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_43(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_45(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_44(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_46(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_45(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_47(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_46(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_48(M, T, a, ...) M(T, a) ULLM_DETAIL_FE_47(M, T, __VA_ARGS__)
#define ULLM_DETAIL_FE_PICK(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, _32, _33, _34, _35, _36, _37, _38, _39, _40, _41, _42, _43, _44, _45, _46, _47, _48, NAME, ...) NAME
#define ULLM_DETAIL_FOR_EACH(M, T, ...) \
    ULLM_DETAIL_FE_PICK(__VA_ARGS__, ULLM_DETAIL_FE_48, ULLM_DETAIL_FE_47, ULLM_DETAIL_FE_46, ULLM_DETAIL_FE_45, ULLM_DETAIL_FE_44, ULLM_DETAIL_FE_43, ULLM_DETAIL_FE_42, ULLM_DETAIL_FE_41, ULLM_DETAIL_FE_40, ULLM_DETAIL_FE_39, ULLM_DETAIL_FE_38, ULLM_DETAIL_FE_37, ULLM_DETAIL_FE_36, ULLM_DETAIL_FE_35, ULLM_DETAIL_FE_34, ULLM_DETAIL_FE_33, ULLM_DETAIL_FE_32, ULLM_DETAIL_FE_31, ULLM_DETAIL_FE_30, ULLM_DETAIL_FE_29, ULLM_DETAIL_FE_28, ULLM_DETAIL_FE_27, ULLM_DETAIL_FE_26, ULLM_DETAIL_FE_25, ULLM_DETAIL_FE_24, ULLM_DETAIL_FE_23, ULLM_DETAIL_FE_22, ULLM_DETAIL_FE_21, ULLM_DETAIL_FE_20, ULLM_DETAIL_FE_19, ULLM_DETAIL_FE_18, ULLM_DETAIL_FE_17, ULLM_DETAIL_FE_16, ULLM_DETAIL_FE_15, ULLM_DETAIL_FE_14, ULLM_DETAIL_FE_13, ULLM_DETAIL_FE_12, ULLM_DETAIL_FE_11, ULLM_DETAIL_FE_10, ULLM_DETAIL_FE_9, ULLM_DETAIL_FE_8, ULLM_DETAIL_FE_7, ULLM_DETAIL_FE_6, ULLM_DETAIL_FE_5, ULLM_DETAIL_FE_4, ULLM_DETAIL_FE_3, ULLM_DETAIL_FE_2, ULLM_DETAIL_FE_1)(M, T, __VA_ARGS__)
// clang-format on

#define ULLM_DETAIL_SCHEMA_FIELD(T, f) \
    ::ullm::detail::ReflectedField{#f, ::ullm::json_schema_of<decltype(T::f)>()},
#define ULLM_DETAIL_TO_JSON_FIELD(T, f) ::ullm::detail::write_field(out, #f, value.f);
#define ULLM_DETAIL_FROM_JSON_FIELD(T, f) ::ullm::detail::read_field(in, #f, value.f);
#define ULLM_DETAIL_ENUM_NAME(T, e) #e,
#define ULLM_DETAIL_ENUM_TO_JSON(T, e) \
    if (value == T::e) {               \
        out = #e;                      \
        return;                        \
    }
#define ULLM_DETAIL_ENUM_FROM_JSON(T, e)                                     \
    if (in.is_string() && in.template get_ref<const std::string&>() == #e) { \
        value = T::e;                                                        \
        return;                                                              \
    }

/// Describes struct `Type` and its fields for `ullm::json_schema_of` and defines its
/// `to_json` / `from_json` (fields by their C++ names; an optional field may be null or
/// missing). Up to 48 fields; at namespace scope, in the type's namespace.
#define ULLM_REFLECT(Type, ...)                                                        \
    ULLM_REFLECT_SCHEMA(Type, __VA_ARGS__)                                             \
    [[maybe_unused]] inline void to_json(::ullm::json& out, const Type& value) {       \
        out = ::ullm::json::object();                                                  \
        ULLM_DETAIL_FOR_EACH(ULLM_DETAIL_TO_JSON_FIELD, Type, __VA_ARGS__)             \
    }                                                                                  \
    [[maybe_unused]] inline void from_json(const ::ullm::json& in, Type& value) {      \
        if (!in.is_object()) throw ::ullm::ToolArgumentError("", "must be an object"); \
        ULLM_DETAIL_FOR_EACH(ULLM_DETAIL_FROM_JSON_FIELD, Type, __VA_ARGS__)           \
    }

/// As `ULLM_REFLECT`, for a struct that has its own `to_json` / `from_json` (e.g. from
/// `NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE`): only the schema is defined.
#define ULLM_REFLECT_SCHEMA(Type, ...)                                                  \
    [[maybe_unused]] inline ::ullm::json ullm_json_schema(::ullm::schema_tag<Type>) {   \
        const auto description = ::ullm::detail::description_of<Type>();                \
        return ::ullm::detail::reflected_object(                                        \
            #Type, {ULLM_DETAIL_FOR_EACH(ULLM_DETAIL_SCHEMA_FIELD, Type, __VA_ARGS__)}, \
            description ? &*description : nullptr);                                     \
    }

/// Describes enum `Type` as the strings of its enumerators' names and defines its
/// `to_json` / `from_json`; a string that names none throws `ToolArgumentError`. Up to 48
/// enumerators; at namespace scope, in the enum's namespace.
#define ULLM_REFLECT_ENUM(Type, ...)                                                  \
    [[maybe_unused]] inline ::ullm::json ullm_json_schema(::ullm::schema_tag<Type>) { \
        return ::ullm::detail::reflected_enum(                                        \
            {ULLM_DETAIL_FOR_EACH(ULLM_DETAIL_ENUM_NAME, Type, __VA_ARGS__)});        \
    }                                                                                 \
    [[maybe_unused]] inline void to_json(::ullm::json& out, const Type& value) {      \
        ULLM_DETAIL_FOR_EACH(ULLM_DETAIL_ENUM_TO_JSON, Type, __VA_ARGS__)             \
        out = nullptr;                                                                \
    }                                                                                 \
    [[maybe_unused]] inline void from_json(const ::ullm::json& in, Type& value) {     \
        ULLM_DETAIL_FOR_EACH(ULLM_DETAIL_ENUM_FROM_JSON, Type, __VA_ARGS__)           \
        ::ullm::detail::throw_unknown_enum_value(                                     \
            in, {ULLM_DETAIL_FOR_EACH(ULLM_DETAIL_ENUM_NAME, Type, __VA_ARGS__)});    \
    }
