#include "coordinator/proposer/proposer.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include "common/status.h"

namespace kevo::proposer {
namespace {

// Characters that structure the text form; values escape them as %XX so that
// any value (a compiler flag, an expression) survives the round trip.
bool NeedsEscape(char c) { return c == '{' || c == '}' || c == ',' || c == '=' || c == '%'; }

// Appends `s` to `out`, escaped; most values need none and are appended whole.
void AppendEscaped(std::string& out, std::string_view s) {
  if (std::none_of(s.begin(), s.end(), NeedsEscape)) {
    out.append(s);
    return;
  }
  for (char c : s) {
    if (NeedsEscape(c)) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += '%';
      out += kHex[(static_cast<unsigned char>(c) >> 4) & 0xF];
      out += kHex[static_cast<unsigned char>(c) & 0xF];
    } else {
      out += c;
    }
  }
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

absl::StatusOr<std::string> Unescape(const std::string& s, const std::string& whole) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    int hi = i + 2 < s.size() ? HexDigit(s[i + 1]) : -1;
    int lo = i + 2 < s.size() ? HexDigit(s[i + 2]) : -1;
    if (i + 2 >= s.size() || hi < 0 || lo < 0) {
      return absl::InvalidArgumentError(absl::StrCat("genome '", whole, "': bad escape in '", s, "'"));
    }
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace

std::string Genome::ToString() const {
  size_t size = recipe.size() + 2;
  for (const auto& [key, value] : params) size += key.size() + value.size() + 2;
  std::string out;
  out.reserve(size);
  AppendEscaped(out, recipe);
  out += '{';
  bool first = true;
  for (const auto& [key, value] : params) {  // std::map: sorted by key
    if (!first) out += ',';
    first = false;
    AppendEscaped(out, key);
    out += '=';
    AppendEscaped(out, value);
  }
  out += '}';
  return out;
}

absl::StatusOr<Genome> Genome::FromString(const std::string& text) {
  size_t open = text.find('{');
  if (open == std::string::npos || text.empty() || text.back() != '}' ||
      text.find('{', open + 1) != std::string::npos || text.find('}') != text.size() - 1) {
    return absl::InvalidArgumentError(absl::StrCat("genome '", text, "': want recipe{key=value,...}"));
  }
  Genome genome;
  KEVO_ASSIGN_OR_RETURN(genome.recipe, Unescape(text.substr(0, open), text));
  if (genome.recipe.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("genome '", text, "': empty recipe name"));
  }
  std::string body = text.substr(open + 1, text.size() - open - 2);
  if (body.empty()) return genome;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string::npos) comma = body.size();
    std::string item = body.substr(start, comma - start);
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("genome '", text, "': parameter '", item, "' is not key=value"));
    }
    KEVO_ASSIGN_OR_RETURN(std::string key, Unescape(item.substr(0, eq), text));
    KEVO_ASSIGN_OR_RETURN(std::string value, Unescape(item.substr(eq + 1), text));
    if (!genome.params.emplace(key, value).second) {
      return absl::InvalidArgumentError(absl::StrCat("genome '", text, "': parameter '", key, "' given twice"));
    }
    start = comma + 1;
  }
  return genome;
}

namespace {
constexpr char kSkillSeedPrefix[] = "seed:skill ";
constexpr char kSkillKeySeparator[] = "; ";
}  // namespace

std::string SkillSeedLabel(const std::vector<std::string>& skill_keys) {
  return absl::StrCat(kSkillSeedPrefix, absl::StrJoin(skill_keys, kSkillKeySeparator));
}

std::vector<std::string> SkillSeedKeys(const std::string& mutation) {
  const std::string_view prefix = kSkillSeedPrefix;
  if (!mutation.starts_with(prefix)) return {};
  return absl::StrSplit(mutation.substr(prefix.size()), kSkillKeySeparator, absl::SkipEmpty());
}

}  // namespace kevo::proposer
