// The one error convention: a function that can fail returns a Status (nothing else to
// return) or a Result<T> (a value, or why there is none). Both are [[nodiscard]], so a
// failure is never dropped by accident; the message says what is wrong and, where it
// can, how to fix it ("cannot write /x/MANIFEST: No space left on device").
//
// Both say why they failed with error() (empty when ok()) and what kind of failure it is
// with code(), a StatusCode, asked through predicates rather than compared by hand:
//
//   const Status s = client.stopRun(id, &response);
//   if (s.isNotFound()) ...          // the agent has no such run
//   else if (s.isUnreachable()) ...  // the agent could not be reached or did not answer in time
//
// The codes are gRPC's, number for number (core/agents/agent_grpc.h checks it), so that a
// remote call's failure keeps its kind without gRPC's headers; a failure made without a
// code is Unknown. A Result made from a failed Status keeps that Status's code.
//
// The text type is a parameter so that one implementation serves two twins:
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

// What kind of failure: gRPC's codes with gRPC's numbers (Ok 0 ... Unauthenticated 16).
enum class StatusCode {
    Ok = 0,
    Cancelled = 1,
    Unknown = 2, // the default of a failure made without a code
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    DataLoss = 15,
    Unauthenticated = 16,
};

// The code of a Status or Result, and the questions asked of it (shared by both).
class StatusCodeQueries {
public:
    using Code = StatusCode;

    // Ok exactly when ok().
    Code code() const { return m_code; }

    bool isInvalidArgument() const { return m_code == Code::InvalidArgument; }
    bool isDeadlineExceeded() const { return m_code == Code::DeadlineExceeded; }
    bool isNotFound() const { return m_code == Code::NotFound; }
    bool isAlreadyExists() const { return m_code == Code::AlreadyExists; }
    bool isPermissionDenied() const { return m_code == Code::PermissionDenied; }
    bool isResourceExhausted() const { return m_code == Code::ResourceExhausted; }
    bool isFailedPrecondition() const { return m_code == Code::FailedPrecondition; }
    bool isUnavailable() const { return m_code == Code::Unavailable; }
    bool isUnauthenticated() const { return m_code == Code::Unauthenticated; }
    // The agent could not be reached or did not answer in time (Unavailable or
    // DeadlineExceeded), as opposed to an answer that refused.
    bool isUnreachable() const { return isUnavailable() || isDeadlineExceeded(); }

protected:
    Code m_code = Code::Ok;
};

template <class Text> class [[nodiscard]] BasicStatus : public StatusCodeQueries {
public:
    BasicStatus() = default; // success

    static BasicStatus success() { return {}; }
    // A failure of kind `code` (not Ok); `message` must say what went wrong (an empty
    // one is a bug: asserted).
    static BasicStatus failure(Code code, Text message)
    {
        assert(code != Code::Ok);
        assert(!isEmpty(message));
        BasicStatus status;
        status.m_code = code;
        status.m_message = std::move(message);
        return status;
    }
    // A failure of no particular kind (Unknown).
    static BasicStatus failure(Text message) { return failure(Code::Unknown, std::move(message)); }

    bool ok() const { return m_code == Code::Ok; }
    explicit operator bool() const { return ok(); }
    // Why it failed; empty when ok().
    const Text &error() const { return m_message; }

private:
    template <class T> static bool isEmpty(const T &text) { return text.empty(); }
    template <class T> static bool isEmpty(const T &text) requires requires { text.isEmpty(); }
    {
        return text.isEmpty();
    }

    Text m_message;
};

template <class T, class Error> class [[nodiscard]] BasicResult : public StatusCodeQueries {
public:
    // NOLINTNEXTLINE(google-explicit-constructor): `return value;` is the point
    BasicResult(T value)
        : m_value(std::move(value))
    { }
    // NOLINTNEXTLINE(google-explicit-constructor): `return Status::failure(...)` converts,
    // code and all
    BasicResult(BasicStatus<Error> status)
        : m_error(status.error())
    {
        assert(!status.ok());
        m_code = status.code();
    }

    // A failure of no particular kind (Unknown).
    static BasicResult failure(Error error)
    {
        BasicResult result { std::in_place };
        result.m_code = Code::Unknown;
        result.m_error = std::move(error);
        return result;
    }

    bool ok() const { return m_value.has_value(); }
    explicit operator bool() const { return ok(); }

    // The value; only when ok() (asserted).
    T &value() &
    {
        assert(ok());
        return *m_value;
    }
    const T &value() const &
    {
        assert(ok());
        return *m_value;
    }
    T &&value() &&
    {
        assert(ok());
        return std::move(*m_value);
    }
    T *operator->() { return &value(); }
    const T *operator->() const { return &value(); }
    T &operator*() & { return value(); }
    const T &operator*() const & { return value(); }
    T valueOr(T fallback) const & { return ok() ? *m_value : std::move(fallback); }

    // Why there is no value; empty when ok().
    const Error &error() const { return m_error; }

private:
    explicit BasicResult(std::in_place_t) { }

    std::optional<T> m_value;
    Error m_error;
};

using Status = BasicStatus<std::string>;
template <class T> using Result = BasicResult<T, std::string>;

} // namespace scalelab::common
