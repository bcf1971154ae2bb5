// The one error convention: a function that can fail returns a Status (nothing else to
// return) or a Result<T> (a value, or why there is none). Both are [[nodiscard]], so a
// failure is never dropped by accident; the message says what is wrong and, where it
// can, how to fix it ("cannot write /x/MANIFEST: No space left on device").
//
// Both say why they failed with error() (empty when ok()). The text type is a parameter
// so that one implementation serves two twins:
//   scalelab::common::Status / common::Result<T>       std::string (agent, worker, common/)
//   scalelab::core::Status / core::Result<T>           QString (core/, app/; core/core_status.h)
// (Each twin in its layer's namespace, so that code using both layers' names never
// finds two Status.)
// A Result whose failure is a list (a plan's problems, one per field) names its error
// type: BasicResult<v1::StudyPlan, QStringList>.
//
// Value types, any thread. Std only, header only: no Qt here (the QString twin only
// instantiates the template).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace scalelab::common {

template <class Text>
class [[nodiscard]] BasicStatus {
public:
    BasicStatus() = default; // success

    static BasicStatus success() { return {}; }
    // A failure; `message` must say what went wrong (an empty one is a bug: asserted).
    static BasicStatus failure(Text message)
    {
        assert(!isEmpty(message));
        BasicStatus status;
        status.m_failed = true;
        status.m_message = std::move(message);
        return status;
    }
    // Failure when `message` is not empty: bridges the functions that still say a
    // problem as a possibly empty text (validators).
    static BasicStatus failureIf(Text message)
    {
        return isEmpty(message) ? success() : failure(std::move(message));
    }

    bool ok() const { return !m_failed; }
    explicit operator bool() const { return ok(); }
    // Why it failed; empty when ok().
    const Text &error() const { return m_message; }

private:
    template <class T>
    static bool isEmpty(const T &text) { return text.empty(); }
    template <class T>
    static bool isEmpty(const T &text) requires requires { text.isEmpty(); } { return text.isEmpty(); }

    bool m_failed = false;
    Text m_message;
};

template <class T, class Error>
class [[nodiscard]] BasicResult {
public:
    // NOLINTNEXTLINE(google-explicit-constructor): `return value;` is the point
    BasicResult(T value) : m_value(std::move(value)) {}
    // NOLINTNEXTLINE(google-explicit-constructor): `return Status::failure(...)` converts
    BasicResult(BasicStatus<Error> status) : m_error(status.error()) { assert(!status.ok()); }

    static BasicResult failure(Error error)
    {
        BasicResult result{std::in_place};
        result.m_error = std::move(error);
        return result;
    }

    bool ok() const { return m_value.has_value(); }
    explicit operator bool() const { return ok(); }

    // The value; only when ok() (asserted).
    T &value() & { assert(ok()); return *m_value; }
    const T &value() const & { assert(ok()); return *m_value; }
    T &&value() && { assert(ok()); return std::move(*m_value); }
    T *operator->() { return &value(); }
    const T *operator->() const { return &value(); }
    T &operator*() & { return value(); }
    const T &operator*() const & { return value(); }
    T valueOr(T fallback) const & { return ok() ? *m_value : std::move(fallback); }

    // Why there is no value; empty when ok().
    const Error &error() const { return m_error; }

private:
    explicit BasicResult(std::in_place_t) {}

    std::optional<T> m_value;
    Error m_error;
};

using Status = BasicStatus<std::string>;
template <class T>
using Result = BasicResult<T, std::string>;

} // namespace scalelab::common
