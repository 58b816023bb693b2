#pragma once
// Errors a user can act on. Every user-facing failure in pcgx is a
// pcgx::Error whose message names the file, field, operator or argument at
// fault; the CLI prints it as one `error:` line and exits with code 2.
#include <stdexcept>
#include <string>

namespace pcgx {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Thrown while reading a file: the message is "FILE: FIELD: reason".
class FileError : public Error {
 public:
  FileError(const std::string& file, const std::string& field, const std::string& reason)
      : Error(file + ": " + (field.empty() ? std::string() : field + ": ") + reason) {}
};

// A request's or an option's field out of range: the message is
// "FIELD: reason", FIELD as the library names it ("SearchOptions.budget",
// "TrainOptions.steps"). Libraries never name a command-line flag; a front
// end that knows which of its flags set the field says so instead
// (tools/pcgx maps fields to flags).
class FieldError : public Error {
 public:
  FieldError(const std::string& field, const std::string& reason) : Error(field + ": " + reason), field_(field), reason_(reason) {}
  const std::string& field() const { return field_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string field_;
  std::string reason_;
};

}  // namespace pcgx
