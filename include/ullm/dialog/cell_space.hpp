#pragma once

/// The caller state a dialog works over: a `CellSpace` of JSON cells addressed by `CellLink`s,
/// with read-only (`CellReader`) and writable (`CellWriter`) views.

#include <ullm/core/json.hpp>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
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

/// The most links one lookup follows (links stored inside values, see `CellSpace::get`) before
/// it gives up with `invalid_link`.
inline constexpr std::size_t max_link_hops = 32;

/// The deepest nesting `CellSpace::render_for_model` shows; deeper containers become "…".
inline constexpr std::size_t max_render_depth = 100;

/// Whether `value` is a link as stored inside a cell value: an object whose only key is
/// `"@link"`, holding a string. (The string is not checked here; `parse_link` does that.)
[[nodiscard]] bool is_link_object(const json& value) noexcept;

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
class CellSpace;

/// Wraps each write of a `CellWriter`: calls `write` when the write may happen (under whatever
/// lock makes that decision hold), or throws to refuse it. A dialog refuses the writes of a
/// cancelled or replaced turn this way.
using CellWriteGuard = std::function<void(const std::function<void()>& write)>;

/// Keeps cells of a `CellSpace` in use, so that they are not released (see "Cell lifetime" in
/// docs/dialog.md): while a hold names a cell, `collect` keeps it and `release` refuses it. A
/// dialog instance holds its pins, its pattern instances and the cells its transcript mentions;
/// a run holds the cells it made. A default-constructed hold belongs to no space and keeps
/// nothing. Cheap to copy: copies share one hold, which lets go when the last copy is
/// destroyed; it may outlive its space. Thread-safe.
class CellHold {
public:
    CellHold() = default;

    /// Keeps the cell of `link` (its pointer is ignored). Returns false, keeping nothing, when
    /// there is no such cell or the hold belongs to no space. Does not throw but `bad_alloc`.
    bool keep(const CellLink& link);
    /// Keeps every existing cell that `value` mentions: stored links (`{"@link": …}`) and
    /// `/of:<id>` texts inside strings, as a transcript holds them.
    void keep_mentioned(const json& value);
    /// Keeps exactly the existing cells of `links` from now on.
    void assign(const std::vector<CellLink>& links);
    /// Keeps nothing from now on.
    void clear();
    /// How many cells it keeps.
    [[nodiscard]] std::size_t size() const;
    /// Whether it keeps the cell of `link`.
    [[nodiscard]] bool holds(const CellLink& link) const;

    struct Entry;  ///< Opaque: the hold as its space knows it.

private:
    friend class CellSpace;
    explicit CellHold(std::shared_ptr<Entry> entry) : entry_(std::move(entry)) {}
    std::shared_ptr<Entry> entry_;
};

/// What one `CellSpace::run_pattern` produced: the instance's own argument and result cells,
/// and the result value (already checked against the pattern's `result_schema`). `hold` keeps
/// the two cells while it (or a copy) lives; after that they are released once nothing else
/// needs them.
struct PatternRun {
    CellLink argument;
    CellLink result;
    json value;
    CellHold hold;
};

/// What one `CellSpace::run_handler` produced: the result cell the handler was given and what
/// it wrote there (null when it wrote nothing). `hold` keeps a fresh result cell while it (or a
/// copy) lives; after that it is released once nothing else needs it.
struct HandlerRun {
    CellLink result;
    json value;
    CellHold hold;
};

/// What a running handler may know about its call, as `ToolContext` tells a tool: a stop token,
/// signalled when the dialog turn that made the call is cancelled or the call's deadline passes,
/// and that deadline. The default has no stop and no deadline.
struct HandlerContext {
    std::stop_token stop_token;
    /// When the call times out; `time_point::max()` means no deadline.
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();

    /// Whether the handler should stop: a stop was requested or the deadline has passed.
    [[nodiscard]] bool stop_requested() const noexcept {
        return stop_token.stop_requested() || std::chrono::steady_clock::now() >= deadline;
    }
};

/// The callable of a handler cell. Holds either signature: `void(const json& input,
/// CellWriter& cells)`, or, for a handler that wants its stop token, `void(const json& input,
/// CellWriter& cells, const HandlerContext& context)`. Empty by default (and when made from an
/// empty `std::function` or a null function pointer). Copyable; calling it is as thread-safe as
/// the callable.
class HandlerFunction {
public:
    using Signature = void(const json& input, CellWriter& cells, const HandlerContext& context);

    HandlerFunction() = default;
    HandlerFunction(std::nullptr_t) noexcept {}

