// Errors as values at every boundary: a message that names the file, node, port or
// tensor at fault. Nothing in the engine throws across its public API.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace netloom {

// A refusal is an input that asks for more than this machine can give, or more
// than sizes can count, found before anything large was allocated; netloom-train
// exits 2 for it, as for any other input it will not run, rather than 1 (a run that failed).
// A collective across ranks that failed (another rank left or did not answer) is
// Collective where the run leaves naming the rank at fault to its launcher
// (TrainOptions::leaveCollectiveFailures): netloom-train exits 75 for it.
enum class ErrorKind : unsigned char { Failed, Refused, Collective };

struct Error {
  std::string message;
  ErrorKind kind = ErrorKind::Failed;
};

// Either a T or an Error. Deliberately small: ok(), value(), error().
template <class T>
class Result {
 public:
  Result(T value) : m_v(std::move(value)) {}
  Result(Error e) : m_v(std::move(e)) {}

  bool ok() const { return m_v.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() {
    assert(ok());
    return std::get<0>(m_v);
  }
  const T& value() const {
    assert(ok());
    return std::get<0>(m_v);
  }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const T& operator*() const { return value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const {
    assert(!ok());
    return std::get<1>(m_v);
  }

 private:
  std::variant<T, Error> m_v;
};

// A Result with no value: an empty optional error means success.
class Status {
 public:
  Status() = default;
  Status(Error e) : m_error(std::move(e)) {}
  static Status okStatus() { return {}; }

  bool ok() const { return !m_error; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return m_error->message; }
  Error error() const { return *m_error; }

 private:
  std::optional<Error> m_error;
};

inline Error makeError(std::string message) {
  return Error{std::move(message)};
}

inline Error makeRefusal(std::string message) {
  return Error{std::move(message), ErrorKind::Refused};
}

}  // namespace netloom
