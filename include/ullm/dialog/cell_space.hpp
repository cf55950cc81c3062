#pragma once

/// The caller state a dialog works over: a `CellSpace` of JSON cells addressed by `CellLink`s,
/// with read-only (`CellReader`) and writable (`CellWriter`) views.

#include <ullm/core/json.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace ullm {

/// Where a value lives: a cell id (at least 20 characters) and a JSON pointer inside the
/// cell's value ("" for the whole value). Written `/of:<id>/<pointer>`. A value type.
struct CellLink {
    std::string cell_id;
    std::string pointer;  ///< RFC 6901, with `~0`/`~1` escapes; "" or starting with '/'.

    /// `/of:<id><pointer>`, e.g. "/of:notes-0123456789abcdefgh/items/0".
    [[nodiscard]] std::string to_string() const;
    /// `{"@link": to_string()}`, the form shown to the model.
    [[nodiscard]] json to_json() const;
    /// The same cell with `pointer` extended by one escaped reference token.
    [[nodiscard]] CellLink child(std::string_view token) const;
    friend bool operator==(const CellLink&, const CellLink&) = default;
};

/// The shortest cell id `parse_link` accepts; shorter ones are names a model invented.
inline constexpr std::size_t min_cell_id_length = 20;

/// Parses a link as a model writes it: a string `/of:<id>/<pointer>`, an object
/// `{"@link": "…"}`, or a JSON string holding such an object. Surrounding spaces are trimmed
/// and a trailing '/' ignored. Throws `DialogError` `invalid_link` with the exact messages the
/// model is shown: `Target must start with a slash.`, `Target must include a piece handle, e.g.
/// "/of:fid1:abc123/path".`, or one saying a short id is a human name, not a cell id.
/// Thread-safe.
[[nodiscard]] CellLink parse_link(const json& target);

/// What a cell holds.
enum class CellKind { data, handler, pattern };

class CellReader;
class CellWriter;

/// A callable bound to writable caller state. It receives the model's input (with `result`
/// holding the link of a fresh result cell unless the model sent its own `result`) and a writer
/// that may write exactly its bound cells and that result cell. Its return value is ignored:
/// what it writes into `result` is what the model sees.
struct CellHandler {
    std::string description;
    json input_schema = json::object();  ///< JSON Schema of the input (root type object).
    std::vector<CellLink> writes;        ///< The cells it may write (besides its result cell).
    std::function<void(const json& input, CellWriter& cells)> run;
};

/// A computation over its inputs that returns a result. It runs as its own instance, with its
/// own argument and result cells, and sees the caller's cells read-only: it cannot write them
/// (its view has no write operation, and a write through any other route while it runs throws
/// `pattern_write_denied`).
struct CellPattern {
    std::string description;
    json argument_schema = json::object();  ///< JSON Schema of the argument (root type object).
    json result_schema = json::object();    ///< JSON Schema of the result.
    std::function<json(const json& argument, const CellReader& cells, std::stop_token stop)> run;
};

/// The cells of a caller, shared by its dialogs. Owns every cell; links stay valid for the
/// space's lifetime. Thread-safe: every member may be called from any thread.
class CellSpace {
public:
    CellSpace();
    ~CellSpace();
    CellSpace(const CellSpace&) = delete;
    CellSpace& operator=(const CellSpace&) = delete;

    /// Creates a data cell holding `value` (checked against `schema` when given) and returns
    /// its link. `id` is generated when empty; a given id must be at least 20 characters, free
    /// of '/', and unused (`DialogError` `invalid_cell_id`). Throws `invalid_cell_value`.
    CellLink create(json value, std::optional<json> schema = std::nullopt, std::string id = {});

    /// Creates a cell holding `handler`. Same id rules as `create`.
    CellLink add_handler(CellHandler handler, std::string id = {});

    /// Creates a cell holding `pattern`. Same id rules as `create`.
    CellLink add_pattern(CellPattern pattern, std::string id = {});

    /// What the cell of `link` holds; throws `DialogError` `unknown_cell`.
    [[nodiscard]] CellKind kind(const CellLink& link) const;

    /// The value at `link` (following links stored inside values: `{"@link": …}` objects).
    /// Throws `unknown_cell`, `invalid_link` (the pointer does not resolve) or
    /// `not_a_data_cell` for a handler or pattern cell.
    [[nodiscard]] json get(const CellLink& link) const;

    /// The schema of the cell of `link` narrowed to its pointer, when the cell has one.
    [[nodiscard]] std::optional<json> schema(const CellLink& link) const;

    /// Writes `value` at `link` (the whole cell when the pointer is empty; the parent must
    /// exist otherwise), checked against the cell's schema. Throws `pattern_write_denied` when
    /// called while a pattern of this space runs on the calling thread, `invalid_cell_value`,
    /// `unknown_cell`, `invalid_link`.
    void set(const CellLink& link, json value);

    /// The handler of a handler cell, or the pattern of a pattern cell; null otherwise.
    [[nodiscard]] std::shared_ptr<const CellHandler> handler(const CellLink& link) const;
    [[nodiscard]] std::shared_ptr<const CellPattern> pattern(const CellLink& link) const;

    /// A read-only view of this space.
    [[nodiscard]] CellReader reader() const;

    /// The value as a model is shown it: links stored inside values stay `{"@link": …}`
    /// (never inlined), keys starting with '$' are dropped, nesting deeper than 100 is cut
    /// (replaced by the string "…"). Thread-safe.
    [[nodiscard]] static json render_for_model(const json& value);

    struct State;

private:
    friend class CellWriter;
    friend class CellReader;
    std::shared_ptr<State> state_;
};

/// A read-only view of a `CellSpace`: the only view a pattern receives. Cheap to copy.
class CellReader {
public:
    [[nodiscard]] json get(const CellLink& link) const;
    [[nodiscard]] std::optional<json> schema(const CellLink& link) const;
    [[nodiscard]] CellKind kind(const CellLink& link) const;

private:
    friend class CellSpace;
    explicit CellReader(std::shared_ptr<CellSpace::State> state) : state_(std::move(state)) {}
    std::shared_ptr<CellSpace::State> state_;
};

/// A view of a `CellSpace` that may read everything and write only the cells it was granted
/// (a handler's bound cells and its result cell); other writes throw `DialogError`
/// `handler_write_denied`.
class CellWriter {
public:
    CellWriter(CellSpace& space, std::vector<CellLink> writable);
    [[nodiscard]] json get(const CellLink& link) const;
    void set(const CellLink& link, json value);
    /// Whether `link` lies inside a cell this writer may write.
    [[nodiscard]] bool may_write(const CellLink& link) const;

private:
    CellSpace* space_;
    std::vector<CellLink> writable_;
};

}  // namespace ullm