    /// A handler that receives its context.
    template <class F>
    requires(!std::same_as<std::remove_cvref_t<F>, HandlerFunction> &&
             std::invocable<F&, const json&, CellWriter&, const HandlerContext&>)
        HandlerFunction(F function) {
        if (is_empty(function)) return;
        run_ = std::move(function);
    }

    /// A handler without a context (the signature handlers had first).
    template <class F>
    requires(!std::same_as<std::remove_cvref_t<F>, HandlerFunction> &&
             !std::invocable<F&, const json&, CellWriter&, const HandlerContext&> &&
             std::invocable<F&, const json&, CellWriter&>) HandlerFunction(F function) {
        if (is_empty(function)) return;
        run_ = [run = std::move(function)](const json& input, CellWriter& cells,
                                           const HandlerContext&) mutable { run(input, cells); };
    }

    /// Whether it holds a callable.
    explicit operator bool() const noexcept { return static_cast<bool>(run_); }

    /// Calls the handler; throws what it throws (`std::bad_function_call` when empty).
    void operator()(const json& input, CellWriter& cells, const HandlerContext& context) const {
        run_(input, cells, context);
    }
    /// As above, with no stop and no deadline (how a handler was called before it had a
    /// context).
    void operator()(const json& input, CellWriter& cells) const {
        run_(input, cells, HandlerContext{});
    }

private:
    template <class F>
    static bool is_empty(const F& function) noexcept {
        if constexpr (std::is_pointer_v<F> || std::is_member_pointer_v<F>) {
            return function == nullptr;
        } else if constexpr (requires { function.target_type(); }) {
            return !static_cast<bool>(function);  // a std::function
        } else {
            return false;
        }
    }

    std::function<Signature> run_;
};

/// A callable bound to writable caller state. It receives the model's input (with `result`
/// holding the link of a fresh result cell unless the model sent its own `result`), a writer
/// that may write exactly its bound cells and that result cell, and, when it takes one, a
/// `HandlerContext` with the call's stop token. Its return value is ignored: what it writes
/// into `result` is what the model sees.
struct CellHandler {
    std::string description;
    json input_schema = json::object();  ///< JSON Schema of the input (root type object).
    std::vector<CellLink> writes;        ///< The cells it may write (besides its result cell).
    HandlerFunction run;
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

/// The default of `CellSpaceOptions::max_cells`.
inline constexpr std::size_t default_max_cells = 100'000;

/// Settings of a `CellSpace`; written with designated initialisers.
struct CellSpaceOptions {
    /// The most cells the space holds at once, caller cells and run cells together. A new cell
    /// that would pass it first makes the space release the run cells nothing needs
    /// (`collect`); when none can go, the cell is refused with `DialogError`
    /// `cell_space_full`.
    std::size_t max_cells = default_max_cells;
};

/// The cells of a caller, shared by its dialogs. Owns every cell. There are two kinds of owner:
/// *caller cells* (made by `create`, `add_handler`, `add_pattern`) stay until the caller
/// `release`s them; *run cells* (the result cell `run_handler` makes, the argument and result
/// cells of `run_pattern`) are released by the first collection after nothing needs them any
/// more: no hold (`CellHold`: a run in progress, a dialog instance's pins, pattern instances and
/// transcript, a dialog's tools and context cells) names them, and no caller cell, nor a cell
/// such a cell reaches, links to them (stored links, `/of:` texts, a handler's bound cells).
/// Collections run when the space has doubled since the last one, before it would pass
/// `max_cells`, and on `collect`. A link to a released cell is `unknown_cell`. Thread-safe:
/// every member may be called from any thread.
class CellSpace {
public:
    /// An empty space with the default options.
    CellSpace();
    /// An empty space with `options`.
    explicit CellSpace(CellSpaceOptions options);
    ~CellSpace();
    CellSpace(const CellSpace&) = delete;
    CellSpace& operator=(const CellSpace&) = delete;

    /// Creates a data cell holding `value` (checked against `schema` when given) and returns
    /// its link. `id` is generated when empty ("cell-" and 24 random hex digits); a given id
    /// must be at least 20 characters of valid UTF-8 without '/', spaces or control
    /// characters, and unused (`DialogError` `invalid_cell_id`). `schema` may describe any
    /// JSON type (`validate_value_schema`; otherwise `invalid_cell_schema`). Throws
    /// `invalid_cell_value`, `cell_space_full` (see `CellSpaceOptions::max_cells`), and
    /// `pattern_write_denied` inside a pattern. The cell is a caller cell: it stays until
    /// `release`d. Thread-safe.
    CellLink create(json value, std::optional<json> schema = std::nullopt, std::string id = {});

