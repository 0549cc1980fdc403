#include "cli/flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kevo::cli {

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args, const std::set<std::string>& value_flags,
                                     const std::set<std::string>& bool_flags) {
  ParsedArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    // "-o FILE": a one-letter flag with a single dash.
    bool short_flag = a.size() == 2 && a[0] == '-' && a[1] != '-';
    if (!short_flag && (a.size() < 3 || a.rfind("--", 0) != 0)) {
      out.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(short_flag ? 1 : 2);
    std::string value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (bool_flags.contains(name)) {
      if (has_value) return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      out.bools.insert(name);
    } else if (value_flags.contains(name)) {
      if (!has_value) {
        if (i + 1 >= args.size()) {
          return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
        }
        value = args[++i];
      }
      out.values[name] = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
  }
  return out;
}

absl::StatusOr<int64_t> ParseIntFlag(const ParsedArgs& args, const std::string& name, int64_t fallback) {
  if (!args.values.contains(name)) return fallback;
  int64_t v = 0;
  if (!absl::SimpleAtoi(args.values.at(name), &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be an integer, got '", args.values.at(name), "'"));
  }
  return v;
}

}  // namespace kevo::cli
