// A small command-line parser for kevo's subcommands: positional arguments
// and --name VALUE / --name=VALUE / boolean --name flags, checked against
// what the command declares.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kevo::cli {

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;
  std::set<std::string> bools;

  bool Has(const std::string& name) const { return values.contains(name) || bools.contains(name); }
  std::string Get(const std::string& name, const std::string& fallback = "") const {
    auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
  }
};

// `value_flags` take a value; `bool_flags` do not. Names without dashes.
// Returns InvalidArgument naming an unknown flag or a missing value.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args, const std::set<std::string>& value_flags,
                                     const std::set<std::string>& bool_flags);

// Parses an integer flag value; InvalidArgument naming the flag otherwise.
absl::StatusOr<int64_t> ParseIntFlag(const ParsedArgs& args, const std::string& name, int64_t fallback);

}  // namespace kevo::cli