    /// Creates a cell holding `handler`. Same id rules as `create`; `input_schema` must pass
    /// `validate_schema` (`invalid_cell_schema`), `run` must be set (`invalid_cell_value`) and
    /// every link in `writes` must name an existing cell (`unknown_cell`).
    CellLink add_handler(CellHandler handler, std::string id = {});

    /// Creates a cell holding `pattern`. Same id rules as `create`; `argument_schema` must pass
    /// `validate_schema` and `result_schema` `validate_value_schema` (`invalid_cell_schema`),
    /// `run` must be set (`invalid_cell_value`).
    CellLink add_pattern(CellPattern pattern, std::string id = {});

    /// What the cell of `link` holds; throws `DialogError` `unknown_cell`.
    [[nodiscard]] CellKind kind(const CellLink& link) const;

    /// The value at `link`. Links stored inside values (`{"@link": …}` objects, see
    /// `is_link_object`) are followed wherever the pointer continues past them, and also when
    /// the pointer lands exactly on one, so the linked value is returned (a model's `read`
    /// shows the value, not the link); a landing link to a handler or pattern cell is returned
    /// as the link object itself. Links nested inside the returned value are not inlined. At
    /// most `max_link_hops` links are followed. Throws `unknown_cell`, `not_a_data_cell` for a
    /// handler or pattern cell, `invalid_link` (the pointer does not resolve, a stored link is
    /// malformed, the stored links form a cycle or chain too long). Thread-safe.
    [[nodiscard]] json get(const CellLink& link) const;

    /// The schema of the value `get(link)` returns: the schema of the cell it lives in (after
    /// following stored links) narrowed to its pointer through `properties`,
    /// `additionalProperties`, `items`, `$ref`, `allOf`, `anyOf` and `oneOf` (the root's
    /// `$defs` / `definitions` are carried along; a `"$ref": "#"` inside the narrowed part is
    /// not rewritten). Nullopt when that cell has no schema or the schema says nothing about
    /// the pointer. Throws like `get`. Thread-safe.
    [[nodiscard]] std::optional<json> schema(const CellLink& link) const;

    /// Writes `value` at `link` (the whole cell when the pointer is empty; the parent must
    /// exist otherwise: an object gets the member added or replaced, an array the element
    /// replaced, or appended for the index equal to its size or `-`). Stored links on the way
    /// to the parent are followed (so the write may land in another cell); a link stored at
    /// the place written is replaced, not written through. The whole new cell value is checked
    /// against the cell's schema and JSON safety (finite numbers, valid UTF-8, no `__proto__`
    /// key, nesting at most `detail::max_json_depth`). Throws `pattern_write_denied` when
    /// called while a pattern of this space runs on the calling thread (see `run_pattern`),
    /// `invalid_cell_value`, `unknown_cell`, `not_a_data_cell`, `invalid_link`. Thread-safe.
    void set(const CellLink& link, json value);

    /// The handler of a handler cell, or the pattern of a pattern cell; null for other kinds.
    /// Throws `unknown_cell`.
    [[nodiscard]] std::shared_ptr<const CellHandler> handler(const CellLink& link) const;
    [[nodiscard]] std::shared_ptr<const CellPattern> pattern(const CellLink& link) const;

    /// Runs the pattern of the pattern cell `link` as its own instance: checks `argument`
    /// against its `argument_schema` (`ToolArgumentError` `invalid_tool_arguments`), stores it
    /// in a fresh argument cell, calls `run` with a read-only view while this thread is marked
    /// as running a pattern of this space (so any `create`, `add_*` or `set` on this space from
    /// this thread throws `pattern_write_denied`), checks the result against `result_schema`
    /// (`DialogError` `invalid_pattern_result`) and stores it in a fresh result cell. The mark
    /// is per thread: threads the pattern starts itself are not covered. Exceptions from `run`
    /// propagate unchanged. The two cells are run cells, kept by the returned `hold` (and from
    /// their creation until the run returns). Throws `unknown_cell`, `not_a_pattern_cell`,
    /// `cell_space_full`. Thread-safe; the space is not locked while `run` executes.
    PatternRun run_pattern(const CellLink& link, const json& argument, std::stop_token stop = {});

