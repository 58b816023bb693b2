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

}  // namespace pcgx