    /// Runs the handler of the handler cell `link` on the model's `input` (an object, checked
    /// against `input_schema`; a `result` member is exempt unless the schema declares it). The
    /// handler writes through a `CellWriter` limited to its bound cells and its result cell:
    /// the link in `input["result"]` when the model sent one (it must be the result cell of an
    /// earlier run or lie inside a bound cell: `handler_write_denied` otherwise), otherwise a
    /// fresh run cell (null) whose link is put into the input as `result`, kept by the
    /// returned `hold`. Exceptions from `run` propagate unchanged. Throws `unknown_cell`,
    /// `not_a_handler_cell`, `invalid_link`, `ToolArgumentError`, `cell_space_full`.
    /// Thread-safe; the space is not locked while `run` executes.
    /// `guard`, when set, wraps every write the handler makes (see `CellWriter`).
    /// `context` is what the handler is told of its call (its stop token and deadline).
    HandlerRun run_handler(const CellLink& link, json input, CellWriteGuard guard = {},
                           const HandlerContext& context = {});

    /// Releases the cell of `link` now, a caller cell or a run cell: its link reads as
    /// `unknown_cell` from then on. `link` must name the whole cell (an empty pointer;
    /// `invalid_link` otherwise). Throws `unknown_cell`, `pattern_write_denied` inside a
    /// pattern, and `DialogError` `cell_in_use` (releasing nothing) while something still
    /// needs the cell: a hold names it, or a cell that is kept (a caller cell or one it
    /// reaches) links to it or binds it as a handler's cell. Thread-safe.
    void release(const CellLink& link);

    /// Releases every run cell nothing needs (see the class comment) and returns how many went.
    /// Caller cells are never released here. Thread-safe; the space is locked while it runs,
    /// which takes time in proportion to the values of the cells kept.
    std::size_t collect();

    /// How many cells the space holds now (caller and run cells). Thread-safe.
    [[nodiscard]] std::size_t cell_count() const;

    /// The options the space was made with.
    [[nodiscard]] const CellSpaceOptions& options() const noexcept;

    /// A new hold on this space keeping the existing cells of `links`. Thread-safe.
    [[nodiscard]] CellHold hold(const std::vector<CellLink>& links = {});

    /// A read-only view of this space (it has no write operation).
    [[nodiscard]] CellReader reader() const;

    /// The value as a model is shown it: links stored inside values stay `{"@link": …}`
    /// (never inlined), keys starting with '$' are dropped, nesting deeper than 100 is cut
    /// (replaced by the string "…"). Thread-safe.
    [[nodiscard]] static json render_for_model(const json& value);

    struct State;

private:
    friend class CellWriter;

    /// Wraps each write of a `CellWriter`: calls `write` when the write may happen (under whatever
    /// lock makes that decision hold), or throws to refuse it. A dialog refuses the writes of a
    /// cancelled or replaced turn this way.
    using CellWriteGuard = std::function<void(const std::function<void()>& write)>;
    friend class CellReader;
    std::shared_ptr<State> state_;
};

/// A read-only view of a `CellSpace`: the only view a pattern receives. Cheap to copy; shares
/// ownership of the space's cells, so it stays usable after the `CellSpace` is destroyed.
/// Members behave as the `CellSpace` members of the same name. Thread-safe.
class CellReader {
public:
    /// As `CellSpace::get`.
    [[nodiscard]] json get(const CellLink& link) const;
    /// As `CellSpace::schema`.
    [[nodiscard]] std::optional<json> schema(const CellLink& link) const;
    /// As `CellSpace::kind`.
    [[nodiscard]] CellKind kind(const CellLink& link) const;

private:
    friend class CellSpace;
    explicit CellReader(std::shared_ptr<CellSpace::State> state) : state_(std::move(state)) {}
    std::shared_ptr<CellSpace::State> state_;
};

/// A view of a `CellSpace` that may read everything and write only the cells it was granted
/// (a handler's bound cells and its result cell); other writes throw `DialogError`
/// `handler_write_denied`. A write is judged by where it lands after following stored links,
/// and a granted link covers its pointer and everything below it (the granted links
/// themselves are compared as written, not followed). Refers to the space, which must
/// outlive it. Thread-safe.
class CellWriter {
public:
    /// A writer over `space` that may write inside the links of `writable`, each write passed
    /// through `guard` when one is given.
    CellWriter(CellSpace& space, std::vector<CellLink> writable, CellWriteGuard guard = {});
    /// As `CellSpace::get`: reading is not limited.
    [[nodiscard]] json get(const CellLink& link) const;
    /// As `CellSpace::set`, but throws `handler_write_denied` (and writes nothing) unless the
    /// place written lies inside a granted link, and what the guard throws when it refuses.
    void set(const CellLink& link, json value);
    /// Whether `link` lies inside a cell this writer may write.
    [[nodiscard]] bool may_write(const CellLink& link) const;

private:
    CellSpace* space_;
    std::vector<CellLink> writable_;
    CellWriteGuard guard_;
};

}  // namespace ullm
